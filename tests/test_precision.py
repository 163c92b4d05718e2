"""Precision chosen by the machine (issue 60): 'auto' resolves by the device (monkeypatched capabilities), an explicit
bfloat16 on a card without it is refused with the fix, and each of the three models (tokenizer, SASRec, retriever)
trained under float16 autocast with its loss scaler, stopped, and resumed in a NEW PROCESS ends equal, bit for bit
(weights, optimiser, scaler), to an uninterrupted run. float16 runs on the CPU here (torch's CPU autocast and
`GradScaler('cpu')`), standing in for a T4."""
import json, os, subprocess, sys
from pathlib import Path
import numpy as np
import pytest
import torch
from letter8_tokenizer import distributed, config as config_mod
from letter8_tokenizer.distributed import resolve_precision, PRECISIONS
from letter8_tokenizer.config import Config, override, config_to_dict
from letter8_tokenizer.data import synthetic_catalog
from letter8_tokenizer.checkpoint import Checkpointer
from letter8_tokenizer.loop import write_job

CARDS = {'Tesla T4': (7, 5), 'Tesla P100-PCIE-16GB': (6, 0), 'NVIDIA A100-SXM4-40GB': (8, 0), 'NVIDIA L4': (8, 9), 'NVIDIA H100': (9, 0)}

def on_card(monkeypatch, name):
    monkeypatch.setattr(torch.cuda, 'get_device_capability', lambda d=None: CARDS[name])
    monkeypatch.setattr(torch.cuda, 'get_device_name', lambda d=None: name)

@pytest.mark.parametrize('name, want', [('Tesla T4', 'float16'), ('Tesla P100-PCIE-16GB', 'float16'), ('NVIDIA A100-SXM4-40GB', 'bfloat16'),
                                        ('NVIDIA L4', 'bfloat16'), ('NVIDIA H100', 'bfloat16')])
def test_auto_follows_the_cards_capability(monkeypatch, name, want):
    on_card(monkeypatch, name)
    assert resolve_precision('auto', 'cuda:0') == want
    assert resolve_precision('float32', 'cuda') == 'float32' and resolve_precision('float16', 'cuda:1') == 'float16'

def test_auto_on_the_cpu_and_on_xla(monkeypatch):
    assert [resolve_precision(p, 'cpu') for p in PRECISIONS] == ['float32', 'float32', 'bfloat16', 'float16']
    monkeypatch.setattr(distributed, '_xla_reports_tpu', lambda: True)
    assert resolve_precision('auto', 'xla:0') == 'bfloat16'
    with pytest.raises(ValueError, match="a TPU computes in bfloat16"): resolve_precision('float16', 'xla')
    monkeypatch.setattr(distributed, '_xla_reports_tpu', lambda: False)  # XLA's CPU backend, the TPU's stand-in
    assert resolve_precision('auto', 'xla:0') == 'float32'

def test_bfloat16_on_a_card_without_it_is_refused_with_the_fix(monkeypatch):
    on_card(monkeypatch, 'Tesla T4')
    with pytest.raises(ValueError) as e: resolve_precision('bfloat16', 'cuda:0', 'model.precision')
    msg = str(e.value)
    assert msg.startswith("model.precision='bfloat16' on Tesla T4 (compute capability 7.5)"), msg
    assert 'emulates' in msg and "Set model.precision to 'auto' (float16 with a loss scaler on this card) or 'float16'" in msg, msg
    with pytest.raises(ValueError, match="give one of 'auto', 'float32', 'bfloat16', 'float16'"): resolve_precision('fp16', 'cpu')

def test_the_models_refuse_it_too(monkeypatch):
    "Each model asks the one resolver: the tokenizer where its MLPs run, SASRec and the retriever when their task is built."
    from letter8_tokenizer.model import Letter8
    from letter8_tokenizer.cf import CFTask
    from letter8_tokenizer.sequences import from_lists, leave_one_out
    on_card(monkeypatch, 'Tesla T4')
    tiny = Letter8(override(Config(), {'model.in_dim': 6, 'model.hidden': [8], 'model.levels': 2, 'model.codebook_size': 4,
                                       'model.precision': 'bfloat16'}))
    with pytest.raises(ValueError, match="model.precision='bfloat16' on Tesla T4"): tiny.precision_on('cuda:3')
    split = leave_one_out(from_lists([[1, 2, 3, 4, 5], [6, 7, 8, 9]], n_items=10))
    monkeypatch.setattr(distributed, 'pick_device', lambda d=None, spmd=False: torch.device('cuda', 0))
    import letter8_tokenizer.cf as cf
    monkeypatch.setattr(cf, 'pick_device', lambda d=None, spmd=False: torch.device('cuda', 0))
    with pytest.raises(ValueError, match="precision='bfloat16' on Tesla T4"): CFTask(split, dict(dim=8, precision='bfloat16'))

def test_one_list_of_settings():
    assert config_mod.PRECISIONS == distributed.PRECISIONS  # config keeps its own copy: it loads without torch
    assert Config().model.precision == 'auto'

def test_the_environment_shows_the_precision(tmp_path):
    from letter8_tokenizer.kaggle_env import device_summary, probe_environment, probe_table
    assert device_summary('cpu')['precision'] == 'float32'
    assert '| precision | float32 |' in probe_table(probe_environment(gpus=[], env={}, device='cpu'))
    out = subprocess.run([sys.executable, '-m', 'letter8_tokenizer.cli', 'env', '--json-out'], capture_output=True, text=True)
    if out.returncode == 0 and out.stdout.strip().startswith('{'): assert json.loads(out.stdout)['precision'] in PRECISIONS

def test_status_json_shows_the_precision(tmp_path):
    from letter8_tokenizer.stages import Segment
    from letter8_tokenizer.runfolder import run_paths, read_status
    s = Segment(dict(experiment='prec', work_dir=str(tmp_path), catalog_items=300, device='cpu'), segment='s0')
    try: assert read_status(run_paths(tmp_path, 'prec').status)['precision'] == 'float32'
    finally: s.close()

# --- the bar: float16 with its scaler, stopped, resumed in a new process, equals the uninterrupted run ---

@pytest.fixture(scope='module')
def data(tmp_path_factory):
    "A catalog with CF embeddings, users who walk its categories, and 2-letter codes of its items."
    from letter8_tokenizer.sequences import synthetic_sequences, leave_one_out, save_csr
    d = tmp_path_factory.mktemp('data')
    items = synthetic_catalog(d/'catalog', n_items=400, dim=16, branching=(2, 4, 5))
    labels = np.load(d/'catalog'/'labels.npy')
    split = leave_one_out(synthetic_sequences(labels, n_users=300, stay=0.8, wander=0.15, seed=0))
    inter = save_csr(split.inter, d/'inter')
    codes = np.stack([labels[:, 1] * 5 + labels[:, 2] % 5, np.arange(400) % 16], 1).astype(np.int64)  # 2 letters, collisions allowed
    np.save(d/'codes.npy', codes)
    return dict(items=items, inter=str(inter), codes=str(d/'codes.npy'))

TOKENIZER = {'model.hidden': [32, 16], 'model.e_dim': 8, 'model.codebook_size': 16, 'model.levels': 3, 'optim.batch_size': 128,
             'optim.epochs': 5, 'optim.grad_clip': 1.0, 'schedule.log_every_s': 3600.0, 'schedule.save_every_steps': 4,
             'model.precision': 'float16'}

def job(model, data, ck):
    "The plain-argument segment function of `model` (what a `run_distributed` rank calls) and its arguments."
    if model == 'tokenizer':
        it = data['items']
        items = dict(path=str(it.path), cf=str(it.cf_path), labels=None, counts=None, chunk_rows=it.chunk_rows)
        return 'letter8_tokenizer.train:tokenizer_segment', dict(config=config_to_dict(override(Config(), TOKENIZER)), items=items,
                                                                 checkpoint_dir=str(ck), device='cpu', progress=False)
    if model == 'cf':
        return 'letter8_tokenizer.cf:cf_segment', dict(inter=data['inter'], checkpoint_dir=str(ck), n_items=400, device='cpu', progress=False,
                                                       config=dict(dim=16, max_len=10, epochs=2, batch_size=64, dropout=0.2, precision='float16'))
    return 'letter8_tokenizer.retriever:retriever_segment', dict(
        inter=data['inter'], scheme=data['codes'], checkpoint_dir=str(ck), n_items=400, device='cpu', progress=False,
        config=dict(d_model=16, heads=2, ff=32, enc_layers=1, dec_layers=1, max_len=5, epochs=2, batch_size=64, valid_users=60, beam=10,
                    dropout=0.1, precision='float16'))

def run_in_new_process(tmp, name, factory, kwargs) -> dict:
    "One segment in a fresh interpreter (`python -m letter8_tokenizer.loop JOB`, the DDP worker with a world of one); its result."
    path = write_job(tmp/f'{name}.json', factory, kwargs, tmp/f'{name}-result.json')
    p = subprocess.run([sys.executable, '-m', 'letter8_tokenizer.loop', str(path)], capture_output=True, text=True, timeout=900,
                       env={**os.environ, 'OMP_NUM_THREADS': '1', 'WORLD_SIZE': '1'})
    assert p.returncode == 0, p.stdout[-3000:] + p.stderr[-3000:]
    return json.loads((tmp/f'{name}-result.json').read_text())

def same(a, b, where=''):
    "Equal bit for bit: tensors by `torch.equal` (and dtype), containers item by item."
    if torch.is_tensor(a): assert torch.is_tensor(b) and a.dtype == b.dtype and torch.equal(a, b), where; return
    if isinstance(a, np.ndarray): assert np.array_equal(a, b), where; return
    if isinstance(a, dict):
        assert isinstance(b, dict) and a.keys() == b.keys(), (where, set(a) ^ set(b))
        for k in a: same(a[k], b[k], f'{where}.{k}')
        return
    if isinstance(a, (list, tuple)):
        assert len(a) == len(b), where
        for i, (x, y) in enumerate(zip(a, b)): same(x, y, f'{where}[{i}]')
        return
    assert a == b or (a != a and b != b), (where, a, b)  # NaN == NaN here (an unset score)

@pytest.mark.parametrize('model, stop', [('tokenizer', 7), ('cf', 5), ('retriever', 4)])
def test_float16_run_resumed_in_a_new_process_equals_the_whole_run(data, tmp_path, model, stop):
    factory, kw = job(model, data, tmp_path/'whole')
    whole = run_in_new_process(tmp_path, 'whole', factory, kw)
    first = run_in_new_process(tmp_path, 'first', factory, dict(kw, checkpoint_dir=str(tmp_path/'split'), max_steps=stop))
    rest = run_in_new_process(tmp_path, 'rest', factory, dict(kw, checkpoint_dir=str(tmp_path/'split')))
    assert (whole['status'], first['status'], first['step'], rest['status'], rest['resumed_from']) == ('done', 'step_limit', stop, 'done', stop)
    assert rest['step'] == whole['step'] > stop
    a, b = Checkpointer(tmp_path/'whole').load(), Checkpointer(tmp_path/'split').load()
    assert a.step == b.step == whole['step']
    sa, sb = a.state, b.state
    assert 'scaler' in sa and sa['scaler']['_growth_tracker'] > 0, sa.get('scaler')  # a real scaler, its counter saved and restored
    assert {t.dtype for t in sa['model'].values() if t.is_floating_point()} == {torch.float32}  # weights stay float32
    same(sa['model'], sb['model'], 'model'); same(sa['optim'], sb['optim'], 'optim'); same(sa['scaler'], sb['scaler'], 'scaler')
    drop = lambda st: {k: v for k, v in st.items() if k != 'rng'}  # python's and numpy's global generators are never seeded
    same(drop(sa), drop(sb), 'state')  # and everything else: the position, the task's own counters
    assert [l['precision'] for l in b.meta['ledger']] == ['float16', 'float16'] and a.meta['ledger'][-1]['precision'] == 'float16'
