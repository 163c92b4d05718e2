"""Should the tokenizer draw popular items more often? The choice of `data.popularity`, made on Beauty's validation users only.

One SASRec CF table of Amazon Beauty and its training counts (`bench_judge_beauty.cf_stage`). Four ID schemes of its
first 2 letters (the length the Beauty judge recommends on validation users), seed 0:

  kit-a0-s0     the tokenizer, every item once per epoch (data.popularity 0: the old default)
  kit-a0.5-s0   the tokenizer, each item round(count ** 0.5) times (data.popularity 0.5), for the same number of steps
  rq-a0-s0      RQ-KMeans of the table
  rq-a0.5-s0    RQ-KMeans of the table with each item's row repeated round(count ** 0.5) times (weighted k-means)

then one `retrieval_run` of the small judge (8 epochs, seed 0) over the four, scored on every validation user
(`valid_users=0`). It writes the validation scores and the paired validation table, and no test number: test users
judge the chosen default afterwards, in `bench_judge_seeds.py`.

  python bench/bench_popularity_valid.py --work /tmp/popularity --threads 2     # resumable; about 45 min on 2 cores

Writes bench/results/judge_popularity_valid_beauty.json.
"""
import argparse, json, os, platform, shlex, sys, time
from argparse import Namespace
from pathlib import Path
import numpy as np
import torch

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT)); sys.path.insert(0, str(ROOT/'bench'))
from bench_judge_beauty import DATA, cf_stage, kit_stage
from letter8_tokenizer.data import popularity_draws
from letter8_tokenizer.kmeans import residual_init
from letter8_tokenizer.sequences import leave_one_out, read_interactions
from letter8_tokenizer.retrieval import retrieval_run, paired_table, paired_markdown, retriever_config, judge_note

LETTERS, EXPONENT, SEED = 2, 0.5, 0


def kit_ids(a, cf:Path, exponent:float) -> Path:
    "The first letters of the tokenizer's IDs with `data.popularity` = `exponent`, trained for `a.tok_epochs` passes' steps."
    out = Path(a.work)/'ids'/f'kit-a{exponent:g}-s{SEED}.npy'
    if not out.exists():
        kit = kit_stage(Namespace(work=str(Path(a.work)/f'kit-a{exponent:g}'), seed=SEED, tok_epochs=a.tok_epochs, tok_set={'data.popularity': exponent}), cf)
        np.save(out, np.load(kit)[:, :LETTERS])
    return out


def rq_ids(a, cf:Path, exponent:float) -> Path:
    "RQ-KMeans of the table, each row repeated as `popularity_draws` says (exponent 0: plain RQ-KMeans); the first letters."
    out = Path(a.work)/'ids'/f'rq-a{exponent:g}-s{SEED}.npy'
    if not out.exists():
        rep = popularity_draws(np.load(cf.with_name('counts.npy')), exponent)
        init = residual_init(np.repeat(np.load(cf), rep, axis=0).astype(np.float32), LETTERS, [256] * LETTERS, seed=SEED)
        np.save(out, init.codes[np.cumsum(rep) - rep])  # each item's first row
    return out


def shared_targets(inter:Path, ids:list) -> dict:
    "For each scheme: the share of validation targets whose letters some other item has too (the retriever must then guess the suffix)."
    split = leave_one_out(read_interactions(inter))
    target = np.asarray(split.inter.items)[split.valid[:, 1]]
    out = {}
    for path in ids:
        codes = np.load(path); _, inverse, sizes = np.unique(codes, axis=0, return_inverse=True, return_counts=True)
        out[Path(path).stem] = float((sizes[inverse.ravel()][target] > 1).mean())
    return out


def main():
    p = argparse.ArgumentParser(description=__doc__.split('\n')[0])
    p.add_argument('--data', default=str(DATA), help='folder with Beauty.inter.json')
    p.add_argument('--work', required=True, help='run folder (outside the project); every stage resumes from it')
    p.add_argument('--threads', type=int, default=2)
    p.add_argument('--cf', default=None, help='an existing CF table (.npy, with counts.npy beside it); unset: learn one in --work')
    p.add_argument('--tok-epochs', type=int, default=50, help="the tokenizer's steps, in passes over the catalog")
    p.add_argument('--epochs', type=int, default=8, help="the retriever's epochs, all of them")
    p.add_argument('--out', default=str(ROOT/'bench'/'results'/'judge_popularity_valid_beauty.json'))
    a = p.parse_args()
    if a.cf and not Path(a.cf).with_name('counts.npy').is_file(): sys.exit(f"--cf {a.cf}: no counts.npy beside it; run cf_run on its folder again, or leave --cf out.")
    torch.set_num_threads(a.threads)
    t0 = time.time()
    cf = Path(a.cf) if a.cf else cf_stage(Namespace(work=a.work, data=a.data, cf_dim=64, cf_epochs=40))
    (Path(a.work)/'ids').mkdir(parents=True, exist_ok=True)
    ids = [kit_ids(a, cf, 0), rq_ids(a, cf, 0), kit_ids(a, cf, EXPONENT), rq_ids(a, cf, EXPONENT)]
    config = dict(epochs=a.epochs, patience=a.epochs, seed=SEED, d_model=64, ff=256, history='items', valid_users=0)
    r = retrieval_run(Path(a.data)/'Beauty.inter.json', [str(i) for i in ids], Path(a.work)/'retrieval', config, progress=False)
    if r['status'] != 'done': sys.exit(f"retrieval stopped: {r['status']}; run again to resume.")
    valid = paired_table(r['rows'], 'valid')
    print("Every validation user, seed 0:\n" + paired_markdown(valid))
    targets = shared_targets(Path(a.data)/'Beauty.inter.json', ids)
    scores = {row['group']: dict(valid_ndcg10=row['valid'], best_epoch=row['best_epoch'], collided=row['collided'],
                                 valid_targets_shared=targets[row['group']]) for row in r['rows']}
    counts, split = np.load(cf.with_name('counts.npy')), leave_one_out(read_interactions(Path(a.data)/'Beauty.inter.json'))
    medians = dict(item=float(np.median(counts)), validation_target=float(np.median(counts[np.asarray(split.inter.items)[split.valid[:, 1]]])))
    meta = dict(command='python bench/bench_popularity_valid.py ' + shlex.join(sys.argv[1:]), data=str(a.data), letters=LETTERS, exponent=EXPONENT,
                seed=SEED, tok_epochs=a.tok_epochs, retriever=retriever_config(config).__dict__, judge=judge_note('small'), threads=a.threads,
                python=platform.python_version(), torch=torch.__version__, cpus=os.cpu_count(), seconds_this_call=round(time.time() - t0),
                note="validation users only; 'valid' is the best epoch's validation NDCG@10 of each scheme; no test number is read")
    Path(a.out).write_text(json.dumps(dict(meta=meta, median_train_interactions=medians, schemes=scores, valid=valid), indent=1, default=str))
    print(f"wrote {a.out}")


if __name__ == '__main__': main()
