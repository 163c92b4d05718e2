"""The docs site: build it with `scripts/build_docs.py`, open every page in headless Chromium, and fail on what a
reader would see broken: a cell that raised, "Error displaying widget", a progress bar stuck at 0%, an image that
does not load, a link inside the site that leads nowhere (page or anchor), a JavaScript error.

The build executes every notebook the way nbdev-test does, and fails on any cell that raises: it is how `make test`
runs the notebooks, once per run. Chromium is driven through chromedriver's WebDriver HTTP API with the standard
library (nothing to install from PyPI). `make test` installs Debian's `chromium` and `chromium-driver` first
(`make system-deps`); without them the page checks fail, saying what to run. The build re-runs only the notebooks whose inputs
changed since the last build (the notebook, the package, pyproject, the script), so a warm run takes seconds and a
cold one about as long as executing every notebook once.
"""
import functools, http.server, importlib.util, json, re, shutil, socket, subprocess, sys, tempfile, threading, time
import urllib.error, urllib.parse, urllib.request
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
SITE = ROOT/'_docs'
CHROMIUM = next((p for p in map(shutil.which, ('chromium', 'chromium-browser', 'google-chrome')) if p), None)
DRIVER = shutil.which('chromedriver')
FLAGS = ['--headless', '--no-sandbox', '--disable-gpu', '--disable-quic', '--no-first-run', '--disable-background-networking',
         '--disable-component-update', '--disable-sync', '--disable-dev-shm-usage', '--window-size=1280,1024']

NO_CHROMIUM = 'headless Chromium or chromedriver is missing: run `make system-deps` (installs Debian\'s chromium and chromium-driver)'

def _build_module():
    spec = importlib.util.spec_from_file_location('build_docs', ROOT/'scripts'/'build_docs.py')
    mod = importlib.util.module_from_spec(spec); spec.loader.exec_module(mod)
    return mod

# ---------------------------------------------------------------- a minimal WebDriver client

class Chrome:
    "chromedriver on a free local port, one headless Chromium session, JSON over HTTP."
    def __init__(self):
        with socket.socket() as s: s.bind(('127.0.0.1', 0)); port = s.getsockname()[1]
        self.base, self.profile = f'http://127.0.0.1:{port}', tempfile.mkdtemp(prefix='docs-chromium-')
        self.proc = subprocess.Popen([DRIVER, f'--port={port}'], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        for _ in range(100):
            try:
                if self._call('GET', '/status').get('ready'): break
            except OSError: time.sleep(0.1)
        else: self.close(); raise RuntimeError('chromedriver did not start')
        caps = {'browserName': 'chrome', 'pageLoadStrategy': 'normal', 'goog:loggingPrefs': {'browser': 'ALL'},
                'goog:chromeOptions': {'binary': CHROMIUM, 'args': FLAGS + [f'--user-data-dir={self.profile}']}}
        self.sid = self._call('POST', '/session', {'capabilities': {'alwaysMatch': caps}})['sessionId']
        self._call('POST', f'/session/{self.sid}/timeouts', {'pageLoad': 30_000, 'script': 10_000})

    def _call(self, method, path, body=None):
        req = urllib.request.Request(self.base + path, method=method, data=None if body is None else json.dumps(body).encode(),
                                     headers={'Content-Type': 'application/json'})
        try:
            with urllib.request.urlopen(req, timeout=60) as r: return json.loads(r.read() or b'{}').get('value') or {}
        except urllib.error.HTTPError as e: raise RuntimeError(f'WebDriver {method} {path}: {e.read()[:500]!r}') from None

    def get(self, url): self._call('POST', f'/session/{self.sid}/url', {'url': url})
    def js(self, script): return self._call('POST', f'/session/{self.sid}/execute/sync', {'script': script, 'args': []})
    def logs(self) -> list: return self._call('POST', f'/session/{self.sid}/se/log', {'type': 'browser'}) or []

    def close(self):
        try: self._call('DELETE', f'/session/{self.sid}')
        except Exception: pass
        self.proc.terminate()
        try: self.proc.wait(10)
        except subprocess.TimeoutExpired: self.proc.kill()
        shutil.rmtree(self.profile, ignore_errors=True)

# ---------------------------------------------------------------- fixtures: build once, serve, visit every page once

@pytest.fixture(scope='module')
def build():
    r = subprocess.run([sys.executable, str(ROOT/'scripts'/'build_docs.py')], cwd=ROOT, capture_output=True, text=True, timeout=1800)
    return r

@pytest.fixture(scope='module')
def server(build):
    class Quiet(http.server.SimpleHTTPRequestHandler):
        def log_message(self, *a): pass
    httpd = http.server.ThreadingHTTPServer(('127.0.0.1', 0), functools.partial(Quiet, directory=str(SITE)))
    threading.Thread(target=httpd.serve_forever, daemon=True).start()
    yield f'http://127.0.0.1:{httpd.server_address[1]}/'
    httpd.shutdown(); httpd.server_close()

PAGE_JS = r"""
// outputs only: the prose may well talk about these failures
const txt = [...document.querySelectorAll('.cell-output, .widget-error')].map(e => e.innerText).join('\n');
const bar0 = e => Number(e.getAttribute('value') ?? e.getAttribute('aria-valuenow') ?? -1) === 0;
return {
  title: document.title,
  ids: [...document.querySelectorAll('[id]')].map(e => e.id).concat([...document.querySelectorAll('a[name]')].map(e => e.name)),
  links: [...document.querySelectorAll('a[href]')].map(a => a.href),
  errors: [...document.querySelectorAll('.cell-output-error')].map(e => e.innerText.slice(0, 400)),
  traceback: txt.includes('Traceback (most recent call last)'),
  widget_error: txt.includes('Error displaying widget'),
  // images from outside the site are not fetched here (no network), as links outside it are not followed
  bad_images: [...document.images].filter(i => !(i.src.startsWith('http') && !i.src.startsWith(location.origin)))
                                  .filter(i => !i.getAttribute('src') || !i.complete || i.naturalWidth === 0)
                                  .map(i => (i.getAttribute('src') || '(empty src)').slice(0, 80)),
  zero_bars: [...document.querySelectorAll('main progress, main [role=progressbar]')].filter(bar0).length
             + (txt.match(/(^|[^\d.])0(\.0+)?%\s*(\||\))/gm) || []).length,
  cells: document.querySelectorAll('.cell').length,
  // what a reader of the API docs should never see: pandoc attributes, interpreter reprs
  main_text: (document.querySelector('main') || document.body).innerText,
  outputs: txt,
};
"""

def _offline_fetch(msg:str, server:str) -> bool:
    "A resource outside the site that failed because this machine has no network (an external badge image)."
    return ('net::ERR_NAME_NOT_RESOLVED' in msg or 'net::ERR_INTERNET_DISCONNECTED' in msg) and not msg.startswith(server)

@pytest.fixture(scope='module')
def pages(server):
    "Every HTML page of the built site, opened once: what the page shows and what the browser logged."
    if not (CHROMIUM and DRIVER): pytest.fail(NO_CHROMIUM, pytrace=False)
    chrome, res = Chrome(), {}
    try:
        for f in sorted(SITE.rglob('*.html')):
            rel = f.relative_to(SITE).as_posix()
            chrome.get(server + rel)
            info = chrome.js(PAGE_JS)
            info['console'] = [f"{m.get('level')}: {m.get('message', '')[:300]}" for m in chrome.logs()
                               if (m.get('level') in ('SEVERE', 'ERROR') or 'Uncaught' in m.get('message', ''))
                               and not _offline_fetch(m.get('message', ''), server)]
            res[rel] = info
    finally: chrome.close()
    return res

# ---------------------------------------------------------------- tests

def test_build_succeeds(build):
    assert build.returncode == 0, f'scripts/build_docs.py failed:\n{build.stdout[-3000:]}\n{build.stderr[-3000:]}'

def test_every_notebook_is_a_page(build):
    bd = _build_module()
    expected = {bd.html_name(s, bd._front_title(bd.NBS/s)[1]) for s in bd.page_sources()}
    built = {f.relative_to(SITE).as_posix() for f in SITE.rglob('*.html')}
    assert 'index.html' in expected and expected <= built, f'pages missing from _docs/: {sorted(expected - built)}'

def test_pages_show_no_errors(pages):
    bad = {}
    for rel, p in pages.items():
        why = []
        if p['errors'] or p['traceback']: why.append(f"error output in a cell: {p['errors'][:2] or 'a traceback'}")
        if p['widget_error']: why.append('"Error displaying widget"')
        if p['zero_bars']: why.append(f"{p['zero_bars']} progress bar(s) stuck at 0%")
        if p['bad_images']: why.append(f"images that do not load: {p['bad_images'][:3]}")
        if p['console']: why.append(f"JavaScript/console errors: {p['console'][:3]}")
        if why: bad[rel] = why
    assert not bad, 'pages a reader would see broken:\n' + '\n'.join(f'  {k}: ' + '; '.join(v) for k, v in bad.items())

LEAKS = {'leaked attribute markup': re.compile(r'\{target=|\{\.[\w-]+\}|style="float'),
         'an interpreter module name': re.compile(r'__main__\.'),
         'a function repr': re.compile(r'<function [\w.]+ at 0x'),
         'a class repr': re.compile(r"<class '")}

def test_pages_show_no_markup_or_reprs(pages):
    "API entries read as documentation: no pandoc attributes, `__main__.X`, `<function f at 0x..>` or `<class '..'>`."
    bad = {rel: [f"{what}: ...{p['main_text'][max(m.start() - 40, 0):m.end() + 40]!r}..." for what, rx in LEAKS.items()
                 if (m := rx.search(p['main_text']))] for rel, p in pages.items()}
    bad = {k: v for k, v in bad.items() if v}
    assert not bad, 'pages with leaked markup or reprs:\n' + '\n'.join(f'  {k}: ' + '; '.join(v) for k, v in bad.items())

OUTPUT_LEAKS = {'a warning': re.compile(r'\b\w*Warning: '),
                'a temporary path': re.compile(r'(/tmp/|/var/folders/|\\Temp\\)\S*')}

def test_outputs_show_no_warnings_or_temp_paths(pages):
    """Cell outputs read as results: no Python warnings, no temporary folders (the checkout the pages are built in may
    itself lie in one, as a CI clone under /tmp does: that path is the build's working folder, not a leak)."""
    shown = {rel: p['outputs'].replace(str(ROOT), '<checkout>') for rel, p in pages.items()}
    bad = {rel: [f"{what}: ...{out[max(m.start() - 60, 0):m.end() + 40]!r}..." for what, rx in OUTPUT_LEAKS.items()
                 if (m := rx.search(out))] for rel, out in shown.items()}
    bad = {k: v for k, v in bad.items() if v}
    assert not bad, 'pages whose outputs leak warnings or paths:\n' + '\n'.join(f'  {k}: ' + '; '.join(v) for k, v in bad.items())

def test_links_inside_the_site_resolve(pages, server):
    broken = []
    for rel, p in pages.items():
        for href in p['links']:
            if not href.startswith(server): continue  # outside the site: not fetched (no network here)
            u = urllib.parse.urlsplit(href)
            target = urllib.parse.unquote(u.path[len(urllib.parse.urlsplit(server).path):]) or 'index.html'
            if target.endswith('/'): target += 'index.html'
            if not (SITE/target).is_file(): broken.append(f'{rel} -> {target} (no such page)'); continue
            frag = urllib.parse.unquote(u.fragment)
            if frag and target in pages and frag not in pages[target]['ids']:
                broken.append(f'{rel} -> {target}#{frag} (no such anchor)')
    assert not broken, f'{len(broken)} broken link(s) inside the site:\n  ' + '\n  '.join(sorted(set(broken))[:40])

def test_pages_have_titles(pages):
    assert 'index.html' in pages
    untitled = [rel for rel, p in pages.items() if not p['title'].strip()]
    assert not untitled, f'pages with no title: {untitled}'
