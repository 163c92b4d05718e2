"""Which IDs, and how many letters? The judge on Amazon Beauty, in one run, with paired verdicts.

One run of the library's stages (`stages.run_stages`, the segment notebook's parameters): Beauty's interactions ->
SASRec CF embeddings (`cf_path="sasrec"`) -> the default tokenizer (8 letters of 256 codes) on that CF table
(`items_path="cf"`, drawing items by their training interactions, for the steps of --tok-epochs passes over the
catalog) -> the export's collision-free code table -> the retrieval stage: the small judge (the default retriever
preset, every test user; each scheme trained until its validation NDCG@10 stops improving, under a cap it should not
reach) over the run's IDs, LETTER's released IDs, RQ-KMeans of the run's CF table (`ids.rqkmeans_scheme`, the same
shape as the run's IDs), random IDs of that shape and plain item IDs, plus the first 2, 3 and 4 letters of the run's
IDs (`lengths`) and of RQ-KMeans'. SASRec, too, stops on its validation score. Every scheme is scored on the same test users, so every difference
gets a paired standard error; the ID length is recommended on the validation users.

  python bench/judge/beauty.py --work <folder> --threads 2      # resumable: run it again to go on

The run folder is <folder>/judge, a normal run folder: <folder>/parameters.yaml holds its parameters, so
`letter8 run --params <folder>/parameters.yaml --out <folder>` resumes or redoes it. Tables name the run's IDs 'kit'
(the code table's folder is `codes`). Writes bench/results/judge_beauty.json (the rows without per-user ranks, the
paired tables, the recommended length, the run's parameters); the retriever's HTML report is in <folder>/judge/retrieval.
The data is read in place from <data>/beauty (`bench/common.py`: --data, $LETTER8_DATA).
"""
import argparse, json, sys, time
from dataclasses import asdict
from pathlib import Path
import numpy as np
import torch
import yaml
sys.path.insert(0, str(Path(__file__).resolve().parents[2]))  # the clone's root, for bench.common
from bench.common import RESULTS, add_data_flag, beauty, write_result
from letter8_tokenizer.config import Config, override, save_config
from letter8_tokenizer.data import popularity_draws
from letter8_tokenizer.sequences import leave_one_out, read_interactions, train_counts
from letter8_tokenizer.stages import run_stages
from letter8_tokenizer.runfolder import run_paths
from letter8_tokenizer.codes import CodeTable
from letter8_tokenizer.ids import rqkmeans_scheme
from letter8_tokenizer.retriever import retriever_config
from letter8_tokenizer.judge import report_rows, results_table, verdict_summary, paired_table, recommend_length

MONTH_S = 30 * 86400.  # the session length the bench's stages run under: no deadline, one process to the end

def kit_names(rows:list) -> list:
    "The rows with the run's code table (group 'codes', 'codes[:n]') named 'kit' as the tables and the Results page name it."
    ren = lambda g: 'kit' + g[len('codes'):] if isinstance(g, str) and g.startswith('codes') else g
    return [dict(r, group=ren(r['group']), **({'prefix_of': ren(r['prefix_of'])} if r.get('prefix_of') else {})) for r in rows]

def steps_as_epochs(inter:Path, epochs:int, popularity:float) -> int:
    "Epochs with popularity draws that take the steps of `epochs` passes over the catalog (each item once)."
    counts = train_counts(leave_one_out(read_interactions(inter)))
    return epochs if not popularity else max(1, round(epochs * len(counts) / popularity_draws(counts, popularity).sum()))

def run_params(a, inter:Path, retrieval_ids:str='') -> dict:
    "The segment notebook's parameters of the bench's run."
    work = Path(a.work).absolute(); work.mkdir(parents=True, exist_ok=True)
    config = save_config(Config(), work/'config.json')  # the library's default tokenizer, not the notebook's tiny one
    epochs = steps_as_epochs(inter, a.tok_epochs, override(Config(), json.loads(a.set)).data.popularity)
    retriever = dict(epochs=a.epochs, patience=a.patience, seed=a.seed, lengths=a.lengths, **({'history': a.history} if a.history else {}),
                     **({'d_model': a.d_model, 'ff': 4 * a.d_model} if a.d_model else {}))
    return dict(experiment='judge', work_dir=str(work), items_path='cf', cf_path='sasrec', interactions_path=str(inter),
                cf_overrides=json.dumps(dict(dim=a.cf_dim, max_len=20, epochs=a.cf_epochs, patience=a.cf_patience)), config_path=str(config),
                overrides=json.dumps({'optim.epochs': epochs, 'seed': a.seed, **json.loads(a.set)}), device=a.device, session_limit_s=MONTH_S,
                retrieval_ids=retrieval_ids, retriever_overrides=json.dumps(retriever))

def stages(params:dict) -> None:
    "Run the stages; exit, saying how to go on, unless every one finished."
    Path(params['work_dir'], 'parameters.yaml').write_text(yaml.safe_dump(params, sort_keys=False))
    for r in run_stages(params).values():
        print(f"  {r}", flush=True)
        if not r.done: sys.exit(f"stage {r.stage} stopped ({r.status}): run the same command again to resume.")

def main():
    p = argparse.ArgumentParser(description=__doc__.split('\n')[0])
    add_data_flag(p)
    p.add_argument('--work', required=True, help='folder of the run (outside the project); every stage resumes from it')
    p.add_argument('--threads', type=int, default=1)
    p.add_argument('--device', default='auto', help="what trains: auto (CUDA, else a TPU, else the CPU), cpu, cuda or xla")
    p.add_argument('--seed', type=int, default=0)
    p.add_argument('--set', default='{}', help="JSON of the tokenizer's dotted config overrides (default: the default config)")
    p.add_argument('--cf-dim', type=int, default=64)
    p.add_argument('--cf-epochs', type=int, default=300, help="SASRec's epoch cap (it stops earlier, on its validation score)")
    p.add_argument('--cf-patience', type=int, default=10, help="SASRec stops after this many epochs without a better validation NDCG@10")
    p.add_argument('--tok-epochs', type=int, default=50, help="the tokenizer's steps, in passes over the catalog (with popularity draws, fewer, longer epochs)")
    p.add_argument('--epochs', type=int, default=100, help="the retriever's epoch cap: each scheme stops earlier, on its validation score")
    p.add_argument('--patience', type=int, default=5, help="a scheme stops after this many epochs without a better validation NDCG@10")
    p.add_argument('--d-model', type=int, default=None, help="the retriever's width (feed-forward 4x); unset: the small judge's")
    p.add_argument('--history', default=None, help="'items' (one position per item, fast on a CPU) or 'tokens' (TIGER's); unset: the small judge's")
    p.add_argument('--lengths', default='2,3,4', help="prefixes of the run's IDs, and of RQ-KMeans', scored beside the whole IDs")
    p.add_argument('--out', default=str(RESULTS/'judge_beauty.json'))
    a = p.parse_args()
    torch.set_num_threads(a.threads)
    t0, data = time.time(), beauty(a.data)
    stages(run_params(a, data/'Beauty.inter.json'))  # CF -> tokenizer -> export
    run = run_paths(a.work, 'judge')
    rq = Path(a.work)/'ids'/'rq-kmeans.npy'  # the peer: RQ-KMeans of the run's own CF table, the run's shape
    if not rq.exists():
        rq.parent.mkdir(parents=True, exist_ok=True)
        k = override(Config(), json.loads(a.set)).model.codebook_size
        np.save(rq, rqkmeans_scheme(np.load(run.cf/'cf.npy'), levels=CodeTable.load(run.codes).codes.shape[1], k=k, seed=a.seed).base)
    rq_cut = []  # RQ-KMeans at each length too: the length question asked of both quantisers
    for n in sorted({int(x) for x in a.lengths.split(',') if x.strip()}):
        cut = rq.with_name(f'rq-kmeans[:{n}].npy'); rq_cut.append(str(cut))
        if not cut.exists(): np.save(cut, np.load(rq)[:, :n])
    params = run_params(a, data/'Beauty.inter.json',
                        ','.join([str(data/'Beauty.index.json'), str(rq), f'random:{a.seed}', 'items', *rq_cut]))
    stages(params)  # the retrieval stage
    rows = kit_names(report_rows(run.retrieval))
    print(results_table(rows)); print(verdict_summary(rows))
    cfm = json.loads((run.cf/'cf_metrics.json').read_text())
    meta = dict(data='beauty', seed=a.seed, retriever=asdict(retriever_config(json.loads(params['retriever_overrides']))),
                tokenizer=dict(config="default (8 x 256), on the CF table (items_path 'cf')", epochs=a.tok_epochs,
                               overrides=json.loads(params['overrides'])),
                cf={k: cfm[k] for k in ('best_epoch', 'valid', 'test')}, threads=a.threads, seconds=round(time.time() - t0),
                parameters={k: v for k, v in params.items() if k not in ('work_dir', 'interactions_path', 'config_path', 'retrieval_ids')})
    write_result(a.out, dict(meta=meta, note="One seed: the paired s.e. is over the test users of this one run.",
                             results=[{k: v for k, v in row.items() if k != 'ranks'} for row in rows],
                             paired=paired_table(rows), valid_paired=paired_table(rows, 'valid'), length=recommend_length(rows)))

if __name__ == '__main__': main()
