"""CF model: no validation or test interaction reaches SASRec's training rows (on LETTER's Beauty data when it is
beside the project, and on synthetic users), and a tiny run on synthetic users learns far above chance."""
from pathlib import Path
import numpy as np
from letter8_tokenizer.sequences import read_inter_json, leave_one_out, synthetic_sequences, from_lists
from letter8_tokenizer.cf import CFConfig, CFTask, train_rows, evaluate_cf

from conftest import require_shared
BEAUTY = Path(__file__).resolve().parents[2]/'shared'/'data'/'beauty'/'Beauty.inter.json'

def expected_rows(split, max_len):
    "Each user's training part (all but the last two items), its last max_len + 1 items, as inputs and targets."
    xs, ys = [], []
    for u in range(len(split.inter)):
        s = split.inter[u]
        part = s[:-2] if len(s) >= 3 else s
        part = part[-(max_len + 1):]
        if len(part) >= 2: xs.append(part[:-1]); ys.append(part[1:])
    return xs, ys

def assert_rows_are_training_parts(split, max_len):
    x, y = train_rows(split, max_len)
    xs, ys = expected_rows(split, max_len)
    assert len(x) == len(xs)
    for r, (ex, ey) in enumerate(zip(xs, ys)):
        np.testing.assert_array_equal(x[r][x[r] > 0] - 1, ex)
        np.testing.assert_array_equal(y[r][y[r] > 0] - 1, ey)

def test_no_leakage_on_beauty():
    split = leave_one_out(read_inter_json(require_shared(BEAUTY)))
    assert_rows_are_training_parts(split, 50)
    assert_rows_are_training_parts(split, 3)  # truncation keeps the newest training items, never held-out ones

def test_no_leakage_on_synthetic_users():
    labels = np.random.default_rng(0).integers(0, 5, (200, 2))
    split = leave_one_out(synthetic_sequences(labels, n_users=300, min_len=2, max_len=12, seed=3))  # some users shorter than 3
    assert split.short_users > 0
    assert_rows_are_training_parts(split, 5)

def test_evaluation_inputs_stop_before_the_target():
    "Validation reads the items before the second to last one; test reads those before the last one."
    split = leave_one_out(from_lists([[1, 2, 3, 4, 5, 6], [7, 8, 9]], n_items=10))
    t = CFTask(split, CFConfig(dim=8, max_len=4, dropout=0.0, epochs=1), device='cpu')
    seen, forward = [], t.model.forward
    t.model.forward = lambda tokens: seen.append(tokens.clone()) or forward(tokens)
    evaluate_cf(t.model, split, 'valid'); evaluate_cf(t.model, split, 'test')
    valid, test = (x.tolist() for x in seen)
    assert valid == [[1 + 1, 2 + 1, 3 + 1, 4 + 1], [0, 0, 0, 7 + 1]]  # tokens are item + 1; 5 and 6, 8 and 9 held out
    assert test == [[2 + 1, 3 + 1, 4 + 1, 5 + 1], [0, 0, 7 + 1, 8 + 1]]

def test_evaluation_history_is_the_models_not_the_splits():
    "A split made with short histories still lets SASRec read its own max_len items before the target."
    split = leave_one_out(from_lists([[1, 2, 3, 4, 5, 6, 7]], n_items=10), max_len=2)
    t = CFTask(split, CFConfig(dim=8, max_len=4, dropout=0.0, epochs=1), device='cpu')
    seen, forward = [], t.model.forward
    t.model.forward = lambda tokens: seen.append(tokens.clone()) or forward(tokens)
    evaluate_cf(t.model, split, 'test')
    assert seen[0].tolist() == [[3 + 1, 4 + 1, 5 + 1, 6 + 1]]

# ---------------------------------------------------------------------------------------------------------------
# the segment loop's promise: SIGKILLed at random instants and resumed, a run ends bit-identical

CF_DRIVER = r'''
import sys, json, torch
torch.set_num_threads(1)
from letter8_tokenizer.sequences import read_interactions, leave_one_out
from letter8_tokenizer.cf import CFConfig, CFTask
from letter8_tokenizer.loop import run_segment
ck, inter, cfg, kill = sys.argv[1], sys.argv[2], json.loads(sys.argv[3]), float(sys.argv[4])
t = CFTask(leave_one_out(read_interactions(inter)), CFConfig(**cfg), 'cpu'); t.save_every_steps = 4
r = run_segment(t, ck, kill_after_s=kill or None, progress=False)
print('RESULT ' + json.dumps(dict(status=r.status, step=r.step, resumed=r.resumed_from)), flush=True)
'''

def test_sigkilled_cf_run_resumes_bit_identical(tmp_path):
    "Killed 3 times at random instants and resumed, SASRec ends with the uninterrupted run's weights, best weights and metrics."
    import json, torch
    from letter8_tokenizer.sequences import save_csr
    from letter8_tokenizer.cf import CFTask
    from letter8_tokenizer.loop import run_segment
    from letter8_tokenizer.checkpoint import Checkpointer
    from test_loop import sigkill_until_done, assert_same_state
    torch.set_num_threads(1)
    labels = np.random.default_rng(0).integers(0, 8, (300, 2))
    split = leave_one_out(synthetic_sequences(labels, n_users=600, min_len=4, max_len=12, seed=1))
    save_csr(split.inter, tmp_path/'inter')
    cfg = dict(dim=16, max_len=10, epochs=4, patience=4, dropout=0.2, batch_size=16, lr=5e-3)
    t = CFTask(split, CFConfig(**cfg), 'cpu'); t.save_every_steps = 4
    whole = run_segment(t, tmp_path/'whole', progress=False)
    assert whole.status == 'done'
    res = sigkill_until_done(CF_DRIVER, [tmp_path/'killed', tmp_path/'inter', json.dumps(cfg)], tmp_path/'killed', kills=3, window=(0.1, 0.8))
    print(res)
    assert res['kills'] >= 1 and res['result']['status'] == 'done' and res['result']['step'] == whole.step, res
    a, b = Checkpointer(tmp_path/'whole').load().state, Checkpointer(tmp_path/'killed').load().state
    assert_same_state(a, b)  # weights, optimiser, best weights, history, position, generators
    assert (tmp_path/'killed'/'metrics.jsonl').read_bytes() == (tmp_path/'whole'/'metrics.jsonl').read_bytes()
