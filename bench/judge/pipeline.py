"""The whole LETTER pipeline on Amazon Beauty, inside the kit, judged by a generative retriever in one run.

Interactions -> SASRec CF embeddings -> the tokenizer on them, without and with LETTER's CF alignment term (3 seeds
each) -> collision-free code tables -> the retriever (`judge.retrieval_run`), against LETTER's released
`Beauty.index.json`, random IDs of LETTER's shape (3 seeds), RQ-KMeans IDs of the same CF table (the tokenizer's
training-free init) and plain item IDs. Every scheme gets the same retriever, split and test users.

Each tokenizer is a run of the library's stages (`stages.run_stages`, to its export), 4 letters of 256 codes (LETTER's
shape on Beauty), drawing items by their training interactions for the steps of --tok-epochs passes: the first,
kit-0, learns the CF table (`cf_path="sasrec"`, the table as its items: no CF term); kit-1 and kit-2 train on that
table (`items_path="cf"`); kit-cf-0..2 train on it with the table as their CF embeddings too (`items_path` and
`cf_path` the same file, `loss.cf` --cf-weight). Each is a normal run folder, <folder>/<name>, its parameters in
<folder>/<name>.parameters.yaml for `letter8 run --params`.

  python bench/judge/pipeline.py --work <folder>                  # every stage, resumable: run it again to go on
  python bench/judge/pipeline.py --work <folder> --stage retrieval --schemes letter,random:0   # some schemes
  python bench/judge/pipeline.py --work <folder> --stage report   # the table and verdicts of what is done

Stages write into --work (outside the project) and skip what is there, so schemes can be split over processes
(`--schemes`) and a killed run continues. The report prints the table (mean ± half the spread over seeds), each
group's ratio to random IDs, and the issues' verdicts; it writes bench/results/pipeline.json and, with --report, an
HTML report. The data is read in place from <data>/beauty (`bench/common.py`: --data, $LETTER8_DATA).
"""
import argparse, json, subprocess, sys, time
from pathlib import Path
import numpy as np
import torch
import yaml
sys.path.insert(0, str(Path(__file__).resolve().parents[2]))  # the clone's root, for bench.common
from bench.common import RESULTS, add_data_flag, beauty, run_command, write_result
from letter8_tokenizer.config import Config, save_config
from letter8_tokenizer.data import popularity_draws
from letter8_tokenizer.sequences import leave_one_out, read_interactions, train_counts
from letter8_tokenizer.stages import run_stages
from letter8_tokenizer.runfolder import run_paths
from letter8_tokenizer.codes import CodeTable
from letter8_tokenizer.ids import scheme_from_index_json, random_like, rqkmeans_scheme
from letter8_tokenizer.retriever import METRICS
from letter8_tokenizer.judge import retrieval_run, summarise, results_table, write_retrieval_report, paired_table, paired_markdown
from letter8_tokenizer.sequences import read_inter_json

SEEDS = (0, 1, 2)
MONTH_S = 30 * 86400.  # the session length the bench's stages run under: no deadline, one process to the end
GROUPS = {'letter': "LETTER's released IDs", 'random': 'random IDs (LETTER shape)', 'items': 'item ids',
          'rq-kmeans': 'RQ-KMeans of the CF table (init)', 'kit': 'kit IDs, no CF term', 'kit-cf': 'kit IDs, CF-aligned'}


def tokenizer_run(a, name:str, seed:int, align:bool) -> Path:
    "Run tokenizer `name` through the library's stages to its export; its run folder. kit-0 learns the CF table the others read."
    work = Path(a.work).absolute(); work.mkdir(parents=True, exist_ok=True)
    cf = str(run_paths(work, 'kit-0').cf/'cf.npy') if name != 'kit-0' else 'sasrec'
    counts = train_counts(leave_one_out(read_interactions(a.inter)))
    epochs = max(1, round(a.tok_epochs * len(counts) / popularity_draws(counts, Config().data.popularity).sum()))  # the steps of tok_epochs passes
    params = dict(experiment=name, work_dir=str(work), items_path=cf if align else 'cf', cf_path=cf, interactions_path=str(a.inter),
                  cf_overrides=json.dumps(dict(dim=a.cf_dim, max_len=a.cf_max_len, epochs=a.cf_epochs, patience=5)),
                  config_path=str(save_config(Config(), work/'config.json')), device=a.device, session_limit_s=MONTH_S,
                  overrides=json.dumps({'model.levels': 4, 'optim.epochs': epochs, 'seed': seed, 'loss.cf': a.cf_weight if align else 0.0}))
    (work/f'{name}.parameters.yaml').write_text(yaml.safe_dump(params, sort_keys=False))
    t0 = time.perf_counter()
    for r in run_stages(params).values():
        if not r.done: sys.exit(f"tokenizer {name}: stage {r.stage} stopped ({r.status}): run again to resume.")
    run = run_paths(work, name)
    ids = work/'ids'; ids.mkdir(parents=True, exist_ok=True)
    if not (ids/f'{name}.npy').exists():
        table = CodeTable.load(run.codes); rep = table.report
        health = dict(name=name, seed=seed, align=align, seconds=round(time.perf_counter() - t0, 1),
                      used=[int(len(np.unique(table.codes[:, l]))) for l in range(table.codes.shape[1])],
                      distinct_before=int(round(len(table.codes) * (1 - rep['excess_rate_before']))), moved=int(rep['moved']))
        print('   ', health, flush=True)
        (ids/f'{name}.json').write_text(json.dumps(health))
        np.save(ids/f'{name}.npy', table.codes)
    return run.root


def cf_stage(a):
    "The first tokenizer run, kit-0, which learns the CF table (SASRec) on the way: work/kit-0/cf/cf.npy and cf_metrics.json."
    tokenizer_run(a, 'kit-0', 0, False)


def ids_stage(a):
    "Every scheme's codes as a file in work/ids (LETTER's index is read in place)."
    ids = Path(a.work)/'ids'; ids.mkdir(parents=True, exist_ok=True)
    letter = scheme_from_index_json(a.inter.with_name('Beauty.index.json'), n_items=read_inter_json(a.inter).n_items, sizes=256)
    for s in SEEDS:
        if not (ids/f'random-{s}.npy').exists(): np.save(ids/f'random-{s}.npy', random_like(letter, s).base)
    cf_stage(a)
    if not (ids/'rq-kmeans.npy').exists():
        np.save(ids/'rq-kmeans.npy', rqkmeans_scheme(np.load(run_paths(Path(a.work).absolute(), 'kit-0').cf/'cf.npy'), levels=4, k=256).base)
    for s in SEEDS:
        tokenizer_run(a, f'kit-{s}', s, False); tokenizer_run(a, f'kit-cf-{s}', s, True)


def spec(a, scheme):
    "The `load_scheme` spec of a scheme name."
    if scheme == 'letter': return str(a.inter.with_name('Beauty.index.json'))
    if scheme == 'items': return 'items'
    return str(Path(a.work)/'ids'/f"{scheme.replace(':', '-')}.npy")


def all_schemes():
    "Every scheme, in the order processes take them (baselines and the first seeds first)."
    return ['letter', 'random:0', 'kit:0', 'kit-cf:0', 'random:1', 'rq-kmeans', 'kit:1', 'kit-cf:1', 'random:2', 'kit:2', 'kit-cf:2', 'items']


def retriever_config(a):
    return dict(d_model=a.d_model, heads=4, ff=4 * a.d_model, history='items', epochs=a.epochs, patience=a.patience,
                valid_users=a.valid_users)


def claim(out):
    "Take scheme folder `out` for this process (an atomic mkdir), so that several processes share the schemes."
    try: (out/'.claimed').mkdir(parents=True); return True
    except FileExistsError: return False


def retrieval_stage(a):
    "One retriever per scheme, each in work/retrieval/<scheme>; processes take the schemes in turn, waiting for IDs still being trained."
    todo = a.schemes.split(',') if a.schemes else all_schemes()
    while todo:
        ready = [s for s in todo if s == 'items' or Path(spec(a, s)).exists()]
        if not ready: time.sleep(20); continue
        scheme = ready[0]; todo.remove(scheme)
        out = Path(a.work)/'retrieval'/scheme.replace(':', '-')
        if (out/'retrieval.json').exists() or not claim(out): continue
        print(f"--- {scheme}", flush=True)
        r = retrieval_run(a.inter, [spec(a, scheme)], out, retriever_config(a), progress=False)
        if r['status'] != 'done': sys.exit(f"retriever {scheme} stopped: {r['status']}; remove {out/'.claimed'} and run again to resume.")
        row = r['rows'][0]
        print(f"    {row['epochs']} epochs (best {row['best_epoch']}), train {row['train_s']:.0f} s (cpu {row['train_cpu_s']:.0f}), "
              f"test {row['test_s']:.0f} s: " + ', '.join(f"{m} {row[m]:.4f}" for m in METRICS), flush=True)


def rows_done(a):
    "The result row of every finished scheme, grouped as the report compares them."
    rows = []
    for scheme in all_schemes():
        f = Path(a.work)/'retrieval'/scheme.replace(':', '-')/'rows'/'00.json'
        if f.exists(): rows.append(dict(json.loads(f.read_text()), group=GROUPS[scheme.split(':')[0]], scheme=scheme))
    return rows


def verdicts(summ):
    "The issues' bars, on what is done."
    out, g = {}, lambda k: summ.get(GROUPS[k])
    lt, rnd, kit, kcf, init = g('letter'), g('random'), g('kit'), g('kit-cf'), g('rq-kmeans')
    if lt and rnd:
        out['letter_beats_random'] = {m: dict(letter=lt[m], random=rnd[m], spread=rnd[m + '_spread'], beats=lt[m] - rnd[m] > rnd[m + '_spread'])
                                      for m in ('recall@10', 'ndcg@10')}
    for name, k in (('kit_vs_letter', kit), ('kit_cf_vs_letter', kcf)):
        if lt and k: out[name] = dict(kit=k['recall@10'], letter=lt['recall@10'], reaches=k['recall@10'] >= lt['recall@10'])
    if kit and kcf:
        out['cf_vs_no_cf'] = {m: dict(cf=kcf[m], no_cf=kit[m], cf_spread=kcf[m + '_spread'], no_cf_spread=kit[m + '_spread'],
                                      at_least=kcf[m] >= kit[m]) for m in ('recall@10', 'ndcg@10')}
    for name, k in (('kit_vs_init', kit), ('kit_cf_vs_init', kcf)):
        if init and k: out[name] = {m: dict(trained=k[m], init=init[m]) for m in ('recall@10', 'ndcg@10')}
    return out


def report_stage(a):
    rows = rows_done(a)
    if not rows: return print('nothing done yet')
    print(results_table(rows))
    summ = {r['group']: r for r in summarise(rows)}
    rnd = summ.get(GROUPS['random'])
    if rnd:
        for gname, r in summ.items():
            print(f"{gname:36s} " + '  '.join(f"{m} x{r[m] / rnd[m]:.2f}" for m in METRICS if rnd[m] > 0))
    v = verdicts(summ)
    print(json.dumps(v, indent=1))
    cfm_path = run_paths(Path(a.work).absolute(), 'kit-0').cf/'cf_metrics.json'
    cfm = json.loads(cfm_path.read_text()) if cfm_path.exists() else None
    health = [json.loads(p.read_text()) for p in sorted((Path(a.work)/'ids').glob('kit*.json'))]
    meta = dict(data='beauty', retriever=retriever_config(a), cf=cfm and {k: cfm[k] for k in ('best_epoch', 'valid', 'test', 'config')},
                tokenizer=dict(levels=4, codebook_size=256, epochs=a.tok_epochs, cf_weight=a.cf_weight), tokenizers=health,
                uptime=subprocess.run(['uptime'], capture_output=True, text=True).stdout.strip(), verdicts=v)
    pairs = paired_table(rows) if all('ranks' in r for r in rows) and len(summ) > 1 else []  # schemes of separate runs pair on the same test users
    if pairs: print(paired_markdown(pairs))
    write_result(a.out, dict(meta=meta, summary=list(summ.values()), paired=pairs, results=[{k: v for k, v in r.items() if k != 'ranks'} for r in rows]))
    if a.report: write_retrieval_report(rows, a.report, {'command': run_command(), **meta})  # the report's retrieval.json says what made it too


def main():
    p = argparse.ArgumentParser(description=__doc__.split('\n')[0])
    add_data_flag(p)
    p.add_argument('--work', required=True, help='folder of the runs (outside the project); stages resume from it')
    p.add_argument('--device', default='auto', help="what trains the tokenizers and SASRec: auto (CUDA, else a TPU, else the CPU), cpu, cuda or xla")
    p.add_argument('--stage', default='all', choices=['all', 'cf', 'ids', 'retrieval', 'report'])
    p.add_argument('--schemes', default='', help=f"comma list for the retrieval stage (default: all of {','.join(all_schemes())})")
    p.add_argument('--threads', type=int, default=1)
    p.add_argument('--cf-dim', type=int, default=64); p.add_argument('--cf-max-len', type=int, default=20)
    p.add_argument('--cf-epochs', type=int, default=40)
    p.add_argument('--tok-epochs', type=int, default=50); p.add_argument('--cf-weight', type=float, default=0.01)
    p.add_argument('--d-model', type=int, default=64); p.add_argument('--epochs', type=int, default=8)
    p.add_argument('--patience', type=int, default=8, help='epochs without a better validation score before stopping (8 = the whole budget: early stopping on 2,000 users stopped random IDs at 4 epochs of 0.011 Recall@10 and at 10 of 0.024)'); p.add_argument('--valid-users', type=int, default=2000)
    p.add_argument('--out', default=str(RESULTS/'pipeline.json'))
    p.add_argument('--report', default='', help='also write the HTML/PNG report into this folder')
    a = p.parse_args()
    a.inter = beauty(a.data)/'Beauty.inter.json'
    torch.set_num_threads(a.threads)
    for s in (['cf', 'ids', 'retrieval', 'report'] if a.stage == 'all' else [a.stage]): globals()[f'{s}_stage'](a)


if __name__ == '__main__': main()
