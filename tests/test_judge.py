"""System tests of the judge of semantic IDs: the 'tiger' preset trains and resumes bit-exactly after SIGKILLs on the
CPU (tiny sizes), schemes scored in separate processes pair up through their reports (and other users are refused),
and bad lengths or presets fail before anything is written (about a minute on 2 shared cores)."""
import json, tempfile
from pathlib import Path
import numpy as np
import pytest
import torch
from letter8_tokenizer.data import synthetic_catalog
from letter8_tokenizer.ids import rqkmeans_scheme
from letter8_tokenizer.retriever import RetrieverTask, T5Retriever
from letter8_tokenizer.judge import retrieval_run, report_rows, paired_table
from letter8_tokenizer.sequences import leave_one_out, synthetic_sequences, save_csr
from test_retrieval import RET_DRIVER


@pytest.fixture(scope='module')
def world():
    "A synthetic catalog (256 items, 4 x 4 x 4 categories) and 400 users who mostly stay in a leaf category, saved as CSR."
    torch.set_num_threads(1)
    tmp = Path(tempfile.mkdtemp())
    cat = synthetic_catalog(tmp/'cat', n_items=256, dim=16, cf_dim=16, branching=(4, 4, 4), seed=0)
    seqs = synthetic_sequences(np.asarray(cat.labels), n_users=400, min_len=5, max_len=12, stay=0.7, wander=0.2, seed=0)
    sem = rqkmeans_scheme(np.asarray(cat.emb), levels=2, k=16, seed=0)
    np.save(tmp/'codes.npy', sem.base)
    return tmp, save_csr(seqs, tmp/'inter'), leave_one_out(seqs, 10), sem


TIGER_TINY = dict(preset='tiger', d_model=16, heads=2, head_dim=12, enc_layers=2, dec_layers=2, ff=32, user_buckets=7, warmup=4,
                  batch_size=64, epochs=2, patience=2, max_len=10, beam=10, valid_users=100, lr=3e-3)


def test_tiger_preset_trains_and_resumes_bit_identical_after_sigkills(world, tmp_path):
    "The T5 model with user tokens and the warm-up schedule, killed 3 times at random instants, ends bit-identical to one uninterrupted run; its loss falls."
    from letter8_tokenizer.loop import run_segment
    from letter8_tokenizer.checkpoint import Checkpointer
    from test_loop import sigkill_until_done, assert_same_state
    tmp, inter, split, sem = world
    t = RetrieverTask(sem, split, TIGER_TINY); t.save_every_steps = 5
    assert isinstance(t.model, T5Retriever)
    whole = run_segment(t, tmp_path/'whole', progress=False)
    assert whole.status == 'done'
    losses = [json.loads(l)['loss'] for l in (tmp_path/'whole'/'metrics.jsonl').read_text().splitlines() if 'loss' in json.loads(l)]
    assert np.mean(losses[-3:]) < np.mean(losses[:3]) - 0.3, losses
    res = sigkill_until_done(RET_DRIVER, [tmp_path/'killed', inter, tmp/'codes.npy', json.dumps(TIGER_TINY)], tmp_path/'killed',
                             kills=3, window=(0.2, 1.2))
    print(res)
    assert res['kills'] >= 1 and res['result']['status'] == 'done' and res['result']['step'] == whole.step, res
    assert_same_state(Checkpointer(tmp_path/'whole').load().state, Checkpointer(tmp_path/'killed').load().state)
    assert (tmp_path/'killed'/'metrics.jsonl').read_bytes() == (tmp_path/'whole'/'metrics.jsonl').read_bytes()


SMALL = dict(d_model=32, heads=2, enc_layers=1, dec_layers=1, ff=64, lr=3e-3, batch_size=64, epochs=2, patience=2, max_len=10,
             beam=10, valid_users=100)


def test_runs_in_separate_processes_pair_up(world, tmp_path):
    "Two schemes scored by two runs pair through their reports exactly as in one run; a run on other users is refused."
    tmp, inter, split, sem = world
    both = retrieval_run(inter, [tmp/'codes.npy', 'random:0'], tmp_path/'both', SMALL, progress=False)
    retrieval_run(inter, [tmp/'codes.npy'], tmp_path/'a', SMALL, progress=False)
    retrieval_run(inter, [tmp/'codes.npy', 'random:0'], tmp_path/'b', SMALL, progress=False)
    a, b = report_rows(tmp_path/'a'), report_rows(tmp_path/'b')
    assert paired_table(a + b[1:]) == paired_table(both['rows'])
    assert paired_table(both['rows'])[0]['recall@10_verdict'] == 'better'
    from letter8_tokenizer.sequences import from_lists
    seqs = split.inter
    fewer = save_csr(from_lists([seqs[u].tolist() for u in range(300)], seqs.n_items), tmp_path/'fewer')
    c = retrieval_run(fewer, [tmp/'codes.npy'], tmp_path/'c', SMALL, progress=False)
    with pytest.raises(ValueError, match='scored on different test users'): paired_table(c['rows'] + b[1:])


@pytest.mark.parametrize('config, words', [(dict(lengths='3'), 'above the 2 letters'), (dict(lengths='0'), 'at least 1'),
                                           (dict(lengths='2,x'), 'not a whole number'), (dict(preset='t5'), "allowed: 'small' or 'tiger'")])
def test_bad_lengths_and_presets_fail_before_anything_is_written(world, tmp_path, config, words):
    tmp, inter, _, _ = world
    with pytest.raises(ValueError, match=words): retrieval_run(inter, [tmp/'codes.npy'], tmp_path/'run', dict(SMALL, **config), progress=False)
    assert not (tmp_path/'run').exists()


def test_cli_prints_verdicts_and_refuses_bad_lengths(world, tmp_path):
    "`letter8 retrieval --lengths`: the paired verdicts and the recommended length on stdout; a length above the scheme's, or an unknown preset, fails naming it, nothing written."
    from test_cli_models import letter8
    tmp, inter, _, _ = world
    ret = ['--d-model', '32', '--heads', '2', '--enc-layers', '1', '--dec-layers', '1', '--ff', '64', '--epochs', '1', '--batch-size', '128',
           '--beam', '10', '--max-len', '10', '--valid-users', '100', '--quiet']
    ok = letter8('retrieval', inter, '--ids', tmp/'codes.npy', '--ids', 'random:0', '--lengths', '1', '--out', 'run', *ret, cwd=tmp_path)
    assert ok.returncode == 0, ok.stderr
    assert 'the small judge' in ok.stdout and '| codes | random |' in ok.stdout and 'Recommended ID length: ' in ok.stdout, ok.stdout
    assert [r['group'] for r in json.loads((tmp_path/'run'/'retrieval.json').read_text())['results']] == ['codes', 'random', 'codes[:1]']
    for argv, msg, rc in ((['--lengths', '3'], "config key 'lengths': 3 in '3' is above the 2 letters of 'codes'", 1),
                          (['--preset', 't5'], "--preset t5: config key 'preset': 't5' is out of range; allowed: 'small' or 'tiger'", 2)):
        bad = letter8('retrieval', inter, '--ids', tmp/'codes.npy', *argv, '--out', 'bad', *ret, cwd=tmp_path)
        assert bad.returncode == rc and msg in bad.stderr, (argv, bad.stderr)  # 2: refused by the up-front checks
        assert not (tmp_path/'bad').exists()
    tiger = letter8('retrieval', inter, '--ids', tmp/'codes.npy', '--preset', 'tiger', '--d-model', '64', '--max-steps', '1', '--max-len', '10',
                    '--out', 'tiger', '--quiet', cwd=tmp_path)
    assert tiger.returncode == 1 and 'step_limit' in tiger.stdout, tiger.stdout + tiger.stderr
    from letter8_tokenizer.checkpoint import Checkpointer
    cfg = Checkpointer(tmp_path/'tiger'/'checkpoints'/'00').load().manifest['config']  # the preset's values; flags given on top
    assert (cfg['preset'], cfg['enc_layers'], cfg['head_dim'], cfg['user_buckets'], cfg['amp'], cfg['d_model']) == ('tiger', 4, 64, 2000, True, 64), cfg
