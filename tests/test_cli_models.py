"End to end through the console script: `letter8 cf` and `letter8 retrieval` on tiny synthetic data, resumed after a kill."
import json, os, signal, subprocess, sys, time
from pathlib import Path
import numpy as np
import pytest
from letter8_tokenizer.sequences import synthetic_sequences, save_csr
from letter8_tokenizer.codes import CodeTable

LETTER8 = Path(sys.executable).parent/'letter8'
N_ITEMS = 160
CF = ['--dim', '16', '--blocks', '1', '--max-len', '12', '--batch-size', '32', '--seed', '3']
RET = ['--d-model', '32', '--heads', '2', '--enc-layers', '1', '--dec-layers', '1', '--ff', '64', '--epochs', '2',
       '--batch-size', '128', '--beam', '10', '--max-len', '8', '--valid-users', '100']
METRICS = ('recall@5', 'recall@10', 'ndcg@5', 'ndcg@10')


def letter8(*args, cwd):
    "Run the console script with one thread (the same arithmetic in every call); the finished process."
    env = dict(os.environ, OMP_NUM_THREADS='1', MKL_NUM_THREADS='1')
    return subprocess.run([str(LETTER8), *map(str, args)], cwd=cwd, env=env, capture_output=True, text=True, timeout=300)


@pytest.fixture(scope='module')
def data(tmp_path_factory):
    "The interactions of 300 synthetic users over 160 items, in both on-disk forms, and a code table folder for them."
    d = tmp_path_factory.mktemp('cli_models')
    labels = np.stack([np.arange(N_ITEMS) // 40, np.arange(N_ITEMS) // 8], 1)
    inter = synthetic_sequences(labels, n_users=300, max_len=14, seed=1)
    save_csr(inter, d/'csr')
    ptr, items = np.asarray(inter.indptr), np.asarray(inter.items)
    (d/'toy.inter.json').write_text(json.dumps({f'u{u}': items[ptr[u]:ptr[u + 1]].tolist() for u in range(len(ptr) - 1)}))
    codes = np.stack([labels[:, 0], labels[:, 1] % 5, np.arange(N_ITEMS) % 4], 1)  # 2 items per code: collisions to resolve
    CodeTable.build(codes, sizes=[4, 5, 8]).save(d/'table')  # a code table folder, as `letter8 encode` writes
    return d


def test_cf_writes_embeddings_and_does_not_retrain(data):
    "A full run writes cf.npy (one finite row per item) and its metrics; a second call trains 0 steps and changes nothing."
    r = letter8('cf', 'toy.inter.json', '--out', 'cf', '--epochs', '4', *CF, cwd=data)
    assert r.returncode == 0, r.stderr
    emb = np.load(data/'cf'/'cf.npy')
    assert emb.shape == (N_ITEMS, 16) and emb.dtype == np.float32 and np.isfinite(emb).all()
    m = json.loads((data/'cf'/'cf_metrics.json').read_text())
    assert m['n_items'] == N_ITEMS and m['config']['dim'] == 16 and 0 <= m['test']['ndcg@10'] <= m['test']['recall@10'] <= 1
    out = r.stdout
    assert 'done: step' in out and f"HR@10 {m['test']['recall@10']:.4f}" in out and 'letter8 new NAME --cf-path cf/cf.npy' in out
    again = letter8('cf', 'toy.inter.json', '--out', 'cf', '--epochs', '4', *CF, cwd=data)
    assert again.returncode == 0 and '(0 trained in this call)' in again.stdout, again.stdout + again.stderr
    assert (np.load(data/'cf'/'cf.npy') == emb).all() and json.loads((data/'cf'/'cf_metrics.json').read_text()) == m


def test_cf_killed_then_rerun_matches_uninterrupted(data):
    "Stopped by --max-steps, then SIGKILLed mid-run by --kill-after-s, then run again: the same cf.npy and metrics, bit for bit."
    args = ['cf', 'csr', '--epochs', '200', '--patience', '200', *CF]
    t0 = time.perf_counter(); whole = letter8(*args, '--out', 'whole', cwd=data); t1 = time.perf_counter()
    assert whole.returncode == 0, whole.stderr
    first = letter8(*args, '--out', 'seg', '--max-steps', '5', cwd=data); t2 = time.perf_counter()
    assert first.returncode == 1 and 'step_limit: step 5' in first.stdout and 'run the same command again' in first.stdout
    kill_after = round(max(0.3, 0.3 * ((t1 - t0) - (t2 - t1))), 2)  # a third into the training (the run less a 5-step call's start-up)
    killed = letter8(*args, '--out', 'seg', '--kill-after-s', kill_after, cwd=data)
    assert killed.returncode == -signal.SIGKILL, f"not killed mid-run (rc {killed.returncode}): {killed.stdout}"
    last = letter8(*args, '--out', 'seg', cwd=data)
    assert last.returncode == 0 and 'resumed from' in last.stdout and 'step-000000005' in last.stdout, last.stdout + last.stderr
    assert (np.load(data/'seg'/'cf.npy') == np.load(data/'whole'/'cf.npy')).all()
    assert (data/'seg'/'cf_metrics.json').read_text() == (data/'whole'/'cf_metrics.json').read_text()


def test_retrieval_table_report_and_resume(data):
    "Three schemes (a code table folder, random IDs of its shape, item IDs): the table, the report; a --max-steps stop then rerun scores the same."
    ids = ['--ids', 'table', '--ids', 'random:0', '--ids', 'items']
    whole = letter8('retrieval', 'csr', *ids, '--out', 'ret', *RET, '--quiet', cwd=data)
    assert whole.returncode == 0, whole.stderr
    for name in ('table', 'random', 'item ids'): assert f'| {name} | 1 |' in whole.stdout, whole.stdout
    assert 'report: ret/retrieval.html' in whole.stdout
    rep = json.loads((data/'ret'/'retrieval.json').read_text())
    assert [r['scheme'] for r in rep['results']] == ['table', 'random (seed 0)', 'item ids']
    assert all(0 <= r['ndcg@10'] <= r['recall@10'] <= 1 and r['test_users'] == 300 for r in rep['results'])
    assert (data/'ret'/'retrieval.png').stat().st_size > 0 and (data/'ret'/'ids'/'table.npy').exists()
    stop = letter8('retrieval', 'csr', *ids, '--out', 'seg_ret', *RET, '--quiet', '--max-steps', '2', cwd=data)
    assert stop.returncode == 1 and "step_limit: scheme 'table'" in stop.stdout, stop.stdout + stop.stderr
    done = letter8('retrieval', 'csr', *ids, '--out', 'seg_ret', *RET, '--quiet', cwd=data)
    assert done.returncode == 0, done.stderr
    seg = json.loads((data/'seg_ret'/'retrieval.json').read_text())
    assert [{m: r[m] for m in METRICS} for r in seg['results']] == [{m: r[m] for m in METRICS} for r in rep['results']]


def test_bad_input_is_named_with_its_fix(data):
    "A missing file, an unknown ids spec, codes for another number of items: refused (exit 2 before any work, 1 later), the value and the fix named, nothing written."
    np.save(data/'short.npy', np.zeros((N_ITEMS - 10, 2), np.int64))
    cases = [(['cf', 'missing.inter.json', '--out', 'bad'], "INTER missing.inter.json: no such file or folder: give LETTER's <dataset>.inter.json"),
             (['retrieval', 'csr', '--ids', 'rnd:0', '--out', 'bad'], "--ids rnd:0: no such file or folder. Give a LETTER .index.json"),
             (['retrieval', 'csr', '--ids', 'short.npy', '--out', 'bad'], f'IDs for {N_ITEMS - 10} items, but the interactions csr cover {N_ITEMS} items'),
             (['retrieval', 'csr', '--out', 'bad'], 'needs at least one --ids')]
    for argv, msg in cases:
        r = letter8(*argv, cwd=data)
        assert r.returncode == (2 if argv[0] == 'cf' else 1) and msg in r.stderr, (argv, r.returncode, r.stderr)
    assert not (data/'bad').exists()
