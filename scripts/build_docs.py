"""Build the docs site as static HTML in `_docs/`, executing every notebook, without quarto.

  python scripts/build_docs.py                 # every page (what `make docs` runs)
  python scripts/build_docs.py 07_probe.ipynb  # only these pages (paths relative to nbs/); the sidebar still lists all
  python scripts/build_docs.py -j 1            # one notebook at a time (default: 2 worker processes)

The published site is built by the GitHub workflow (.github/workflows/deploy.yaml): it runs this script, so that
every page is executed (the notebooks are stored without outputs, and quarto renders a notebook without running
it), then quarto renders the executed pages in `_proc/` and the result goes to gh-pages. Quarto cannot be installed
on every machine this project is developed on, so this script also renders the pages locally, for reading and for
`tests/test_docs.py`, which opens each page in headless Chromium. It is a stand-in for quarto's page chrome, not
for nbdev's processing:

1. Pages: every notebook quarto would render (nbdev's `nbglob` over `nbs/`, recursive, names starting with `_` or
   `.` skipped), named as quarto names them (`output-file` front matter, else the numeric prefix stripped:
   `07_probe.ipynb` -> `probe.html`). Sidebar: `nbs/sidebar.yml`; site title: `nbs/nbdev.yml`.
2. Each notebook goes through nbdev's doc processors, `FilterDefaults` (the ones `proc_nbs` runs: front matter,
   `show_doc`, `#| hide`, `#| export`, doc links, ...), with one change: nbdev's `exec_show_docs`, which runs only
   imports, exports and `show_doc` cells, is replaced by a processor that runs every cell the way `nbdev-test`
   does (execnb, `IN_TEST=1`, cwd = the notebook's folder, `#| notest` and `#| eval: false` cells and
   `skip_exec` notebooks left out), so tables and plots appear. It runs before `#| hide` removes cells, so hidden
   set-up cells run too. `update_display` replaces the output it updates, as in Jupyter. Each notebook runs in a
   fresh process. Interpreter reprs in outputs (`__main__.Config`, `<function store_true at 0x..>`) become plain
   names. The processed, executed notebooks are written to `_proc/` (as `proc_nbs` does).
3. HTML: markdown with markdown-it-py, code escaped, outputs as Jupyter shows them (HTML, PNG as data URIs,
   markdown, text, streams, errors); pandoc's link attributes (`[source](url){target="_blank"}`) as HTML
   attributes; quarto cell options `echo`, `output`, `include`, `code-fold` honoured. Links to
   notebooks and to the published site (`doc_host` + `doc_baseurl`, as nbdev's doc links are written) become
   relative links between the local pages. No script or stylesheet is loaded from the network.

Exit status 1 when a notebook failed to run (the page is still written, with the error shown).
"""
import argparse, base64, html, json, os, re, shutil, sys, time
from concurrent.futures import ProcessPoolExecutor
from multiprocessing import get_context
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
NBS, OUT, PROC = ROOT/'nbs', ROOT/'_docs', ROOT/'_proc'

# ---------------------------------------------------------------- step 2: process and execute (one notebook per process)

def _procs():
    "nbdev's doc processors with `exec_show_docs` replaced by `_ExecAll`; output clean-ups moved after execution."
    from nbdev import processors as P
    from fastcore.nbio import does_cell_eval, fm_default_eval
    class _ExecAll(P.exec_show_docs):
        "Run every code cell that `nbdev-test` runs; stop at the first error; keep Jupyter's display-update semantics."
        def begin(self):
            from execnb.shell import CaptureShell
            from nbdev.config import get_config
            from nbdev.process import nb_lang
            from fastcore.xtras import str2bool
            fm = getattr(self.nb, 'frontmatter_', {}) or {}
            self.skip = nb_lang(self.nb) != 'python' or str2bool(fm.get('skip_exec', False))
            self.dflt = fm_default_eval(fm)
            self.flags = set(str(get_config().tst_flags or '').split())
            self.k = CaptureShell(); self.k.run_cell('from nbdev.showdoc import show_doc')
            self.failed, self.displays = None, {}
        def __call__(self, cell):
            if self.failed or cell.cell_type != 'code' or not cell.source.strip(): return
            d = getattr(cell, 'directives_', {}) or {}
            if self.skip:  # like nbdev: only what `show_doc` needs
                if P._do_eval(cell): self.k.cell(cell)
                return
            if not does_cell_eval(cell, self.dflt) or self.flags & d.keys(): return
            self.k.cell(cell)
            self._updates(cell)
            if self.k.exc is not None: self.failed = f'cell {cell.idx_}: {type(self.k.exc).__name__}: {self.k.exc}'
        def _updates(self, cell):
            keep = []
            for o in cell.outputs:
                if o.get('output_type') == 'stream' and isinstance(o.get('text'), list): o['text'] = ''.join(o['text'])
                t = o.pop('transient', None) or {}
                did = t.get('display_id') if isinstance(t, dict) else None
                if did and o.pop('update', False):
                    if did in self.displays: self.displays[did]['data'] = o['data']; continue
                o.pop('update', None)
                if did: self.displays[did] = o
                keep.append(o)
            cell.outputs = keep
    order = []
    for p in P.FilterDefaults().procs():
        if p is P.exec_show_docs: order.append(_ExecAll)
        elif p in (P.strip_ansi, P.hide_line, P.filter_stream_): continue
        else: order.append(p)
    i = order.index(_ExecAll) + 1
    return order[:i] + [P.strip_ansi, P.hide_line, P.filter_stream_] + order[i:], _ExecAll

def _patch_execnb():
    "execnb drops `display_id`/`update`; keep them on the output so `_ExecAll` can apply updates in place."
    import execnb.shell as S
    def _out_nb(o, fmt):
        res = S.NbResult()
        if o.stdout: res.append(S._out_stream(o.stdout, 'stdout'))
        if o.stderr: res.append(S._out_stream(o.stderr, 'stderr'))
        if o.exception: res.append(S._out_exc(o.exception))
        res.result = o.result.result
        for x in o.display_objects:
            out = S._mk_out(x.data, x.metadata)
            if getattr(x, 'transient', None): out['transient'] = dict(x.transient)
            if getattr(x, 'update', False): out['update'] = True
            res.append(out)
        if res.result is not None: res.append(S._mk_out(*fmt.format(res.result), 'execute_result'))
        for p in res:
            if p['output_type'] == 'execute_result': p['execution_count'] = o.result.execution_count
        return res
    S._out_nb = _out_nb

_REPRS = [(re.compile(r'\b__main__\.'), ''),  # classes defined in the executed notebook itself
          (re.compile(r'<function (\w+) at 0x[0-9a-f]+>'), r'\1'),  # a function used as an annotation (fastcore's store_true)
          (re.compile(r"<class '([\w.]+)'>"), r'\1')]

def clean_outputs(nb):
    "Interpreter reprs that mean nothing to a reader (`__main__.Config`, `<function store_true at 0x7f..>`) as plain names."
    def fix(v):
        if isinstance(v, list): return [fix(x) for x in v]
        if not isinstance(v, str): return v
        for rx, rep in _REPRS: v = rx.sub(rep, v)
        return v
    for c in nb.cells:
        for o in c.get('outputs', []):
            if 'data' in o: o['data'] = {k: fix(v) if k.startswith('text/') else v for k, v in o['data'].items()}
            if 'text' in o: o['text'] = fix(o['text'])

def process_notebook(src:str, dst:str) -> dict:
    "Process and execute one notebook (in this process), write it to `dst`; return what happened."
    t0 = time.time()
    os.environ['IN_TEST'] = '1'
    os.environ.setdefault('MPLBACKEND', 'module://matplotlib_inline.backend_inline')
    os.chdir(Path(src).parent)
    _patch_execnb()
    from fastcore.nbio import read_nb, write_nb
    from nbdev.process import NBProcessor
    procs, exec_cls = _procs()
    nb = read_nb(src)
    proc = NBProcessor(nb=nb, procs=procs, rm_directives='quarto')
    ex = next(p for p in proc.procs if isinstance(p, exec_cls))
    error = None
    try: proc.process()
    except Exception as e:
        import traceback; error = f'{type(e).__name__}: {e}'; traceback.print_exc()
    error = error or ex.failed
    clean_outputs(proc.nb)
    Path(dst).parent.mkdir(parents=True, exist_ok=True)
    write_nb(proc.nb, dst)
    return dict(src=src, dst=dst, error=error, seconds=round(time.time() - t0, 1))

def _worker_init(jobs:int):
    "With several workers on a small machine, one math thread each (set before any notebook imports torch)."
    if jobs > 1:
        for v in ('OMP_NUM_THREADS', 'MKL_NUM_THREADS', 'OPENBLAS_NUM_THREADS'): os.environ.setdefault(v, '1')

# ---------------------------------------------------------------- cache: re-run a notebook only when something it reads changed

CACHE = PROC/'.build_docs_cache.json'

def cache_key(rel:str, sources:list) -> str:
    "Hash of what a page's execution depends on: the notebook, notebooks it names, the package, pyproject, this script."
    import hashlib
    h, src = hashlib.sha256(), (NBS/rel).read_bytes()
    deps = [NBS/rel] + [NBS/o for o in sources if o != rel and Path(o).name.encode() in src]
    deps += sorted((ROOT/'letter8_tokenizer').rglob('*.py')) + [ROOT/'pyproject.toml', Path(__file__).resolve()]
    for p in deps:
        if p.exists(): h.update(p.as_posix().encode()); h.update(p.read_bytes())
    return h.hexdigest()

def _load_cache() -> dict:
    try: return json.loads(CACHE.read_text())
    except (OSError, ValueError): return {}

def _save_cache(c:dict):
    CACHE.parent.mkdir(parents=True, exist_ok=True); CACHE.write_text(json.dumps(c, indent=1, sort_keys=True))

# ---------------------------------------------------------------- step 1: pages and sidebar

def _yaml(p):
    import yaml
    return yaml.safe_load(Path(p).read_text()) if Path(p).exists() else {}

def page_sources() -> list:
    "Notebooks quarto renders, relative to nbs/, in a stable order."
    from nbdev.doclinks import nbglob
    return sorted(Path(f).relative_to(NBS).as_posix() for f in nbglob(NBS))

def html_name(rel:str, fm:dict|None=None) -> str:
    "Output path of notebook `rel` (relative to nbs/), as quarto names it."
    from nbdev.config import nbpath2html
    p = Path(rel)
    if fm and fm.get('output-file'): return (p.parent/fm['output-file']).as_posix()
    return nbpath2html(p).as_posix()

# ---------------------------------------------------------------- step 3: HTML

_ANSI = re.compile(r'\x1b\[[0-9;]*[A-Za-z]')

def _md():
    from markdown_it import MarkdownIt
    return MarkdownIt('commonmark', {'html': True}).enable(['table', 'strikethrough'])

def slug(text:str) -> str:
    "Pandoc's auto identifier (what quarto gives headings, and what nbdev's doc links point at)."
    s = re.sub(r'[^\w\s.-]', '', text.strip().lower(), flags=re.UNICODE)
    s = re.sub(r'\s+', '-', s)
    s = re.sub(r'^[^a-z]+', '', s)
    return s or 'section'

_ATTR_LINK = re.compile(r'\[([^\]\n]+)\]\(([^)\s]+)\)\{([^}\n]*)\}')
_KV = re.compile(r'([A-Za-z][\w-]*)="([^"]*)"')

def attr_links(text:str) -> str:
    "Pandoc's `[text](url){key=\"value\" ...}` (what nbdev writes for `source` links) as an HTML link with those attributes."
    def sub(m):
        attrs = ''.join(f' {k}="{html.escape(v, quote=True)}"' for k, v in _KV.findall(m.group(3)))
        return f'<a href="{html.escape(m.group(2), quote=True)}"{attrs}>{m.group(1)}</a>'
    return _ATTR_LINK.sub(sub, text)

class Page:
    "One page: renders markdown with heading ids unique in the page, collects the table of contents."
    def __init__(self):
        self.md, self.ids, self.toc = _md(), set(), []
    def _uid(self, s):
        base, n = s, 0
        while s in self.ids: n += 1; s = f'{base}-{n}'
        self.ids.add(s); return s
    def markdown(self, text:str, toc=True) -> str:
        toks = self.md.parse(attr_links(text))
        for i, t in enumerate(toks):
            if t.type == 'heading_open':
                inline = toks[i+1]
                txt = ''.join(c.content for c in (inline.children or []) if c.type in ('text', 'code_inline')) or inline.content
                hid = self._uid(slug(txt)); t.attrSet('id', hid)
                if toc and t.tag in ('h2', 'h3'): self.toc.append((t.tag, hid, txt))
        return self.md.renderer.render(toks, self.md.options, {})

def _text(v): return ''.join(v) if isinstance(v, list) else str(v)
def _pre(s, cls): return f'<pre class="{cls}"><code>{html.escape(_ANSI.sub("", s))}</code></pre>'

def render_output(o:dict, page:Page, widgets:dict) -> str:
    t = o.get('output_type')
    if t == 'stream':  # a carriage return overwrites the line, as in a terminal and in Jupyter (tqdm's text bars)
        txt = '\n'.join(l.rstrip('\r').rsplit('\r', 1)[-1] for l in _text(o.get('text', '')).split('\n'))
        return _pre(txt, f"cell-output cell-output-{o.get('name', 'stdout')}")
    if t == 'error':
        tb = '\n'.join(o.get('traceback') or []) or f"{o.get('ename')}: {o.get('evalue')}"
        return _pre(tb, 'cell-output cell-output-error')
    d = o.get('data', {})
    wv = d.get('application/vnd.jupyter.widget-view+json')
    if wv is not None:  # a static page has no widget manager: saved state or not, the live widget is gone
        if wv.get('model_id') not in widgets:
            return '<div class="cell-output widget-error">Error displaying widget: model not found</div>'
        return _pre(_text(d.get('text/plain', '')), 'cell-output cell-output-display widget-fallback')
    if 'text/html' in d: return f'<div class="cell-output cell-output-display">{_text(d["text/html"])}</div>'
    for mime in ('image/png', 'image/jpeg', 'image/gif'):
        if mime in d:
            w = (o.get('metadata', {}).get(mime) or {}).get('width')
            wa = f' width="{int(w)}"' if isinstance(w, (int, float)) else ''
            return f'<div class="cell-output cell-output-display"><img src="data:{mime};base64,{_text(d[mime]).strip()}"{wa} alt=""></div>'
    if 'image/svg+xml' in d: return f'<div class="cell-output cell-output-display">{_text(d["image/svg+xml"])}</div>'
    if 'text/markdown' in d: return f'<div class="cell-output cell-output-display">{page.markdown(_text(d["text/markdown"]))}</div>'
    if 'text/latex' in d: return _pre(_text(d['text/latex']), 'cell-output cell-output-display')
    if 'application/json' in d: return _pre(json.dumps(d['application/json'], indent=1), 'cell-output cell-output-display')
    if 'text/plain' in d: return _pre(_text(d['text/plain']), 'cell-output cell-output-display')
    return ''

_OPT = re.compile(r'^\s*#\|\s*([\w-]+)\s*:\s*(.*?)\s*$')

def cell_options(src:str):
    "Quarto `#| key: value` options at the top of a code cell, and the source without them."
    lines, opts = src.splitlines(), {}
    while lines and (m := _OPT.match(lines[0])):
        v = m.group(2).lower(); opts[m.group(1)] = {'true': True, 'false': False}.get(v, m.group(2)); lines.pop(0)
    return opts, '\n'.join(lines)

def render_nb(nb:dict, page:Page) -> tuple:
    "Front matter and body HTML of a processed, executed notebook."
    fm, parts = {}, []
    widgets = ((nb.get('metadata', {}).get('widgets') or {}).get('application/vnd.jupyter.widget-state+json') or {}).get('state', {})
    for c in nb['cells']:
        src = _text(c.get('source', ''))
        if c['cell_type'] == 'raw':
            if not fm and src.lstrip().startswith('---'):
                import yaml
                fm = yaml.safe_load(src.strip().strip('-')) or {}
            elif (c.get('metadata', {}).get('format') or c.get('metadata', {}).get('raw_mimetype', '')).endswith('html'): parts.append(src)
            continue
        if c['cell_type'] == 'markdown':
            if src.strip(): parts.append(page.markdown(src))
            continue
        opts, code = cell_options(src)
        if opts.get('include') is False: continue
        out = [] if opts.get('output') is False else [render_output(o, page, widgets) for o in c.get('outputs', [])]
        if opts.get('warning') is False: out = [x for x in out if 'cell-output-stderr' not in x]
        block = '' if opts.get('echo') is False or not code.strip() else f'<pre class="sourceCode python"><code>{html.escape(code)}</code></pre>'
        if block and opts.get('code-fold') not in (None, False):
            block = f'<details{" open" if opts["code-fold"] == "show" else ""}><summary>Code</summary>{block}</details>'
        if block or any(out): parts.append(f'<div class="cell">{block}{"".join(out)}</div>')
    return fm, '\n'.join(parts)

_CSS = """
*{box-sizing:border-box}body{margin:0;font:16px/1.55 system-ui,-apple-system,"Segoe UI",Roboto,sans-serif;color:#212529}
a{color:#2780e3;text-decoration:none}a:hover{text-decoration:underline}
header.navbar{background:#2780e3;padding:.6rem 1.2rem;display:flex;gap:1.5rem;align-items:center}header.navbar a{color:#fff}
header.navbar .site-title{font-weight:600;font-size:1.15rem}
.layout{display:flex;gap:2rem;max-width:1400px;margin:0 auto;padding:1rem}
nav.sidebar{flex:0 0 220px;font-size:.93rem}nav.sidebar ul{list-style:none;padding-left:.8rem;margin:.2rem 0}
nav.sidebar>ul{padding-left:0}nav.sidebar .section{font-weight:600;margin-top:.6rem}nav.sidebar a.active{font-weight:600;color:#000}
main{flex:1 1 auto;min-width:0}nav.toc{flex:0 0 200px;font-size:.85rem}nav.toc ul{list-style:none;padding-left:0}nav.toc li.h3{padding-left:.8rem}
h1.title{margin-bottom:.2rem}p.description{color:#6c757d;font-size:1.1rem;margin-top:0}
pre{background:#f8f9fa;border:1px solid #e9ecef;border-radius:4px;padding:.6rem;overflow-x:auto;font-size:.85rem}
pre.cell-output{background:#fff;border:none;border-left:3px solid #dee2e6}pre.cell-output-stderr{border-left-color:#f0ad4e}
pre.cell-output-error{border-left-color:#dc3545;background:#fff5f5}.widget-error{color:#dc3545}
.cell{margin:1rem 0}.cell-output img{max-width:100%}table{border-collapse:collapse}td,th{border:1px solid #dee2e6;padding:.25rem .5rem}
@media(max-width:900px){.layout{flex-direction:column}nav.toc{display:none}}
"""

def _rel(target:str, page:str) -> str:
    "Relative URL from output page `page` to output path `target` (both relative to `_docs/`)."
    return os.path.relpath(target, Path(page).parent.as_posix() or '.').replace(os.sep, '/')

def sidebar_html(items, names:dict, titles:dict, page:str) -> str:
    def entry(e):
        if isinstance(e, str):
            out = names.get(e) or html_name(e)
            cls = ' class="active"' if out == page else ''
            return f'<li><a href="{_rel(out, page)}"{cls}>{html.escape(titles.get(out, Path(e).stem))}</a></li>'
        if isinstance(e, dict) and 'section' in e:
            head = html.escape(str(e['section']))
            if e.get('href'): head = f'<a href="{_rel(names.get(e["href"]) or html_name(e["href"]), page)}">{head}</a>'
            return f'<li><div class="section">{head}</div><ul>{"".join(entry(x) for x in e.get("contents") or [])}</ul></li>'
        if isinstance(e, dict) and 'href' in e:
            href = e['href']
            url = href if re.match(r'\w+:', href) else _rel(names.get(href) or html_name(href), page)
            return f'<li><a href="{html.escape(url)}">{html.escape(str(e.get("text", href)))}</a></li>'
        return ''
    return f'<nav class="sidebar"><ul>{"".join(entry(e) for e in items)}</ul></nav>'

def fix_links(body:str, page:str, src_rel:str, names:dict, site_url:str) -> str:
    "Links to notebooks and to the published site become relative links between local pages."
    def sub(m):
        url = html.unescape(m.group(2))
        if site_url and url.startswith(site_url + '/'):
            path, _, frag = url[len(site_url)+1:].partition('#')
            path = path or 'index.html'
            if path.endswith('.md'): path = path[:-3]  # nbdev points at the .html.md twin of a page
            url = _rel(path, page) + (f'#{frag}' if frag else '')
        elif not re.match(r'[a-zA-Z][\w+.-]*:|#|/', url):
            path, _, frag = url.partition('#')
            if path.endswith(('.ipynb', '.qmd', '.md')):
                tgt = os.path.normpath(Path(src_rel).parent/path).replace(os.sep, '/')
                key = tgt if tgt.endswith('.ipynb') else tgt.rsplit('.', 1)[0] + '.ipynb'
                url = _rel(names.get(key) or html_name(key), page) + (f'#{frag}' if frag else '')
        return f'{m.group(1)}="{html.escape(url, quote=True)}"'
    return re.sub(r'\b(href)="([^"]*)"', sub, body)

def write_page(src_rel:str, nb:dict, names:dict, titles:dict, sidebar, site:dict) -> Path:
    page = Page()
    fm, body = render_nb(nb, page)
    out_rel = names[src_rel]
    title = str(fm.get('title') or Path(src_rel).stem)
    desc = fm.get('description') or ''
    body = fix_links(body, out_rel, src_rel, names, site['url'])
    toc = ''.join(f'<li class="{t}"><a href="#{i}">{html.escape(x)}</a></li>' for t, i, x in page.toc)
    up = _rel('.', out_rel).rstrip('/') or '.'
    repo = f'<a href="{html.escape(site["repo"])}">GitHub</a>' if site.get('repo') else ''
    doc = f"""<!DOCTYPE html>
<html lang="en"><head><meta charset="utf-8"><meta name="viewport" content="width=device-width, initial-scale=1">
<title>{html.escape(title)} – {html.escape(site['title'])}</title>
<meta name="description" content="{html.escape(str(desc))}">
<link rel="icon" href="data:,">
<style>{_CSS}</style>{'<link rel="stylesheet" href="' + up + '/styles.css">' if (OUT/'styles.css').exists() else ''}
</head><body>
<header class="navbar"><a class="site-title" href="{up}/index.html">{html.escape(site['title'])}</a>{repo}</header>
<div class="layout">{sidebar_html(sidebar, names, titles, out_rel)}
<main id="quarto-document-content"><header><h1 class="title">{html.escape(title)}</h1>{f'<p class="description">{page.md.renderInline(str(desc))}</p>' if desc else ''}</header>
{body}
</main><nav class="toc">{'<h2>On this page</h2><ul>' + toc + '</ul>' if toc else ''}</nav></div>
</body></html>
"""
    dst = OUT/out_rel
    dst.parent.mkdir(parents=True, exist_ok=True)
    dst.write_text(doc)
    return dst

def _front_title(nb_path:Path) -> tuple:
    "Title and `output-file` of a source notebook, read the way nbdev's FrontmatterProc reads them."
    from fastcore.nbio import read_nb
    from nbdev.process import NBProcessor
    from nbdev.frontmatter import FrontmatterProc
    p = NBProcessor(nb=read_nb(nb_path), procs=[FrontmatterProc], rm_directives=False); p.process()
    fm = getattr(p.nb, 'frontmatter_', {}) or {}
    return fm.get('title'), fm

def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument('pages', nargs='*', help='notebooks to (re)build, relative to nbs/ (default: all)')
    ap.add_argument('-j', '--jobs', type=int, default=2, help='worker processes (each runs one notebook at a time)')
    ap.add_argument('--force', action='store_true', help='re-run every notebook, even those unchanged since the last build')
    a = ap.parse_args(argv)
    os.chdir(ROOT)
    t0 = time.time()
    sources = page_sources()
    if a.pages:
        unknown = set(a.pages) - set(sources)
        if unknown: sys.exit(f'not a page of the site: {sorted(unknown)}; pages: {sources}')
    todo = a.pages or sources
    names, titles = {}, {}
    for s in sources:
        title, fm = _front_title(NBS/s)
        names[s] = html_name(s, fm); titles[names[s]] = title or Path(s).stem
    nbdev_yml = _yaml(NBS/'nbdev.yml').get('website', {})
    from nbdev.config import get_config
    cfg = get_config()
    site = dict(title=nbdev_yml.get('title') or cfg.title, repo=nbdev_yml.get('repo-url') or cfg.git_url,
                url=(str(cfg.doc_host or '').rstrip('/') + str(cfg.doc_baseurl or '').rstrip('/')))
    sidebar = (_yaml(NBS/'sidebar.yml').get('website', {}).get('sidebar', {}) or {}).get('contents') or [s for s in sources]
    if not a.pages and OUT.exists(): shutil.rmtree(OUT)
    OUT.mkdir(exist_ok=True)
    for extra in ('styles.css',):
        if (NBS/extra).exists(): shutil.copy2(NBS/extra, OUT/extra)
    cache = {k: v for k, v in _load_cache().items() if k in sources}
    keys = {s: cache_key(s, sources) for s in todo}
    fresh = [s for s in todo if not a.force and cache.get(s) == keys[s] and (PROC/s).exists()]
    run = [s for s in todo if s not in fresh]
    print(f'executing {len(run)} notebook(s) with {a.jobs} worker(s); {len(fresh)} unchanged since the last build'
          + (f' (reused from {PROC.name}/; --force re-runs them)' if fresh else ''), flush=True)
    results = {s: dict(src=str(NBS/s), dst=str(PROC/s), error=None, seconds=0) for s in fresh}
    if run:
        with ProcessPoolExecutor(max_workers=max(1, a.jobs), mp_context=get_context('spawn'), max_tasks_per_child=1,
                                 initializer=_worker_init, initargs=(a.jobs,)) as ex:
            futs = {s: ex.submit(process_notebook, str(NBS/s), str(PROC/s)) for s in run}
            for s, f in futs.items():
                try: r = f.result()
                except Exception as e: r = dict(src=s, dst=str(PROC/s), error=f'worker died: {type(e).__name__}: {e}', seconds=None)
                results[s] = r
                if r['error']: cache.pop(s, None)
                else: cache[s] = keys[s]
                print(f"  {s:32s} {'FAILED: ' + r['error'][:300] if r['error'] else 'ok'} ({r['seconds']}s)", flush=True)
        _save_cache(cache)
    results = [(s, results[s]) for s in todo]
    for s, r in results:
        if not Path(r['dst']).exists(): continue
        write_page(s, json.loads(Path(r['dst']).read_text()), names, titles, sidebar, site)
    failed = [s for s, r in results if r['error']]
    print(f'wrote {len(results)} page(s) to {OUT.relative_to(ROOT)}/ in {time.time() - t0:.0f}s: '
          + ', '.join(names[s] for s, _ in results))
    if failed:
        print(f'{len(failed)} notebook(s) failed to run: {failed}', file=sys.stderr); return 1
    return 0

if __name__ == '__main__': sys.exit(main())
