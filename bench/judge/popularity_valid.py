"""Should the tokenizer draw popular items more often? The choice of `data.popularity`, made on Beauty's validation users only.

One SASRec CF table of Amazon Beauty (--cf, else the one the first run learns, `cf_path="sasrec"`) and each item's
training interactions. Four ID schemes of its first 2 letters (the length the Beauty judge recommends on validation
users), seed 0:

  kit-a0-s0     the tokenizer, every item once per epoch (data.popularity 0: the old default)
  kit-a0.5-s0   the tokenizer, each item round(count ** 0.5) times (data.popularity 0.5), for the same number of steps
  rq-a0-s0      RQ-KMeans of the table
  rq-a0.5-s0    RQ-KMeans of the table with each item's row repeated round(count ** 0.5) times (weighted k-means)

Each tokenizer is a run of the library's stages (`stages.run_stages`, to its export; the default tokenizer on the CF
table, `items_path="cf"`; a normal run folder, <folder>/kit-a<exponent>, its parameters in
<folder>/kit-a<exponent>.parameters.yaml). Then one `judge.retrieval_run` of the small judge (8 epochs, seed 0) over the
four, scored on every validation user (`valid_users=0`). It writes the validation scores and the paired validation
table, and no test number: test users judge the chosen default afterwards, in `bench/judge/seeds.py`.

  python bench/judge/popularity_valid.py --work <folder> --threads 2     # resumable; about 45 min on 2 cores

Writes bench/results/judge_popularity_valid_beauty.json.
"""
import argparse, json, sys, time
from pathlib import Path
import numpy as np
import torch
import yaml
sys.path.insert(0, str(Path(__file__).resolve().parents[2]))  # the clone's root, for bench.common
from bench.common import RESULTS, add_data_flag, beauty, write_result
from letter8_tokenizer.config import Config, save_config
from letter8_tokenizer.data import popularity_draws
from letter8_tokenizer.kmeans import residual_init
from letter8_tokenizer.sequences import leave_one_out, read_interactions, train_counts
from letter8_tokenizer.stages import run_stages
from letter8_tokenizer.runfolder import run_paths
from letter8_tokenizer.codes import CodeTable
from letter8_tokenizer.retriever import retriever_config
from letter8_tokenizer.judge import retrieval_run, paired_table, paired_markdown, judge_note

LETTERS, EXPONENT, SEED = 2, 0.5, 0
MONTH_S = 30 * 86400.  # the session length the bench's stages run under: no deadline, one process to the end

def kit_ids(a, counts:np.ndarray, exponent:float) -> Path:
    "The first letters of the IDs of a run of the library's stages with `data.popularity` = `exponent`, for `a.tok_epochs` passes' steps."
    out, name, work = Path(a.work)/'ids'/f'kit-a{exponent:g}-s{SEED}.npy', f'kit-a{exponent:g}', Path(a.work).absolute()
    cf = a.cf or 'sasrec'
    epochs = a.tok_epochs if not exponent else max(1, round(a.tok_epochs * len(counts) / popularity_draws(counts, exponent).sum()))
    params = dict(experiment=name, work_dir=str(work), items_path='cf', cf_path=cf, interactions_path=str(a.inter),
                  cf_overrides=json.dumps(dict(dim=64, max_len=20, epochs=40, patience=5)), config_path=str(save_config(Config(), work/'config.json')),
                  overrides=json.dumps({'optim.epochs': epochs, 'seed': SEED, 'data.popularity': exponent, **json.loads(a.set)}),
                  device=a.device, session_limit_s=MONTH_S)
    (work/f'{name}.parameters.yaml').write_text(yaml.safe_dump(params, sort_keys=False))
    for r in run_stages(params).values():
        if not r.done: sys.exit(f"{name}: stage {r.stage} stopped ({r.status}): run the same command again to resume.")
    a.params[name] = {k: v for k, v in params.items() if k not in ('work_dir', 'interactions_path', 'config_path')}
    run = run_paths(work, name)
    if cf == 'sasrec':  # the first run learned the CF table: the other run, and RQ-KMeans, read it
        a.cf = str(run.cf/'cf.npy'); (work/'cf_table.txt').write_text(a.cf)
    if not out.exists(): np.save(out, CodeTable.load(run.codes).codes[:, :LETTERS])
    return out

def rq_ids(a, counts:np.ndarray, exponent:float) -> Path:
    "RQ-KMeans of the table, each row repeated as `popularity_draws` says (exponent 0: plain RQ-KMeans); the first letters."
    out = Path(a.work)/'ids'/f'rq-a{exponent:g}-s{SEED}.npy'
    if not out.exists():
        rep = popularity_draws(counts, exponent)
        init = residual_init(np.repeat(np.load(a.cf), rep, axis=0).astype(np.float32), LETTERS, [256] * LETTERS, seed=SEED)
        np.save(out, init.codes[np.cumsum(rep) - rep])  # each item's first row
    return out

def shared_targets(split, ids:list) -> dict:
    "For each scheme: the share of validation targets whose letters some other item has too (the retriever must then guess the suffix)."
    target = np.asarray(split.inter.items)[split.valid[:, 1]]
    out = {}
    for path in ids:
        codes = np.load(path); _, inverse, sizes = np.unique(codes, axis=0, return_inverse=True, return_counts=True)
        out[Path(path).stem] = float((sizes[inverse.ravel()][target] > 1).mean())
    return out

def main():
    p = argparse.ArgumentParser(description=__doc__.split('\n')[0])
    add_data_flag(p)
    p.add_argument('--work', required=True, help='folder of the runs (outside the project); every stage resumes from it')
    p.add_argument('--threads', type=int, default=2)
    p.add_argument('--device', default='auto', help="what trains: auto (CUDA, else a TPU, else the CPU), cpu, cuda or xla")
    p.add_argument('--cf', default=None, help='an existing CF table (.npy); unset: the first run learns one')
    p.add_argument('--set', default='{}', help="JSON of dotted config overrides for both tokenizers (default: the default config)")
    p.add_argument('--tok-epochs', type=int, default=50, help="the tokenizer's steps, in passes over the catalog")
    p.add_argument('--epochs', type=int, default=8, help="the retriever's epochs, all of them")
    p.add_argument('--out', default=str(RESULTS/'judge_popularity_valid_beauty.json'))
    a = p.parse_args()
    a.inter, a.params, table = beauty(a.data)/'Beauty.inter.json', {}, Path(a.work)/'cf_table.txt'
    if a.cf and not Path(a.cf).is_file(): sys.exit(f"--cf {a.cf}: no such file; give a CF table (.npy) or leave --cf out to learn one.")
    if not a.cf and table.is_file(): a.cf = table.read_text().strip()  # learned by an earlier call's first run
    torch.set_num_threads(a.threads)
    t0 = time.time()
    (Path(a.work)/'ids').mkdir(parents=True, exist_ok=True)
    split = leave_one_out(read_interactions(a.inter))
    counts = train_counts(split)
    ids = [kit_ids(a, counts, 0), rq_ids(a, counts, 0), kit_ids(a, counts, EXPONENT), rq_ids(a, counts, EXPONENT)]
    config = dict(epochs=a.epochs, patience=a.epochs, seed=SEED, d_model=64, ff=256, history='items', valid_users=0)
    r = retrieval_run(a.inter, [str(i) for i in ids], Path(a.work)/'retrieval', config, progress=False)
    if r['status'] != 'done': sys.exit(f"retrieval stopped: {r['status']}; run again to resume.")
    valid = paired_table(r['rows'], 'valid')
    print("Every validation user, seed 0:\n" + paired_markdown(valid))
    targets = shared_targets(split, ids)
    scores = {row['group']: dict(valid_ndcg10=row['valid'], best_epoch=row['best_epoch'], collided=row['collided'],
                                 valid_targets_shared=targets[row['group']]) for row in r['rows']}
    medians = dict(item=float(np.median(counts)), validation_target=float(np.median(counts[np.asarray(split.inter.items)[split.valid[:, 1]]])))
    meta = dict(data='beauty', letters=LETTERS, exponent=EXPONENT, seed=SEED, tok_epochs=a.tok_epochs, runs=a.params,
                retriever=retriever_config(config).__dict__, judge=judge_note('small'), threads=a.threads, seconds_this_call=round(time.time() - t0),
                note="validation users only; 'valid' is the best epoch's validation NDCG@10 of each scheme; no test number is read")
    write_result(a.out, dict(meta=meta, median_train_interactions=medians, schemes=scores, valid=valid))

if __name__ == '__main__': main()
