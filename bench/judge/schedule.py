"""How fast does a judged scheme converge? Learning-rate schedules of the small judge, on validation users only.

The judge trains one retriever per ID scheme until its validation NDCG@10 stops improving. With the small preset's old
schedule (a constant AdamW rate of 1e-3, dropout 0.1, 256 samples a step) an 8-letter scheme on Beauty was still
improving after 27 epochs (about 30 minutes on one core), so a verdict at convergence cost hours. This script trains the small judge on
one scheme (the kit's 8-letter IDs of a judge run, the slowest shape of the length table) under each candidate
schedule and regulariser (dropout, or AdamW weight decay in its place) for at most --budget-s seconds with no early
stopping, and records every epoch's validation score and the seconds it was reached. From each curve it reads what
early stopping with each --patience would have done: the epoch it stops at, the best validation NDCG@10 it keeps,
and the seconds it takes. The test users are never scored here: the schedule is chosen on validation users.

  python bench/judge/schedule.py --ids <work>/judge/codes --work <folder> --only lr3e-3   # one candidate (resumable per candidate)
  python bench/judge/schedule.py --ids <work>/judge/codes --work <folder>                 # every candidate, then the table

Each candidate's curve is kept in <folder>/<name>.json, so candidates can run in parallel processes (one thread each)
and a later call merges them. Writes bench/results/judge_schedule.json. The data are read from <data>/beauty
(bench/common.py: --data, $LETTER8_DATA).
"""
import argparse, json, sys, time
from dataclasses import asdict
from pathlib import Path
import numpy as np
import torch
sys.path.insert(0, str(Path(__file__).resolve().parents[2]))  # the clone's root, for bench.common
from bench.common import RESULTS, add_data_flag, beauty, write_result
from letter8_tokenizer.sequences import read_interactions, leave_one_out
from letter8_tokenizer.ids import load_scheme
from letter8_tokenizer.retriever import RetrieverTask, retriever_config

# each candidate names its whole schedule (the small preset's default is the chosen one); batch 256 in all: a larger batch
# is no faster per sample on a CPU (393 us at 256, 399 us at 1024, one thread); dropout is about 30% of a step
# (bench/results/beam_search.json, `train_step`), which weight decay in its place would save
CANDIDATES = {'old': dict(lr=1e-3, warmup=0, dropout=0.1),  # the small preset before: a constant rate
              'lr3e-3': dict(lr=3e-3, warmup=500, dropout=0.1),  # the small preset's default now
              'lr5e-3': dict(lr=5e-3, warmup=500, dropout=0.1),
              'lr3e-3-nodrop': dict(lr=3e-3, warmup=500, dropout=0.0),
              'wd0.1-nodrop': dict(lr=3e-3, warmup=500, dropout=0.0, weight_decay=0.1),  # weight decay instead of dropout: no cost a step
              'wd0.3-nodrop': dict(lr=3e-3, warmup=500, dropout=0.0, weight_decay=0.3)}


def curve(scheme, split, overrides:dict, budget_s:float, seed:int, save) -> dict:
    "Train with no early stopping until `budget_s` seconds have passed; `save` gets the curve so far after every epoch."
    cfg = retriever_config(dict(overrides, epochs=10**4, patience=10**4, seed=seed))
    task, rows, t0 = RetrieverTask(scheme, split, cfg), [], time.perf_counter()
    for epoch in range(cfg.epochs):
        for b in task.batches(epoch): task.step(b)
        m = task.end_epoch(epoch + 1)
        rows.append(dict(epoch=epoch, seconds=round(time.perf_counter() - t0, 1), loss=round(m['epoch_loss'], 4),
                         **{k: v for k, v in m.items() if k.startswith('valid_')}))
        print(json.dumps(rows[-1]), flush=True)
        done = rows[-1]['seconds'] > budget_s
        step_s = rows[-1]['seconds'] / (len(rows) * task.n_batches())
        save(dict(config=asdict(cfg), budget_s=budget_s, epochs=rows, step_s=step_s, complete=done))
        if done: break


def reference_curve(name:str, metrics:str) -> dict:
    "A curve from a judge run's retriever checkpoint folder (its `metrics.jsonl`): epochs and validation scores, no seconds."
    rows = [r for line in Path(metrics).read_text().splitlines() if 'valid_ndcg@10' in (r := json.loads(line))]
    epochs = [dict(epoch=r['epoch'] - 1, seconds=None, loss=round(r['epoch_loss'], 4), **{k: v for k, v in r.items() if k.startswith('valid_')})
              for r in rows]
    return dict(name=name, config=None, epochs=epochs, step_s=None, complete=True, source=f'{Path(metrics).parent.name}/metrics.jsonl of a judge run')


def early_stop(rows:list, patience:int, metric:str='valid_ndcg@10') -> dict:
    "What early stopping with `patience` does on a recorded curve: stop epoch, best epoch and score, seconds; None if the curve ran out first."
    best, best_i, bad = -1.0, -1, 0
    for i, r in enumerate(rows):
        if r[metric] > best: best, best_i, bad = r[metric], i, 0
        else: bad += 1
        if bad >= patience:
            return dict(patience=patience, stop_epoch=i, best_epoch=best_i, best=best, seconds=r['seconds'],
                        valid_recall10=rows[best_i]['valid_recall@10'])
    return dict(patience=patience, stop_epoch=None, best_epoch=best_i, best=best, seconds=None, valid_recall10=rows[best_i]['valid_recall@10'])


def main():
    ap = argparse.ArgumentParser(description=__doc__.split('\n')[0])
    add_data_flag(ap)
    ap.add_argument('--ids', required=True, help="the scheme trained (`ids.load_scheme`): e.g. a judge run's <work>/judge/codes")
    ap.add_argument('--work', required=True, help='folder for each candidate\'s curve (<name>.json)')
    ap.add_argument('--only', default='', help='comma list of candidates to run now (default: all); the table lists every finished one')
    ap.add_argument('--budget-s', type=float, default=900., help='seconds each candidate trains (no early stopping)')
    ap.add_argument('--patience', default='3,4,5', help='early-stopping patiences read from each curve')
    ap.add_argument('--seed', type=int, default=0)
    ap.add_argument('--threads', type=int, default=1)
    ap.add_argument('--reference', default='', help="NAME=<checkpoint folder>/metrics.jsonl: a curve a judge run recorded (epochs only), shown beside")
    ap.add_argument('--out', default=str(RESULTS/'judge_schedule.json'))
    a = ap.parse_args()
    torch.set_num_threads(a.threads)
    work = Path(a.work); work.mkdir(parents=True, exist_ok=True)
    split = leave_one_out(read_interactions(beauty(a.data)/'Beauty.inter.json'), retriever_config().max_len)
    scheme = load_scheme(a.ids, split.inter.n_items)[0]
    for name in (a.only.split(',') if a.only else CANDIDATES):
        part = work/f'{name}.json'
        if not part.exists() or not json.loads(part.read_text()).get('complete'):  # an unfinished curve is trained again
            print(f'== {name}: {CANDIDATES[name]}', flush=True)
            curve(scheme, split, CANDIDATES[name], a.budget_s, a.seed, lambda c: part.write_text(json.dumps(dict(name=name, threads=a.threads, **c))))
    parts = [json.loads(p.read_text()) for n in CANDIDATES if (p := work/f'{n}.json').exists()]
    if a.reference: parts.append(reference_curve(*a.reference.split('=', 1)))
    pats = [int(p) for p in a.patience.split(',')]
    print(f"{'candidate':14} {'s/step':>7} " + ' '.join(f'{"p=" + str(p) + ": best@ep  s":>22}' for p in pats))
    for c in parts:
        stops = [early_stop(c['epochs'], p) for p in pats]
        c['early_stop'] = stops
        print(f"{c['name'][:14]:14} {c['step_s'] or float('nan'):7.3f} " + ' '.join(
            f"{s['best']:.4f}@{s['best_epoch']:>3} {s['seconds'] or float('nan'):6.0f}".rjust(22) for s in stops))
        if c.get('note'): print(f"  {c['name']}: {c['note']}")
    write_result(a.out, dict(meta=dict(data='beauty', ids=Path(a.ids).name, scheme=scheme.name, letters=len(scheme.base_sizes),
                                       budget_s=a.budget_s, threads=a.threads, seed=a.seed, chosen_on='validation users'),
                             candidates=CANDIDATES, results=parts))

if __name__ == '__main__': main()
