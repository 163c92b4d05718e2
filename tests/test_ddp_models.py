"""Data-parallel SASRec (`cf.CFTask`) and generative retriever (`retriever.RetrieverTask`) on 2 gloo ranks under
torchrun (`loop.run_distributed`, as tests/test_loop.py and tests/test_ddp.py launch them): a run stopped mid-way
and resumed on 2 ranks ends with the weights, best weights and history of one process, to float rounding.

Ranks average gradients in another order than one process sums them, so the runs agree to float32 rounding
(`WEIGHT_ATOL`), not bit for bit; dropout is 0 because ranks draw different dropout masks."""
from pathlib import Path
import numpy as np, pytest, torch
from letter8_tokenizer.data import synthetic_catalog
from letter8_tokenizer.sequences import synthetic_sequences, save_csr
from letter8_tokenizer.checkpoint import Checkpointer
from letter8_tokenizer.loop import run_distributed
from letter8_tokenizer.cf import cf_segment
from letter8_tokenizer.ids import random_scheme
from letter8_tokenizer.retriever import retriever_segment

WEIGHT_ATOL = 1e-5
CF = dict(dim=16, max_len=10, blocks=1, dropout=0.0, batch_size=64, epochs=2, lr=5e-3)  # 5 batches per epoch, the last of 44 users
RET = dict(d_model=32, heads=2, enc_layers=1, dec_layers=1, ff=64, dropout=0.0, batch_size=256, epochs=2, max_len=8,
           beam=10, valid_users=100, eval_batch=100,  # 7 batches per epoch
           lr=1e-3, warmup=0)  # the rate WEIGHT_ATOL was set at: float rounding between 2 ranks and 1 process grows with the rate

@pytest.fixture(scope='module')
def data(tmp_path_factory):
    "200 items in a category tree, 300 users who walk it (as a CSR folder), and random 2-level IDs (as a .npy)."
    tmp = tmp_path_factory.mktemp('ddp_models')
    cat = synthetic_catalog(tmp/'cat', n_items=200, dim=8, branching=(2, 4, 5), seed=0)
    inter = synthetic_sequences(np.asarray(cat.labels), n_users=300, min_len=5, max_len=12, seed=0)
    np.save(tmp/'ids.npy', random_scheme(200, (8, 8), seed=0).codes)
    return tmp, str(save_csr(inter, tmp/'inter'))

def key_bias(k:str, t:torch.Tensor) -> slice:
    "The key part of an attention's `in_proj_bias` (query, key, value biases stacked), else nothing."
    return slice(len(t) // 3, 2 * len(t) // 3) if k.endswith('in_proj_bias') else slice(0, 0)

def max_gap(a:dict, b:dict) -> tuple[float, float]:
    """Largest absolute difference between two state dicts' floating tensors: everywhere but the attention key biases,
    and on those. Adding one number to every key's bias adds the same to every attention score of a query, which the
    softmax ignores: the key bias's gradient is zero up to rounding, and Adam scales that rounding noise to full-size
    steps (lr each), differently in every summation order. Nothing downstream feels it, so it is reported, not compared."""
    assert a.keys() == b.keys()
    rest, keys = 0.0, 0.0
    for k in (k for k in a if a[k].is_floating_point()):
        d = (a[k].float() - b[k].float()).abs()
        kb = key_bias(k, d)
        keys = max(keys, d[kb].max().item() if d[kb].numel() else 0.0)
        d[kb] = 0
        rest = max(rest, d.max().item())
    return rest, keys

def one_then_two_ranks(factory, fn, kwargs:dict, tmp:Path, stop:int) -> tuple[dict, dict, list]:
    "One process to the end; 2 ranks stopped after `stop` steps, then resumed on 2 ranks to the end. Both final states and the ledger."
    torch.set_num_threads(1)
    one = fn(checkpoint_dir=str(tmp/'one'), progress=False, **kwargs)
    assert one.status == 'done'
    job = lambda ck, **kw: run_distributed(factory, dict(kwargs, checkpoint_dir=str(ck), progress=False, **kw), ck, nproc=2, progress=False)
    first = job(tmp/'two', max_steps=stop)
    assert (first['status'], first['step']) == ('step_limit', stop)
    rest = job(tmp/'two')
    assert (rest['status'], rest['resumed_from'], rest['step']) == ('done', stop, one.step)
    return Checkpointer(tmp/'one').load().state, Checkpointer(tmp/'two').load().state, rest['ledger']

def assert_same_history(a:list, b:list):
    assert len(a) == len(b) > 0
    for x, y in zip(a, b):
        assert x.keys() == y.keys()
        for k in x: assert y[k] == pytest.approx(x[k], rel=1e-5, abs=1e-6), (k, x, y)

def test_cf_two_ranks_equal_one_process_and_resume(data):
    tmp, inter = data
    one, two, ledger = one_then_two_ranks('letter8_tokenizer.cf:cf_segment', cf_segment, dict(inter=inter, config=CF, device='cpu'), tmp/'cf', 7)
    assert [s['world_size'] for s in ledger] == [2, 2] and two['world_size'] == 2
    (gap, keys), (best, _) = max_gap(one['model'], two['model']), max_gap(one['best_state'], two['best_state'])
    print(f'CF: largest weight difference, 2 ranks vs 1 process: {gap:.2e} (best weights {best:.2e}; attention key biases {keys:.2e})')
    assert max(gap, best) <= WEIGHT_ATOL, (gap, best)
    assert two['best_epoch'] == one['best_epoch']
    assert_same_history(one['history'], two['history'])

def test_retriever_two_ranks_equal_one_process_and_resume(data):
    tmp, inter = data
    kw = dict(inter=inter, scheme=str(tmp/'ids.npy'), config=RET)
    one, two, ledger = one_then_two_ranks('letter8_tokenizer.retriever:retriever_segment', retriever_segment, kw, tmp/'ret', 9)
    assert [s['world_size'] for s in ledger] == [2, 2] and two['world_size'] == 2
    (gap, keys), (best, _) = max_gap(one['model'], two['model']), max_gap(one['best_model'], two['best_model'])
    print(f'retriever: largest weight difference, 2 ranks vs 1 process: {gap:.2e} (best weights {best:.2e}; attention key biases {keys:.2e})')
    assert max(gap, best) <= WEIGHT_ATOL, (gap, best)
    assert (two['best_epoch'], two['bad']) == (one['best_epoch'], one['bad'])
    assert_same_history(one['history'], two['history'])
