"""Beam search with and without the decoder cache: the time a judge spends scoring users, and that nothing it measures
changes.

The judge scores validation users after every epoch and every test user at the end with a constrained beam search
(`retriever.beam_search`). Without a cache it decodes every beam's whole prefix again at each level: at level l of an
L-letter ID, beam x l positions per user, and a self-attention over all of them. With the cache (`decode_next`, the
default) each level decodes one new position per beam. This script trains the small judge for --epochs on Beauty's
training samples, then ranks the same users both ways and reports milliseconds per user, the speed-up, and how often
the two agree (the same 20 items in the same order; the largest score difference, float rounding only). It also
profiles where an epoch's time goes: the training steps (median step over --steps batches, each part of a step timed
alone with its own backward pass, the same step without dropout, and the operators that take most of it) against the
validation users' beam search, and the test users' at the end.

  python bench/judge/beam.py                          # random 8-letter IDs of 256 codes (the cost depends on the shape)
  python bench/judge/beam.py --ids <work>/judge/codes # the kit's IDs of a judge run (any scheme `ids.load_scheme` reads)

Writes bench/results/beam_search.json. The data are read from <data>/beauty (bench/common.py: --data, $LETTER8_DATA).
"""
import argparse, sys, time
from dataclasses import asdict
from pathlib import Path
import numpy as np
import torch, torch.nn.functional as F
sys.path.insert(0, str(Path(__file__).resolve().parents[2]))  # the clone's root, for bench.common
from bench.common import RESULTS, add_data_flag, beauty, write_result
from letter8_tokenizer.sequences import read_interactions, leave_one_out
from letter8_tokenizer.ids import load_scheme, random_scheme
from letter8_tokenizer.retriever import RetrieverTask, beam_search, teacher_prefix


def ranked(task, samples, cached:bool, batch:int) -> tuple:
    "Items and scores of `samples`' users, ranked with or without the cache, and the seconds it took."
    items, scores, t0 = [], [], time.perf_counter()
    for s in range(0, len(samples), batch):
        i, sc = beam_search(task.model, task.trie, task.make(samples[s:s + batch]).hist.to(task.device), task.cfg.beam, cached=cached)
        items.append(i.cpu().numpy()); scores.append(sc.cpu().numpy())
    return np.concatenate(items), np.concatenate(scores), time.perf_counter() - t0


def median_s(fn, batches) -> float:
    "Median seconds of `fn(batch)` over `batches`."
    times = []
    for b in batches:
        t0 = time.perf_counter(); fn(b); times.append(time.perf_counter() - t0)
    return float(np.median(times))


def step_parts(task, batches) -> dict:
    "Milliseconds of each part of a training step on `batches`, each timed alone with its own backward pass."
    m = task.model.train()
    def memory(b): return [t.detach() for t in m.encode(b.hist)]
    def states(b, mem): return m.decode(teacher_prefix(m, b.target)[:, None], *mem)[:, 0]
    def heads(h, b): return sum(F.cross_entropy(m.level_logits(h[:, l], l), b.target[:, l]) for l in range(len(m.sizes))) / len(m.sizes)
    def frozen(b):
        with torch.no_grad(): return states(b, memory(b))
    parts = dict(encoder=median_s(lambda b: m.encode(b.hist)[0].sum().backward(), batches),
                 decoder=median_s(lambda b: states(b, memory(b)).sum().backward(), batches) - median_s(memory, batches),
                 heads_and_loss=median_s(lambda b: heads(frozen(b).requires_grad_(), b).backward(), batches) - median_s(frozen, batches),
                 optimiser=median_s(lambda b: task.opt.step(), batches))
    task.opt.zero_grad(set_to_none=True)
    return {k: round(v * 1000, 2) for k, v in parts.items()}


def train_profile(task, steps:int) -> dict:
    """Median seconds of a training step over `steps` batches of epoch 0, each part of it alone, the same step without
    dropout (a fresh model of the same shape), and each of the top operators' share of their time."""
    from torch.profiler import profile, ProfilerActivity
    it = task.batches(0)
    for _ in range(3): task.step(next(it))  # warm
    batches = [next(it) for _ in range(steps)]
    step_s = median_s(task.step, batches)
    plain = RetrieverTask(task.scheme, task.split, dict(asdict(task.cfg), dropout=0.0))
    for b in batches[:3]: plain.step(b)
    plain_s = median_s(plain.step, batches)
    parts = step_parts(task, batches)
    with profile(activities=[ProfilerActivity.CPU]) as prof:
        for _ in range(5): task.step(next(it))
    ops = sorted(prof.key_averages(), key=lambda e: e.self_cpu_time_total, reverse=True)
    total = sum(e.self_cpu_time_total for e in ops)
    return dict(step_s=step_s, step_no_dropout_s=plain_s, parts_ms=parts,
                top_ops={e.key: round(e.self_cpu_time_total / total, 3) for e in ops[:8]})


def main():
    ap = argparse.ArgumentParser(description=__doc__.split('\n')[0])
    add_data_flag(ap)
    ap.add_argument('--ids', default='', help="an ID scheme (`ids.load_scheme`); '': random IDs of --letters x 256 codes")
    ap.add_argument('--letters', type=int, default=8, help='letters of the random IDs')
    ap.add_argument('--epochs', type=int, default=1, help='training epochs before timing (a trained model keeps realistic beams)')
    ap.add_argument('--users', type=int, default=2000, help='test users ranked each way (the judge validates 2,000 a epoch)')
    ap.add_argument('--steps', type=int, default=20, help='training steps timed for the profile')
    ap.add_argument('--threads', type=int, default=2)
    ap.add_argument('--out', default=str(RESULTS/'beam_search.json'))
    a = ap.parse_args()
    torch.set_num_threads(a.threads)
    split = leave_one_out(read_interactions(beauty(a.data)/'Beauty.inter.json'))
    n = split.inter.n_items
    scheme = load_scheme(a.ids, n)[0] if a.ids else random_scheme(n, [256] * a.letters, seed=0, name=f'random {a.letters}x256')
    task = RetrieverTask(scheme, split, dict(epochs=a.epochs, patience=a.epochs, seed=0))
    t0 = time.perf_counter(); task.fit(); train_s = time.perf_counter() - t0
    prof = train_profile(task, a.steps)
    samples = split.test[:a.users]
    plain, plain_scores, plain_s = ranked(task, samples, False, task.cfg.eval_batch)
    cache, cache_scores, cache_s = ranked(task, samples, True, task.cfg.eval_batch)
    same = (plain == cache).all(1)
    finite = np.isfinite(plain_scores) & np.isfinite(cache_scores)
    rows = [dict(method='recompute every prefix (before)', ms_per_user=1000 * plain_s / len(samples), ratio=1.0),
            dict(method='decoder cache (decode_next)', ms_per_user=1000 * cache_s / len(samples), ratio=plain_s / cache_s)]
    print(f"{scheme.name}: {scheme.levels} letters, beam {task.cfg.beam}, {len(samples)} users, {a.threads} threads, "
          f"model trained {a.epochs} epoch(s) in {train_s:.0f} s")
    print(f"{'method':<34}{'ms/user':>10}{'speed-up':>10}")
    for r in rows: print(f"{r['method']:<34}{r['ms_per_user']:>10.2f}{r['ratio']:>9.2f}x")
    print(f"same ranked items for {same.mean():.2%} of users; largest score difference {np.abs(plain_scores - cache_scores)[finite].max():.2e}")
    steps_s = prof['step_s'] * task.n_batches()
    epoch = {k: dict(train_steps_s=steps_s, validation_s=task.cfg.valid_users * ms / 1000, test_s=len(split.test) * ms / 1000)
             for k, ms in (('before', rows[0]['ms_per_user']), ('after', rows[1]['ms_per_user']))}
    print(f"an epoch: {task.n_batches()} training steps of {prof['step_s'] * 1000:.0f} ms = {steps_s:.0f} s; validating "
          f"{task.cfg.valid_users} users {epoch['before']['validation_s']:.0f} s before, {epoch['after']['validation_s']:.0f} s after; "
          f"scoring all {len(split.test)} test users {epoch['before']['test_s']:.0f} s before, {epoch['after']['test_s']:.0f} s after")
    print(f"a training step: {prof['step_s'] * 1000:.0f} ms, without dropout {prof['step_no_dropout_s'] * 1000:.0f} ms "
          f"({prof['step_no_dropout_s'] / prof['step_s']:.2f}x); alone: "
          + ', '.join(f'{k} {v:.0f} ms' for k, v in prof['parts_ms'].items()))
    print('a training step\'s time by operator:', ', '.join(f'{k} {v:.0%}' for k, v in prof['top_ops'].items()))
    note = (f"Beam search over {scheme.levels}-letter IDs ({scheme.name}), {len(samples)} Beauty test users, {a.threads} thread(s): "
            f"the decoder cache is {rows[1]['ratio']:.2f}x as fast, the same items for {same.mean():.1%} of users")
    write_result(a.out, dict(meta=dict(question='beam search with and without the decoder cache'), note=note, scheme=scheme.name,
                             letters=scheme.levels, beam=task.cfg.beam, users=len(samples), threads=a.threads, epochs=a.epochs,
                             train_s=round(train_s, 1), rows=rows, same_items=float(same.mean()),
                             max_score_diff=float(np.abs(plain_scores - cache_scores)[finite].max()),
                             train_step=prof, epoch_s=epoch, batches_per_epoch=task.n_batches()))


if __name__ == '__main__':
    main()
