"""A local stand-in for the Kaggle API endpoints `letter8_tokenizer.kaggle.KaggleChain` uses.

Kaggle's servers cannot be reached from the machines this kit is developed on, so the chain is tested
against this server, which speaks the protocol the real `kaggle` client (2.2.5, kagglesdk) speaks:
`POST /api/v1/<service>/<Method>` with camelCase JSON bodies and JSON replies, Basic (user name + key) or
Bearer authentication, and a separate `PUT` upload URL for blobs. Implemented:

- security.OAuthService/IntrospectToken        (Bearer token check during `authenticate()`)
- kernels.KernelsApiService/SaveKernel          (records the push, runs the notebook in the background)
- kernels.KernelsApiService/GetKernelSessionStatus
- kernels.KernelsApiService/ListKernelSessionOutput (files with download URLs, and the log)
- kernels.KernelsApiService/GetAcceleratorQuotaStatistics
- blobs.BlobApiService/StartBlobUpload          (+ `PUT /upload/<token>`)
- datasets.DatasetApiService/CreateDataset, CreateDatasetVersion, GetDatasetStatus
- `GET /files/<kernel>/<version>/<path>`        (output file downloads)

Each pushed notebook runs with papermill in a subprocess, in a fake `/kaggle` layout under `root`:
`kaggle/input/<slug>` holds the latest version of every dataset in `datasetDataSources` (zip uploads are
expanded into a folder named after the archive, as Kaggle does) and the latest output of every kernel in
`kernelDataSources`; `kaggle/working` is the output. The literal prefix `/kaggle/` in the notebook's code is
rewritten to the fake root (a chroot would be the honest way; this is the cheap one), and
`LETTER8_KAGGLE_ROOT` points there too. A session that runs past `sessionTimeoutSeconds` (or
`session_timeout_s`) is killed and ends in ERROR. Quota is charged per session (wall time, or a fixed
`charge_s`). Faults can be injected: `fail_next['SaveKernel'] = [500]` answers the next SaveKernel with 500.
"""
import base64, json, os, re, secrets, shutil, signal, subprocess, sys, threading, time, zipfile
from datetime import datetime, timedelta, timezone
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from urllib.parse import quote, unquote


def _td(s): return f'{int(s)}s'


class KaggleStandin:
    def __init__(self, root, username='tester', key='not-a-real-key', token=None, quota_total_s=30 * 3600,
                 quota_used_s=0., charge_s=None, session_timeout_s=120, python=None, papermill_timeout_s=None):
        self.root = Path(root)
        self.root.mkdir(parents=True, exist_ok=True)
        self.username, self.key, self.token = username, key, token
        self.quota_total_s, self.quota_used_s, self.charge_s = quota_total_s, quota_used_s, charge_s
        self.session_timeout_s, self.python = session_timeout_s, python or sys.executable
        self.fail_next, self.requests, self.pushes = {}, [], []
        self.kernels, self.datasets, self.blobs = {}, {}, {}
        self.lock = threading.Lock()
        self._threads = []

    # ---- server lifecycle ----
    def start(self):
        standin = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = 'HTTP/1.1'
            def log_message(self, *a): pass
            def do_POST(self): standin._post(self)
            def do_PUT(self): standin._put(self)
            def do_GET(self): standin._get(self)

        self.httpd = ThreadingHTTPServer(('127.0.0.1', 0), Handler)
        self.httpd.daemon_threads = True
        self.url = f'http://127.0.0.1:{self.httpd.server_address[1]}'
        self._thread = threading.Thread(target=self.httpd.serve_forever, daemon=True)
        self._thread.start()
        return self

    def stop(self):
        self.httpd.shutdown()
        self.httpd.server_close()
        for k in self.kernels.values():
            for v in k['versions']:
                p = v.get('proc')
                if p is not None and p.poll() is None:
                    try: os.killpg(p.pid, signal.SIGKILL)
                    except ProcessLookupError: pass

    def __enter__(self): return self.start()
    def __exit__(self, *a): self.stop()

    def wait_idle(self, timeout=120):
        "Wait until no pushed notebook is running."
        t0 = time.time()
        while time.time() - t0 < timeout:
            if all(v['status'] not in ('QUEUED', 'RUNNING') for k in self.kernels.values() for v in k['versions']): return
            time.sleep(0.1)
        raise TimeoutError('kernels still running')

    def calls(self, method=None):
        return [m for _, m in self.requests if method is None or m == method]

    # ---- HTTP plumbing ----
    def _reply(self, h, code, body=b'', ctype='application/json', headers=None):
        if isinstance(body, (dict, list)): body = json.dumps(body).encode()
        h.send_response(code)
        h.send_header('Content-Type', ctype)
        h.send_header('Content-Length', str(len(body)))
        for k, v in (headers or {}).items(): h.send_header(k, v)
        h.end_headers()
        h.wfile.write(body)

    def _error(self, h, code, msg): self._reply(h, code, {'code': code, 'message': msg})

    def _authorized(self, h):
        a = h.headers.get('Authorization', '')
        if a.startswith('Basic '):
            try: user, _, key = base64.b64decode(a[6:]).decode().partition(':')
            except Exception: return False
            return user == self.username and key == self.key
        if a.startswith('Bearer ') and self.token: return a[7:] == self.token
        return False

    def _body(self, h):
        if 'chunked' in h.headers.get('Transfer-Encoding', ''):
            out = b''
            while True:
                n = int(h.rfile.readline().strip().split(b';')[0], 16)
                if n == 0: h.rfile.readline(); return out
                out += h.rfile.read(n); h.rfile.readline()
        n = int(h.headers.get('Content-Length') or 0)
        return h.rfile.read(n) if n else b''

    def _post(self, h):
        m = re.fullmatch(r'/api/v1/([\w.]+)/(\w+)', h.path)
        raw = self._body(h)
        if not m: return self._error(h, 404, f'no route {h.path}')
        service, method = m.groups()
        with self.lock: self.requests.append((service, method))
        body = json.loads(raw or b'{}')
        if self.fail_next.get(method):
            return self._error(h, self.fail_next[method].pop(0), f'injected failure for {method}')
        if method == 'IntrospectToken':
            ok = self.token is not None and body.get('token') == self.token
            return self._reply(h, 200, {'active': True, 'username': self.username} if ok else {'active': False})
        if not self._authorized(h): return self._error(h, 401, 'Unauthenticated')
        fn = getattr(self, f'_api_{method}', None)
        if fn is None: return self._error(h, 404, f'{service}/{method} is not implemented by the stand-in')
        try: code, reply = fn(body)
        except Exception as e: code, reply = 500, {'code': 500, 'message': f'stand-in error: {e!r}'}
        self._reply(h, code, reply)

    def _put(self, h):
        m = re.fullmatch(r'/upload/(\w+)', h.path)
        data = self._body(h)
        if not m or m[1] not in self.blobs: return self._reply(h, 404, b'', 'text/plain')
        b = self.blobs[m[1]]
        Path(b['path']).write_bytes(data)
        b['complete'] = True
        self._reply(h, 200, {})

    def _get(self, h):
        m = re.fullmatch(r'/files/([^/]+)/(\d+)/(.+)', h.path)
        if not m: return self._reply(h, 404, b'', 'text/plain')
        slug, ver, rel = m[1], int(m[2]), unquote(m[3])
        k = self.kernels.get(slug)
        if k is None or ver > len(k['versions']): return self._reply(h, 404, b'', 'text/plain')
        base = k['versions'][ver - 1]['working']
        p = (base/rel).resolve()
        if not str(p).startswith(str(base.resolve())) or not p.is_file(): return self._reply(h, 404, b'', 'text/plain')
        self._reply(h, 200, p.read_bytes(), 'application/octet-stream')

    # ---- kernels ----
    def _api_SaveKernel(self, b):
        ref = b.get('slug') or ''
        owner, _, slug = ref.partition('/')
        if owner != self.username: return 403, {'code': 403, 'message': f'cannot push to {owner}'}
        with self.lock:
            self.pushes.append(b)
            k = self.kernels.setdefault(slug, {'owner': owner, 'versions': []})
            bad = [d for d in b.get('datasetDataSources') or [] if d.split('/')[-1] not in self.datasets]
            if bad: return 200, {'ref': f'/code/{ref}', 'invalidDatasetSources': bad, 'error': 'invalid dataset sources'}
            n = len(k['versions']) + 1
            sess = self.root/'sessions'/f'{slug}-v{n}'
            v = {'number': n, 'status': 'QUEUED', 'failure': None, 'log': [], 'dir': sess,
                 'working': sess/'kaggle'/'working', 'request': b, 'proc': None}
            k['versions'].append(v)
        t = threading.Thread(target=self._run_kernel, args=(slug, v), daemon=True)
        self._threads.append(t)
        t.start()
        return 200, {'ref': f'/code/{ref}', 'url': f'{self.url}/code/{ref}', 'versionNumber': n}

    def _latest(self, b):
        k = self.kernels.get(b.get('kernelSlug'))
        if k is None or not k['versions'] or b.get('userName') != k['owner']: return None
        return k['versions'][-1]

    def _api_GetKernelSessionStatus(self, b):
        v = self._latest(b)
        if v is None: return 404, {'code': 404, 'message': 'kernel not found'}
        return 200, {'status': v['status'], **({'failureMessage': v['failure']} if v['failure'] else {})}

    def _api_ListKernelSessionOutput(self, b):
        v = self._latest(b)
        if v is None: return 404, {'code': 404, 'message': 'kernel not found'}
        files = []
        if v['status'] in ('COMPLETE', 'ERROR') and v['working'].exists():
            for p in sorted(v['working'].rglob('*')):
                if p.is_file():
                    rel = p.relative_to(v['working']).as_posix()
                    files.append({'fileName': rel, 'url': f"{self.url}/files/{b['kernelSlug']}/{v['number']}/{quote(rel)}"})
        return 200, {'files': files, 'log': json.dumps(v['log'])}

    def _api_GetAcceleratorQuotaStatistics(self, b):
        refresh = (datetime.now(timezone.utc) + timedelta(days=3)).strftime('%Y-%m-%dT%H:%M:%S.000Z')
        q = {'timeUsed': _td(self.quota_used_s), 'totalTimeAllowed': _td(self.quota_total_s), 'hasEverRun': True}
        return 200, {'quotaRefreshTime': refresh, 'gpuQuota': q,
                     'tpuQuota': {'timeUsed': '0s', 'totalTimeAllowed': _td(20 * 3600)}}

    def _mount(self, slug, v):
        inp = v['dir']/'kaggle'/'input'
        for d in v['request'].get('datasetDataSources') or []:
            s = d.split('/')[-1]
            vers = self.datasets[s]['versions']
            shutil.copytree(vers[-1], inp/s)
        for kref in v['request'].get('kernelDataSources') or []:
            s = kref.split('/')[-1]
            done = [x for x in self.kernels.get(s, {'versions': []})['versions'] if x['status'] == 'COMPLETE']
            if done: shutil.copytree(done[-1]['working'], inp/s)

    def _run_kernel(self, slug, v):
        b, sess = v['request'], v['dir']
        fake = sess/'kaggle'
        v['working'].mkdir(parents=True)
        (fake/'temp').mkdir()
        self._mount(slug, v)
        nb = json.loads(b['text'])
        for c in nb.get('cells', []):
            if c.get('cell_type') == 'code':
                src = c['source'] if isinstance(c['source'], str) else ''.join(c['source'])
                c['source'] = src.replace('/kaggle/', f'{fake}/').replace("'/kaggle'", f"'{fake}'").replace('"/kaggle"', f'"{fake}"')
        (sess/'notebook.ipynb').write_text(json.dumps(nb))
        env = {k: v_ for k, v_ in os.environ.items() if not k.startswith('KAGGLE_')}
        env.update(KAGGLE_KERNEL_RUN_TYPE='Batch', LETTER8_KAGGLE_ROOT=str(fake), TMPDIR=str(fake/'temp'),
                   PATH=f"{Path(self.python).parent}{os.pathsep}{os.environ.get('PATH', '')}")
        if not b.get('enableGpu'): env['CUDA_VISIBLE_DEVICES'] = ''
        timeout = b.get('sessionTimeoutSeconds') or self.session_timeout_s
        cmd = [self.python, '-m', 'papermill', str(sess/'notebook.ipynb'), str(sess/'__notebook__.ipynb'),
               '--cwd', str(v['working']), '-k', 'python3', '--log-output', '--no-progress-bar']
        t0 = time.time()
        v['status'] = 'RUNNING'
        with open(sess/'log.txt', 'w') as logf:
            p = subprocess.Popen(cmd, stdout=logf, stderr=subprocess.STDOUT, env=env, start_new_session=True)
            v['proc'] = p
            try: rc, killed = p.wait(timeout=timeout), False
            except subprocess.TimeoutExpired:
                os.killpg(p.pid, signal.SIGKILL); p.wait(); rc, killed = -9, True
        wall = time.time() - t0
        text = (sess/'log.txt').read_text(errors='replace')
        v['log'] = [{'stream_name': 'stdout', 'time': round(wall, 3), 'data': text}]
        if b.get('enableGpu') or b.get('enableTpu'):
            with self.lock: self.quota_used_s += self.charge_s if self.charge_s is not None else wall
        if killed: v['failure'], v['status'] = f'Your notebook tried to exceed the max run time of {timeout} s', 'ERROR'
        elif rc: v['failure'], v['status'] = 'Notebook failed: see the log', 'ERROR'
        else: v['status'] = 'COMPLETE'

    # ---- blobs and datasets ----
    def _api_StartBlobUpload(self, b):
        tok = secrets.token_hex(8)
        d = self.root/'blobs'; d.mkdir(exist_ok=True)
        self.blobs[tok] = {'name': b['name'], 'path': str(d/f"{tok}-{b['name']}"), 'complete': False}
        return 200, {'token': tok, 'createUrl': f'{self.url}/upload/{tok}'}

    def _new_version(self, slug, files):
        ds = self.datasets[slug]
        dst = self.root/'datasets'/slug/f"v{len(ds['versions']) + 1}"
        dst.mkdir(parents=True)
        for f in files:
            blob = self.blobs.get(f.get('token'))
            if blob is None or not blob['complete']: raise ValueError(f"blob {f.get('token')} not uploaded")
            name = blob['name']
            if name.endswith('.zip'):
                with zipfile.ZipFile(blob['path']) as z: z.extractall(dst/name[:-4])
            else: shutil.copy(blob['path'], dst/name)
        ds['versions'].append(dst)
        return len(ds['versions'])

    def _api_CreateDataset(self, b):
        slug = b['slug']
        if b.get('ownerSlug') != self.username: return 403, {'code': 403, 'message': 'not your account'}
        with self.lock:
            if slug in self.datasets: return 200, {'status': 'error', 'error': 'slug in use'}
            self.datasets[slug] = {'versions': [], 'private': b.get('isPrivate'), 'title': b.get('title')}
            self._new_version(slug, b.get('files') or [])
        return 200, {'ref': f"{self.username}/{slug}", 'url': f"{self.url}/datasets/{self.username}/{slug}", 'status': 'ok'}

    def _api_CreateDatasetVersion(self, b):
        slug = b['datasetSlug']
        if slug not in self.datasets: return 404, {'code': 404, 'message': 'dataset not found'}
        with self.lock: n = self._new_version(slug, (b.get('body') or {}).get('files') or [])
        return 200, {'ref': f"{self.username}/{slug}", 'url': f"{self.url}/datasets/{self.username}/{slug}/versions/{n}", 'status': 'ok'}

    def _api_GetDatasetStatus(self, b):
        if b.get('datasetSlug') not in self.datasets: return 404, {'code': 404, 'message': 'dataset not found'}
        return 200, {'status': 'READY'}
