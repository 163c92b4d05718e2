"""System tests of the generative retriever: semantic IDs beat random IDs, exact constrained beam search, no leakage
in what the trainer feeds, bit-exact resume after SIGKILLs through the segment loop (about 2-3 minutes on 2 shared cores)."""
import json, tempfile
from pathlib import Path
import numpy as np
import pytest
import torch
from letter8_tokenizer.data import synthetic_catalog
from letter8_tokenizer.ids import IdScheme, PrefixTrie, random_like, random_scheme, rqkmeans_scheme, scheme_from_index_json
from letter8_tokenizer.retriever import RetrieverTask, Retriever, beam_search, retriever_config, FIRST, teacher_prefix
from letter8_tokenizer.judge import evaluate_scheme, summarise
from letter8_tokenizer.sequences import from_lists, leave_one_out, synthetic_sequences

from conftest import require_shared
BEAUTY = Path(__file__).resolve().parents[2]/'shared'/'data'/'beauty'


@pytest.fixture(scope='module')
def world():
    "A synthetic catalog (512 items, 8 x 4 x 4 categories) and 1,000 users who mostly stay in a leaf category."
    torch.set_num_threads(1)
    tmp = Path(tempfile.mkdtemp())
    cat = synthetic_catalog(tmp/'cat', n_items=512, dim=32, cf_dim=16, branching=(8, 4, 4), seed=3)
    seqs = synthetic_sequences(np.asarray(cat.labels), n_users=1000, min_len=5, max_len=15, stay=0.6, wander=0.3, seed=3)
    return np.asarray(cat.emb), leave_one_out(seqs, max_len=10)


SMALL = dict(d_model=64, heads=4, enc_layers=1, dec_layers=1, ff=128, dropout=0.1, lr=2e-3, batch_size=128, epochs=8,
             patience=3, max_len=10, beam=20, valid_users=300)


def test_semantic_ids_beat_random_ids(world):
    "RQ-KMeans IDs of the item embeddings beat random IDs of the same shape (3 seeds) by a wide margin, TIGER input."
    emb, split = world
    sem = rqkmeans_scheme(emb, levels=2, k=16, seed=0)
    rows = [evaluate_scheme(sem, split, SMALL, group='semantic')]
    rows += [evaluate_scheme(random_like(sem, s), split, SMALL, group='random') for s in range(3)]
    s, r = summarise(rows)
    print(s, r)
    assert s['recall@10'] > r['recall@10'] + r['recall@10_spread'] + 0.1
    assert s['ndcg@10'] > r['ndcg@10'] + r['ndcg@10_spread'] + 0.05


def exhaustive_scores(model, scheme, hist):
    "Log-probability of every item's ID for every user, by teacher forcing each ID."
    with torch.no_grad():
        model.eval()
        mem, pad = model.encode(hist)
        out = []
        for i in range(len(scheme)):
            tgt = torch.tensor(scheme.codes[i]).expand(len(hist), -1)
            h = model.decode(teacher_prefix(model, tgt)[:, None], mem, pad)[:, 0]
            out.append(sum(torch.log_softmax(model.level_logits(h[:, l], l), -1).gather(1, tgt[:, l:l + 1])[:, 0]
                           for l in range(scheme.levels)))
        return torch.stack(out, 1)


@pytest.mark.parametrize('history', ['tokens', 'items'])
def test_beam_search_is_exact_with_a_wide_beam(history):
    "With a beam as wide as the catalog, the constrained beam search returns every item once, ranked as exhaustive scoring ranks them."
    torch.manual_seed(0)
    scheme = random_scheme(60, [4, 3, 5], seed=2)  # collisions: an extra level
    assert scheme.levels == 4
    model = Retriever(scheme.sizes, retriever_config(dict(d_model=32, heads=2, ff=64, history=history)))
    hist = FIRST + torch.from_numpy(scheme.offsets + scheme.codes[np.random.default_rng(0).integers(0, 60, (7, 5))]).reshape(7, -1)
    items, score = beam_search(model, PrefixTrie(scheme), hist, beam=60)
    full = exhaustive_scores(model, scheme, hist)
    assert all(sorted(r) == list(range(60)) for r in items.tolist())
    torch.testing.assert_close(score, full.sort(1, descending=True).values, atol=1e-4, rtol=0)
    torch.testing.assert_close(full.gather(1, items), score, atol=1e-4, rtol=0)


def test_no_held_out_item_in_any_fed_batch(world):
    "Users without repeats: no validation or test item of a user appears in any history or target the trainer feeds that user."
    _, split = world
    inter = split.inter
    seqs = [list(dict.fromkeys(inter[u].tolist())) for u in range(len(inter))]
    inter = from_lists([s for s in seqs if len(s) >= 3], inter.n_items)
    sp = leave_one_out(inter, 10)
    tr = RetrieverTask(random_like(IdScheme(np.arange(inter.n_items)[:, None] % 16, 16), 0), sp, dict(SMALL, batch_size=64))
    indptr, items, seen = np.asarray(inter.indptr), np.asarray(inter.items), 0
    for b in tr.batches(0):
        user = np.searchsorted(indptr, b.samples[:, 1], side='right') - 1
        held = np.stack([items[indptr[user + 1] - 2], items[indptr[user + 1] - 1]], 1)
        assert not (b.items[:, None] == held).any()
        for (s, e), h in zip(b.samples, held): assert not np.isin(items[s:e], h).any()
        seen += len(b.samples)
    assert seen == len(sp.train)


RET_DRIVER = r'''
import sys, json, numpy as np, torch
torch.set_num_threads(1)
from letter8_tokenizer.sequences import read_interactions, leave_one_out
from letter8_tokenizer.ids import IdScheme
from letter8_tokenizer.retriever import RetrieverTask
from letter8_tokenizer.loop import run_segment
ck, inter, codes, cfg, kill = sys.argv[1], sys.argv[2], sys.argv[3], json.loads(sys.argv[4]), float(sys.argv[5])
t = RetrieverTask(IdScheme(np.load(codes), 16, 'rq-kmeans'), leave_one_out(read_interactions(inter), 10), cfg); t.save_every_steps = 5
r = run_segment(t, ck, kill_after_s=kill or None, progress=False)
print('RESULT ' + json.dumps(dict(status=r.status, step=r.step, resumed=r.resumed_from)), flush=True)
'''


def test_sigkilled_run_resumes_bit_identical(world, tmp_path):
    "Killed 3 times at random instants (mid-epoch, mid-validation, mid-save) and resumed, a run ends bit-identical to an uninterrupted one."
    from letter8_tokenizer.sequences import save_csr
    from letter8_tokenizer.loop import run_segment
    from letter8_tokenizer.checkpoint import Checkpointer
    from test_loop import sigkill_until_done, assert_same_state
    emb, split = world
    sem = rqkmeans_scheme(emb, levels=2, k=16, seed=0)
    save_csr(split.inter, tmp_path/'inter'); np.save(tmp_path/'codes.npy', sem.base)
    cfg = dict(SMALL, epochs=2, patience=2, valid_users=100)
    t = RetrieverTask(sem, split, cfg); t.save_every_steps = 5
    whole = run_segment(t, tmp_path/'whole', progress=False)
    assert whole.status == 'done'
    res = sigkill_until_done(RET_DRIVER, [tmp_path/'killed', tmp_path/'inter', tmp_path/'codes.npy', json.dumps(cfg)], tmp_path/'killed',
                             kills=3, window=(0.2, 1.2))
    print(res)
    assert res['kills'] >= 1 and res['result']['status'] == 'done' and res['result']['step'] == whole.step, res
    a, b = Checkpointer(tmp_path/'whole').load().state, Checkpointer(tmp_path/'killed').load().state
    assert_same_state(a, b)  # weights, optimiser, best weights, history, position, generators
    assert (tmp_path/'killed'/'metrics.jsonl').read_bytes() == (tmp_path/'whole'/'metrics.jsonl').read_bytes()


def test_letter_beauty_index():
    "LETTER's released Beauty IDs: 12,101 items, 4 levels, 24 items in collision groups -> one extra level."
    s = scheme_from_index_json(require_shared(BEAUTY/'Beauty.index.json'), n_items=12101, sizes=256)
    assert (len(s), s.levels, s.collided) == (12101, 5, 24)
    assert len(np.unique(s.codes, axis=0)) == 12101
