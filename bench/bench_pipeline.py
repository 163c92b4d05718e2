"""The whole LETTER pipeline on Amazon Beauty, inside the kit, judged by a generative retriever in one run.

Interactions -> SASRec CF embeddings (`cf_run`) -> the tokenizer on them, without and with LETTER's CF alignment
term (3 seeds each) -> collision-free code tables -> the retriever (`retrieval_run`), against LETTER's released
`Beauty.index.json`, random IDs of LETTER's shape (3 seeds), RQ-KMeans IDs of the same CF table (the tokenizer's
training-free init) and plain item IDs. Every scheme gets the same retriever, split and test users.

  python bench/bench_pipeline.py --work /tmp/beauty                  # every stage, resumable: run it again to go on
  python bench/bench_pipeline.py --work /tmp/beauty --stage retrieval --schemes letter,random:0   # some schemes
  python bench/bench_pipeline.py --work /tmp/beauty --stage report   # the table and verdicts of what is done

Stages write into --work (outside the project) and skip what is there, so schemes can be split over processes
(`--schemes`) and a killed run continues. The report prints the table (mean ± half the spread over seeds), each
group's ratio to random IDs, and the issues' verdicts; it writes bench/results/pipeline.json and an HTML report.
The data is read from ../shared/data/beauty, never copied into the project.
"""
import argparse, json, os, platform, subprocess, sys, time
from pathlib import Path
import numpy as np
import torch

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
from letter8_tokenizer.config import Config, override
from letter8_tokenizer.data import Items
from letter8_tokenizer.train import TokenizerTask
from letter8_tokenizer.loop import run_segment
from letter8_tokenizer.export import encode_run, code_table
from letter8_tokenizer.cf import cf_run
from letter8_tokenizer.retrieval import (scheme_from_index_json, random_like, rqkmeans_scheme, retrieval_run, summarise,
                                         results_table, write_retrieval_report, METRICS, paired_table, paired_markdown)
from letter8_tokenizer.sequences import read_inter_json

DATA = ROOT.parent/'shared'/'data'/'beauty'
SEEDS = (0, 1, 2)
GROUPS = {'letter': "LETTER's released IDs", 'random': 'random IDs (LETTER shape)', 'items': 'item ids',
          'rq-kmeans': 'RQ-KMeans of the CF table (init)', 'kit': 'kit IDs, no CF term', 'kit-cf': 'kit IDs, CF-aligned'}


def cf_stage(a):
    "SASRec on the training interactions: work/cf/cf.npy and cf_metrics.json."
    out = Path(a.work)/'cf'
    if (out/'cf.npy').exists(): return
    r = cf_run(Path(a.data)/'Beauty.inter.json', out, dict(dim=a.cf_dim, max_len=a.cf_max_len, epochs=a.cf_epochs, patience=5))
    if r.status != 'done': sys.exit(f"CF stopped: {r.status} {r.message}; run again to resume.")


def tokenizer_config(seed, cf_weight, epochs):
    "The kit's default tokenizer, 4 letters of 256 codes (LETTER's shape on Beauty)."
    return override(Config(), {'model.levels': 4, 'optim.epochs': epochs, 'seed': seed, 'loss.cf': cf_weight})


def tokenize(a, name, seed, align):
    "Train one tokenizer on the CF table; save its collision-free codes as work/ids/<name>.npy and its health."
    ids = Path(a.work)/'ids'; ids.mkdir(parents=True, exist_ok=True)
    if (ids/f'{name}.npy').exists(): return
    cf = Path(a.work)/'cf'/'cf.npy'
    items = Items(cf, cf=cf if align else None)
    t0 = time.perf_counter()
    task = TokenizerTask(tokenizer_config(seed, a.cf_weight if align else 0.0, a.tok_epochs), items, 'cpu')
    r = run_segment(task, Path(a.work)/'tok'/name, progress=False)
    if r.status != 'done': sys.exit(f"tokenizer {name} stopped: {r.status} {r.message}; run again to resume.")
    codes, _, last = encode_run(task.model.eval(), items, devices=None)
    table = code_table(task.model, codes, last)
    health = dict(name=name, seed=seed, align=align, seconds=round(time.perf_counter() - t0, 1),
                  used=[int(len(np.unique(codes[:, l]))) for l in range(codes.shape[1])],
                  distinct_before=int(len(np.unique(codes, axis=0))), moved=int((table.codes != codes).any(1).sum()))
    print('   ', health, flush=True)
    (ids/f'{name}.json').write_text(json.dumps(health))
    np.save(ids/f'{name}.npy', table.codes)


def ids_stage(a):
    "Every scheme's codes as a file in work/ids (LETTER's index is read in place)."
    ids = Path(a.work)/'ids'; ids.mkdir(parents=True, exist_ok=True)
    n = read_inter_json(Path(a.data)/'Beauty.inter.json').n_items
    letter = scheme_from_index_json(Path(a.data)/'Beauty.index.json', n_items=n, sizes=256)
    for s in SEEDS:
        if not (ids/f'random-{s}.npy').exists(): np.save(ids/f'random-{s}.npy', random_like(letter, s).base)
    if (Path(a.work)/'cf'/'cf.npy').exists():
        if not (ids/'rq-kmeans.npy').exists():
            np.save(ids/'rq-kmeans.npy', rqkmeans_scheme(np.load(Path(a.work)/'cf'/'cf.npy'), levels=4, k=256).base)
        for s in SEEDS:
            tokenize(a, f'kit-{s}', s, False); tokenize(a, f'kit-cf-{s}', s, True)


def spec(a, scheme):
    "The `load_scheme` spec of a scheme name."
    if scheme == 'letter': return str(Path(a.data)/'Beauty.index.json')
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
        r = retrieval_run(Path(a.data)/'Beauty.inter.json', [spec(a, scheme)], out, retriever_config(a), progress=False)
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
    cfm = json.loads((Path(a.work)/'cf'/'cf_metrics.json').read_text()) if (Path(a.work)/'cf'/'cf_metrics.json').exists() else None
    health = [json.loads(p.read_text()) for p in sorted((Path(a.work)/'ids').glob('kit*.json'))]
    meta = dict(data=str(a.data), retriever=retriever_config(a), cf=cfm and {k: cfm[k] for k in ('best_epoch', 'valid', 'test', 'config')},
                tokenizer=dict(levels=4, codebook_size=256, epochs=a.tok_epochs, cf_weight=a.cf_weight), tokenizers=health,
                threads=torch.get_num_threads(), python=platform.python_version(), torch=torch.__version__, cpus=os.cpu_count(),
                uptime=subprocess.run(['uptime'], capture_output=True, text=True).stdout.strip(), verdicts=v)
    pairs = paired_table(rows) if all('ranks' in r for r in rows) and len(summ) > 1 else []  # schemes of separate runs pair on the same test users
    if pairs: print(paired_markdown(pairs))
    out = Path(a.out); out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps(dict(meta=meta, summary=list(summ.values()), paired=pairs, results=[{k: v for k, v in r.items() if k != 'ranks'} for r in rows]), indent=1))
    if a.report: write_retrieval_report(rows, a.report, meta)
    print(f"wrote {out}")


def main():
    p = argparse.ArgumentParser(description=__doc__.split('\n')[0])
    p.add_argument('--data', default=str(DATA), help='folder with Beauty.inter.json and Beauty.index.json')
    p.add_argument('--work', required=True, help='run folder (outside the project); stages resume from it')
    p.add_argument('--stage', default='all', choices=['all', 'cf', 'ids', 'retrieval', 'report'])
    p.add_argument('--schemes', default='', help=f"comma list for the retrieval stage (default: all of {','.join(all_schemes())})")
    p.add_argument('--threads', type=int, default=1)
    p.add_argument('--cf-dim', type=int, default=64); p.add_argument('--cf-max-len', type=int, default=20)
    p.add_argument('--cf-epochs', type=int, default=40)
    p.add_argument('--tok-epochs', type=int, default=50); p.add_argument('--cf-weight', type=float, default=0.01)
    p.add_argument('--d-model', type=int, default=64); p.add_argument('--epochs', type=int, default=8)
    p.add_argument('--patience', type=int, default=8, help='epochs without a better validation score before stopping (8 = the whole budget: early stopping on 2,000 users stopped random IDs at 4 epochs of 0.011 Recall@10 and at 10 of 0.024)'); p.add_argument('--valid-users', type=int, default=2000)
    p.add_argument('--out', default=str(ROOT/'bench'/'results'/'pipeline.json'))
    p.add_argument('--report', default='', help='also write the HTML/PNG report into this folder')
    a = p.parse_args()
    torch.set_num_threads(a.threads)
    stages = ['cf', 'ids', 'retrieval', 'report'] if a.stage == 'all' else [a.stage]
    for s in stages: globals()[f'{s}_stage'](a)


if __name__ == '__main__': main()
