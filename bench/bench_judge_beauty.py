"""Which IDs, and how many letters? The judge on Amazon Beauty, in one run, with paired verdicts.

Interactions -> SASRec CF embeddings (`cf_run`) -> the default tokenizer (8 letters of 256 codes, CF-aligned) on them
-> its collision-free code table -> one `retrieval_run` (the small judge, the default retriever preset, fixed epochs, every test user) over the
kit's IDs, LETTER's released IDs, RQ-KMeans of the same CF table (the same shape as the kit's), random IDs of that
shape and plain item IDs, plus the first 2, 3, 4 and 6 letters of the kit's IDs. Every scheme is scored on the same
test users, so every difference gets a paired standard error; the ID length is recommended on the validation users.

  python bench/bench_judge_beauty.py --work /tmp/judge-beauty      # resumable: run it again to go on

Writes bench/results/judge_beauty.json (the rows without per-user ranks, the paired table, the recommended length,
the command) and the retriever's HTML report in --work. The data is read from ../shared/data/beauty in place.
"""
import argparse, json, os, platform, sys, time
from dataclasses import asdict
from pathlib import Path
import numpy as np
import torch

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
from letter8_tokenizer.config import Config, override
from letter8_tokenizer.data import Items
from letter8_tokenizer.train import TokenizerTask, tokenizer_draws
from letter8_tokenizer.loop import run_segment
from letter8_tokenizer.export import encode_run, code_table
from letter8_tokenizer.cf import cf_run
from letter8_tokenizer.retrieval import (rqkmeans_scheme, retrieval_run, results_table, verdict_summary, paired_table,
                                         recommend_length, retriever_config)

DATA = ROOT.parent/'shared'/'data'/'beauty'


def cf_stage(a) -> Path:
    "SASRec on the training interactions: work/cf/cf.npy, and each item's training interactions beside it (counts.npy)."
    out = Path(a.work)/'cf'
    if not all((out/f).exists() for f in ('cf.npy', 'counts.npy')):  # a finished run writes its files again, counts.npy included
        r = cf_run(Path(a.data)/'Beauty.inter.json', out, dict(dim=a.cf_dim, max_len=20, epochs=a.cf_epochs, patience=5), progress=False)
        if r.status != 'done': sys.exit(f"CF stopped: {r.status} {r.message}; run again to resume.")
    return out/'cf.npy'


def kit_stage(a, cf:Path) -> Path:
    "The default tokenizer (with `a.tok_set`'s overrides, if any), CF-aligned, on the CF table, for the steps of `tok_epochs` passes over the catalog: work/ids/kit.npy (collision-free)."
    ids = Path(a.work)/'ids'; ids.mkdir(parents=True, exist_ok=True)
    if not (ids/'kit.npy').exists():
        counts = cf.with_name('counts.npy')
        if not counts.exists(): sys.exit(f"{counts}: missing; the tokenizer's data.popularity reads it. Run cf_run on that CF folder again (it writes it), or give --cf a cf.npy that has counts.npy beside it.")
        items, tok_set = Items(cf, cf=cf, counts=counts), getattr(a, 'tok_set', {})
        draws = tokenizer_draws(override(Config(), tok_set), items)
        epochs = a.tok_epochs if draws is None else max(1, round(a.tok_epochs * len(items) / draws.sum()))  # the same steps, drawn by popularity
        task = TokenizerTask(override(Config(), {'optim.epochs': epochs, 'seed': a.seed, **tok_set}), items, 'cpu')
        r = run_segment(task, Path(a.work)/'tok', progress=False)
        if r.status != 'done': sys.exit(f"tokenizer stopped: {r.status} {r.message}; run again to resume.")
        codes, _, last = encode_run(task.model.eval(), items, devices=None)
        np.save(ids/'kit.npy', code_table(task.model, codes, last).codes)
    return ids/'kit.npy'


def rqkmeans_stage(a, cf:Path, kit:Path) -> Path:
    "RQ-KMeans of the same CF table, with the kit's levels and codes per level: work/ids/rq-kmeans.npy."
    out = Path(a.work)/'ids'/'rq-kmeans.npy'
    if not out.exists():
        levels = np.load(kit).shape[1]  # the kit's letters
        np.save(out, rqkmeans_scheme(np.load(cf), levels=levels, k=256, seed=a.seed).base)
    return out


def main():
    p = argparse.ArgumentParser(description=__doc__.split('\n')[0])
    p.add_argument('--data', default=str(DATA), help='folder with Beauty.inter.json and Beauty.index.json')
    p.add_argument('--work', required=True, help='run folder (outside the project); every stage resumes from it')
    p.add_argument('--threads', type=int, default=1)
    p.add_argument('--seed', type=int, default=0)
    p.add_argument('--cf-dim', type=int, default=64); p.add_argument('--cf-epochs', type=int, default=40)
    p.add_argument('--tok-epochs', type=int, default=50, help="the tokenizer's steps, in passes over the catalog (with popularity draws, fewer, longer epochs)")
    p.add_argument('--epochs', type=int, default=8, help="the retriever's epochs, all of them (patience = epochs)")
    p.add_argument('--d-model', type=int, default=None, help="the retriever's width (feed-forward 4x); unset: the small judge's")
    p.add_argument('--history', default=None, help="'items' (one position per item, fast on a CPU) or 'tokens' (TIGER's); unset: the small judge's")
    p.add_argument('--lengths', default='2,3,4,6', help="prefixes of the kit's IDs scored beside the whole IDs")
    p.add_argument('--out', default=str(ROOT/'bench'/'results'/'judge_beauty.json'))
    a = p.parse_args()
    torch.set_num_threads(a.threads)
    t0 = time.time()
    cf = cf_stage(a); print(f"CF table: {cf}", flush=True)
    kit = kit_stage(a, cf); print(f"kit IDs: {kit}", flush=True)
    rq = rqkmeans_stage(a, cf, kit)
    specs = [str(kit), str(Path(a.data)/'Beauty.index.json'), str(rq), f'random:{a.seed}', 'items']
    config = dict(epochs=a.epochs, patience=a.epochs, seed=a.seed, lengths=a.lengths, **({'history': a.history} if a.history else {}),
                  **({'d_model': a.d_model, 'ff': 4 * a.d_model} if a.d_model else {}))
    r = retrieval_run(Path(a.data)/'Beauty.inter.json', specs, Path(a.work)/'retrieval', config, progress=False)
    if r['status'] != 'done': sys.exit(f"retrieval stopped: {r['status']}; run again to resume.")
    rows = r['rows']
    print(results_table(rows)); print(verdict_summary(rows))
    cfm = json.loads((cf.parent/'cf_metrics.json').read_text())
    meta = dict(command='python bench/bench_judge_beauty.py ' + ' '.join(sys.argv[1:]), data=str(a.data), seed=a.seed, retriever=asdict(retriever_config(config)),
                tokenizer=dict(config='default (8 x 256, CF-aligned)', epochs=a.tok_epochs), cf={k: cfm[k] for k in ('best_epoch', 'valid', 'test')},
                threads=a.threads, python=platform.python_version(), torch=torch.__version__, cpus=os.cpu_count(), seconds=round(time.time() - t0))
    out = dict(meta=meta, note="One seed: the paired s.e. is over the test users of this one run.",
               results=[{k: v for k, v in row.items() if k != 'ranks'} for row in rows],
               paired=paired_table(rows), valid_paired=paired_table(rows, 'valid'), length=recommend_length(rows))
    Path(a.out).write_text(json.dumps(out, indent=1, default=str))
    print(f"wrote {a.out}")


if __name__ == '__main__': main()
