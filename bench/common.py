"""The one helper every bench script imports: where the data and the built catalogs are, and how a result is written.

Data (Amazon Beauty's interactions and LETTER's released IDs) is read in place from a data root: `--data DIR`, else
$LETTER8_DATA, else `../shared/data` beside the clone. Catalogs the benches build (WordNet's noun synsets, embedded)
go to a cache root: $LETTER8_CACHE, else the user's cache folder (`~/.cache/letter8` on Linux). Neither is ever a
folder of the machine a result was measured on.

Every result file goes through `write_result`, which adds `meta.command` (the exact `python bench/...` command line)
and `meta.env` (Python, torch, numpy and faiss versions, CPUs, threads, platform, GPU, git commit) to the JSON, so
the Results page (`nbs/results.ipynb`) reads from each file what made it.
"""
import json, os, platform, shlex, subprocess, sys, time
from pathlib import Path
import numpy as np

ROOT = Path(__file__).resolve().parents[1]  # the clone
RESULTS = ROOT/'bench'/'results'

# data ------------------------------------------------------------------------------------------------------------------

def data_root(flag:str|None=None) -> Path:
    "The data root: `flag` (a script's --data), else $LETTER8_DATA, else `../shared/data` beside the clone."
    return Path(flag or os.environ.get('LETTER8_DATA') or ROOT.parent/'shared'/'data').expanduser()

def add_data_flag(parser):
    "The --data flag every script that reads shared data takes."
    parser.add_argument('--data', default=None, help='data root holding beauty/Beauty.inter.json and beauty/Beauty.index.json '
                                                     '(default: $LETTER8_DATA, else ../shared/data beside the clone)')

def beauty(flag:str|None=None) -> Path:
    "LETTER's Amazon Beauty folder (Beauty.inter.json, Beauty.index.json) under the data root; exits with the fix when missing."
    d = data_root(flag)/'beauty'
    if not (d/'Beauty.inter.json').is_file():
        sys.exit(f"{d/'Beauty.inter.json'}: missing. Point --data (or $LETTER8_DATA) at the folder that holds beauty/Beauty.inter.json.")
    return d

def cache_root() -> Path:
    "Where built catalogs go: $LETTER8_CACHE, else the user's cache folder."
    if os.environ.get('LETTER8_CACHE'): return Path(os.environ['LETTER8_CACHE']).expanduser()
    try: from platformdirs import user_cache_dir
    except ImportError: return Path(os.environ.get('XDG_CACHE_HOME') or Path.home()/'.cache')/'letter8'
    return Path(user_cache_dir('letter8'))

def wordnet_folder(n:int|None=20000) -> Path:
    "The cache folder of the WordNet catalog of `n` synsets (0 or None: all 82,115): wordnet-20k, wordnet-80k, wordnet-full."
    return cache_root()/(f"wordnet-{n // 1000}k" if n and n % 1000 == 0 else f"wordnet-{n or 'full'}")

def catalog_tag(n:int|None=20000, catalog:str|None=None) -> str:
    "The catalog's part of a result file's name: '20k', '80k', 'full', or the name of the folder `catalog`."
    return Path(catalog).name if catalog else wordnet_folder(n).name.removeprefix('wordnet-')

def wordnet(n:int|None=20000, catalog:str|None=None):
    "The WordNet catalog of `n` synsets (built into the cache the first time), or the catalog folder `catalog` (items.npy, labels.npy)."
    from letter8_tokenizer.data import Items
    from letter8_tokenizer.text import wordnet_catalog
    if catalog:
        c = Path(catalog)
        if not (c/'items.npy').is_file(): sys.exit(f"--catalog {c}: no items.npy there; leave --catalog out to use the WordNet catalog of --n synsets.")
        return Items(c/'items.npy', labels=c/'labels.npy' if (c/'labels.npy').is_file() else None)
    return wordnet_catalog(wordnet_folder(n), n_items=n or None)

# The input forms a WordNet run can train on: the embeddings as given, L2-normalised again, standardised per dimension,
# scaled by 1e-3 or 1e3. The tokenizer's normaliser must make them all train alike.
TRANSFORMS = {'as-is': lambda x: x, 'l2': lambda x: x / np.linalg.norm(x, axis=1, keepdims=True),
              'standardised': lambda x: (x - x.mean(0)) / x.std(0), 'x1e-3': lambda x: x * 1e-3, 'x1e3': lambda x: x * 1e3}

def transformed(x, name:str) -> np.ndarray:
    "`x` under `TRANSFORMS[name]`, computed in float64, as contiguous float32."
    return np.ascontiguousarray(TRANSFORMS[name](np.asarray(x, np.float64)).astype(np.float32))

# results ---------------------------------------------------------------------------------------------------------------

def run_command(argv:list|None=None) -> str:
    "This process's command line as `python bench/<group>/<script>.py args`, the script named from the clone's root."
    argv = list(sys.argv if argv is None else argv)
    script = Path(argv[0]).resolve()
    try: argv[0] = script.relative_to(ROOT).as_posix()
    except ValueError: pass
    return 'python ' + shlex.join(argv)

def git_commit() -> str|None:
    "The clone's commit, with '+changes' when tracked files differ from it; None outside a git clone."
    def git(*args): return subprocess.run(['git', '-C', str(ROOT), *args], capture_output=True, text=True, timeout=20)
    try:
        head = git('rev-parse', 'HEAD')
        if head.returncode: return None
        return head.stdout.strip() + ('+changes' if git('diff-index', '--quiet', 'HEAD', '--').returncode else '')
    except (OSError, subprocess.SubprocessError): return None

def _version(*dists):
    from importlib.metadata import version, PackageNotFoundError
    for d in dists:
        try: return version(d)
        except PackageNotFoundError: pass
    return None

ENV_VARS = ('OMP_NUM_THREADS', 'MKL_NUM_THREADS', 'CUDA_VISIBLE_DEVICES', 'PJRT_DEVICE', 'LETTER8_DATA', 'LETTER8_CACHE')

def environment() -> dict:
    "What the numbers depend on: versions, CPUs and threads, platform, GPU, the commit, the time and the machine's load."
    torch = sys.modules.get('torch')  # read only when the script loaded it (an XLA script must import torch_xla first)
    gpu = torch.cuda.get_device_name(0) if torch is not None and torch.cuda.is_available() else None
    return dict(python=platform.python_version(), letter8_tokenizer=_version('letter8-tokenizer'), torch=_version('torch'),
                numpy=np.__version__, faiss=_version('faiss-cpu', 'faiss-gpu', 'faiss'), cpus=os.cpu_count(),
                threads=torch.get_num_threads() if torch is not None else None, platform=platform.platform(),
                processor=platform.processor() or platform.machine(), gpu=gpu, commit=git_commit(),
                vars={k: os.environ[k] for k in ENV_VARS if k in os.environ},
                when=time.strftime('%Y-%m-%d %H:%M:%S UTC', time.gmtime()),
                load=[round(x, 2) for x in os.getloadavg()] if hasattr(os, 'getloadavg') else None)

def _plain(o):
    "JSON for what `json` cannot write: arrays and tensors as lists, numpy scalars as numbers, anything else as text."
    return o.tolist() if hasattr(o, 'tolist') else str(o)

def write_result(path, result:dict, quiet:bool=False) -> Path:
    "Write `result` as JSON at `path` (atomically), its `meta` led by the command that made it and the environment."
    path = Path(path)
    kept = {k: v for k, v in (result.get('meta') or {}).items() if k not in ('command', 'env')}
    meta = {'command': run_command(), **kept, 'env': environment()}
    doc = {'meta': meta, **{k: v for k, v in result.items() if k != 'meta'}}
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(path.name + '.tmp')
    tmp.write_text(json.dumps(doc, indent=1, default=_plain) + '\n')
    os.replace(tmp, path)
    if not quiet: print(f'wrote {path}')
    return path
