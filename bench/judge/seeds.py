"""Do the kit's IDs beat RQ-KMeans of the same CF table? Three seeds of each, at the length chosen on validation users.

One SASRec CF table of Amazon Beauty; then, for each seed s, a run of the library's stages (`stages.run_stages`, to its
export: the default tokenizer, seed s, on the CF table, `items_path="cf"`) and RQ-KMeans (`ids.rqkmeans_scheme`, seed s)
of that table, both cut to the same number of letters, and one `judge.retrieval_run` (the small judge, fixed epochs,
retriever seed s, every test user) over the two. The CF table is --cf, else the one the first run learns
(`cf_path="sasrec"`), which every later run reads (<folder>/cf_table.txt names it). The letters come from the length `bench/judge/beauty.py`
recommended on the validation users (`length.letters` in judge_beauty.json), never from the test users. The paired
table pools the seeds: each test user's score is averaged over the three runs of a scheme, then the two schemes are
paired over users.

  python bench/judge/seeds.py --work <folder> --threads 2     # resumable: run it again to go on

Variants of the tokenizer are chosen on the validation users the same way: `--variants 'loss.cf=0.1;loss.cf=1'` trains
one more tokenizer per variant (dotted config keys, `;` between variants) and scores its first letters beside the
others; `--also DIR` pairs them with the rows of an earlier run of this script (same seeds, same validation users) and
`--schemes` drops the schemes that run already scored. `--schemes letter` scores LETTER's released IDs
(Beauty.index.json) cut to the same letters, e.g. beside an earlier run's with `--also`.

Each tokenizer run is a normal run folder, <folder>/kit-s<seed> (a variant's kit-v<i>-s<seed>), with its parameters in
<folder>/<run>.parameters.yaml for `letter8 run --params`. Writes bench/results/judge_seeds_beauty.json (per-seed rows
without ranks, per-seed and pooled paired tables, the runs' parameters).
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
from letter8_tokenizer.ids import rqkmeans_scheme, scheme_from_index_json
from letter8_tokenizer.retriever import retriever_config
from letter8_tokenizer.judge import retrieval_run, paired_table, paired_markdown, judge_note, summarise, report_rows

MONTH_S = 30 * 86400.  # the session length the bench's stages run under: no deadline, one process to the end

def parse_variant(text:str) -> dict:
    "'loss.cf=0.1,loss.cf_temperature=0.2' as config overrides (numbers, true/false/null as JSON reads them)."
    out = {}
    for part in filter(None, (t.strip() for t in text.split(','))):
        k, eq, v = part.partition('=')
        if not eq or not k: sys.exit(f"--variants {text!r}: {part!r} is not KEY=VALUE (e.g. loss.cf=0.1).")
        try: out[k.strip()] = json.loads(v.strip())
        except ValueError: out[k.strip()] = v.strip()
    return out

def steps_as_epochs(inter:Path, epochs:int, popularity:float) -> int:
    "Epochs with popularity draws that take the steps of `epochs` passes over the catalog (each item once)."
    counts = train_counts(leave_one_out(read_interactions(inter)))
    return epochs if not popularity else max(1, round(epochs * len(counts) / popularity_draws(counts, popularity).sum()))

def tokenizer_run(a, name:str, seed:int, tok_set:dict) -> Path:
    "Run `name` through the library's stages to its export (the CF table learned by the first run, or --cf); its code table."
    work = Path(a.work).absolute(); work.mkdir(parents=True, exist_ok=True)
    cf = a.cf or 'sasrec'
    tok_set = {**json.loads(a.set), **tok_set}
    epochs = steps_as_epochs(a.inter, a.tok_epochs, override(Config(), tok_set).data.popularity)
    params = dict(experiment=name, work_dir=str(work), items_path='cf', cf_path=cf, interactions_path=str(a.inter),
                  cf_overrides=json.dumps(dict(dim=a.cf_dim, max_len=20, epochs=a.cf_epochs, patience=5)),
                  config_path=str(save_config(Config(), work/'config.json')), overrides=json.dumps({'optim.epochs': epochs, 'seed': seed, **tok_set}),
                  device=a.device, session_limit_s=MONTH_S)
    (work/f'{name}.parameters.yaml').write_text(yaml.safe_dump(params, sort_keys=False))
    for r in run_stages(params).values():
        if not r.done: sys.exit(f"{name}: stage {r.stage} stopped ({r.status}): run the same command again to resume.")
    a.params[name] = {k: v for k, v in params.items() if k not in ('work_dir', 'interactions_path', 'config_path')}
    if cf == 'sasrec':  # the first run learned the CF table: every later run, and RQ-KMeans, read it
        a.cf = str(run_paths(work, name).cf/'cf.npy'); (work/'cf_table.txt').write_text(a.cf)
    return run_paths(work, name).codes

def kit_prefix(a, seed:int, letters:int, variant:int=0) -> Path:
    "The first `letters` letters of the tokenizer's IDs (default config, or variant number `variant`) as a .npy named for its group."
    text = a.variants.split(';')[variant - 1] if variant else ''
    codes = tokenizer_run(a, f'kit-v{variant}-s{seed}' if variant else f'kit-s{seed}', seed, parse_variant(text))
    out = Path(a.work)/f'seed{seed}'/'ids'/f"{f'kit({text})' if variant else 'kit'}[:{letters}].npy"
    if not out.exists(): out.parent.mkdir(parents=True, exist_ok=True); np.save(out, CodeTable.load(codes).codes[:, :letters])
    return out

def schemes(a, seed:int, letters:int) -> list[str]:
    "The schemes of one seed, all of `letters` letters: the kit's IDs, each variant's, RQ-KMeans', LETTER's released IDs (.npy files whose stems name the groups)."
    ids, keep = Path(a.work)/f'seed{seed}'/'ids', a.schemes.split(',')
    out = [kit_prefix(a, seed, letters)] if 'kit' in keep else []
    out += [kit_prefix(a, seed, letters, i) for i, v in enumerate(a.variants.split(';'), 1) if v]
    ids.mkdir(parents=True, exist_ok=True)
    if 'rq-kmeans' in keep:
        out.append(rq := ids/f'rq-kmeans[:{letters}].npy')
        k = override(Config(), json.loads(a.set)).model.codebook_size
        if not rq.exists(): np.save(rq, rqkmeans_scheme(np.load(a.cf), levels=letters, k=k, seed=seed).base)
    if 'letter' in keep:
        out.append(lt := ids/f'letter[:{letters}].npy')
        if not lt.exists(): np.save(lt, scheme_from_index_json(a.inter.with_name('Beauty.index.json')).base[:, :letters])
    return [str(p) for p in out]

def check_args(a):
    "Every flag checked before anything trains or is written: a clear exit naming the flag and the fix."
    keep = a.schemes.split(',')
    bad = [x for x in keep if x not in ('', 'kit', 'rq-kmeans', 'letter')]
    if bad: sys.exit(f"--schemes {a.schemes!r}: {bad[0]!r} is not 'kit', 'rq-kmeans' or 'letter'; give a comma list of those, or ''.")
    if not all(x.strip().isdigit() for x in a.seeds.split(',')): sys.exit(f"--seeds {a.seeds!r}: give a comma list of whole numbers, e.g. 0,1,2.")
    if a.letters is not None and not 1 <= a.letters <= 8: sys.exit(f"--letters {a.letters}: the default tokenizer has 8 letters; give 1 to 8.")
    if a.cf and not Path(a.cf).is_file(): sys.exit(f"--cf {a.cf}: no such file; give a CF table (.npy) or leave --cf out to learn one.")
    if 'rq-kmeans' in keep and not a.cf and 'kit' not in keep and not a.variants:
        sys.exit("--schemes rq-kmeans without a tokenizer run to learn the CF table: give --cf, or score 'kit' too.")
    if a.also and not (Path(a.also)/f"seed{a.seeds.split(',')[0].strip()}"/'retrieval'/'retrieval.json').is_file():
        sys.exit(f"--also {a.also}: no finished run of this script for these seeds there; give the --work of one.")
    try: override(Config(), json.loads(a.set))
    except (ValueError, KeyError, TypeError) as e: sys.exit(f"--set {a.set!r}: {e}")
    for v in filter(None, a.variants.split(';')):
        try: override(Config(), parse_variant(v))
        except (ValueError, KeyError, TypeError) as e: sys.exit(f"--variants {v!r}: {e}")
    if not a.schemes and not a.variants: sys.exit("--schemes '' and no --variants: nothing to score; list 'kit,rq-kmeans' or give --variants.")
    if 'letter' in keep and not a.inter.with_name('Beauty.index.json').is_file(): sys.exit(f"--schemes letter: no Beauty.index.json beside {a.inter}.")

def parse():
    p = argparse.ArgumentParser(description=__doc__.split('\n')[0])
    add_data_flag(p)
    p.add_argument('--work', required=True, help='folder of the runs (outside the project); every stage resumes from it')
    p.add_argument('--threads', type=int, default=1)
    p.add_argument('--device', default='auto', help="what trains: auto (CUDA, else a TPU, else the CPU), cpu, cuda or xla")
    p.add_argument('--seeds', default='0,1,2')
    p.add_argument('--letters', type=int, default=None, help="ID length; unset: the one judge_beauty.json recommends on validation users")
    p.add_argument('--cf-dim', type=int, default=64); p.add_argument('--cf-epochs', type=int, default=40)
    p.add_argument('--tok-epochs', type=int, default=50, help="the tokenizer's steps, in passes over the catalog (with popularity draws, fewer, longer epochs)")
    p.add_argument('--set', default='{}', help="JSON of dotted config overrides for every tokenizer (default: the default config)")
    p.add_argument('--cf', default=None, help='an existing CF table (.npy) to use; unset: the first run learns one')
    p.add_argument('--schemes', default='kit,rq-kmeans', help="which of 'kit', 'rq-kmeans' and 'letter' (LETTER's released IDs, cut the same) to score ('' with --also)")
    p.add_argument('--variants', default='', help="tokenizer variants, ';' between them, e.g. 'loss.cf=0.1;loss.cf=1'")
    p.add_argument('--also', default=None, help='an earlier --work of this script whose rows (same seeds) are paired with these')
    p.add_argument('--epochs', type=int, default=8, help="the retriever's epochs, all of them (patience = epochs)")
    p.add_argument('--out', default=str(RESULTS/'judge_seeds_beauty.json'))
    a = p.parse_args()
    a.inter, a.params, table = beauty(a.data)/'Beauty.inter.json', {}, Path(a.work)/'cf_table.txt'
    check_args(a)
    if not a.cf and table.is_file(): a.cf = table.read_text().strip()  # learned by an earlier call's first run
    return a

def main():
    a = parse()
    torch.set_num_threads(a.threads)
    t0 = time.time()
    letters = a.letters or json.loads((RESULTS/'judge_beauty.json').read_text())['length']['letters']
    rows, per_seed = [], {}
    for seed in map(int, a.seeds.split(',')):
        config = dict(epochs=a.epochs, patience=a.epochs, seed=seed, d_model=64, ff=256, history='items')
        r = retrieval_run(a.inter, schemes(a, seed, letters), Path(a.work)/f'seed{seed}'/'retrieval', config, progress=False)
        if r['status'] != 'done': sys.exit(f"retrieval (seed {seed}) stopped: {r['status']}; run again to resume.")
        seed_rows = r['rows'] + (report_rows(Path(a.also)/f'seed{seed}'/'retrieval') if a.also else [])
        per_seed[seed] = dict(test=paired_table(seed_rows), valid=paired_table(seed_rows, 'valid'))
        print(f"seed {seed}, validation users:\n" + paired_markdown(per_seed[seed]['valid']), flush=True)
        rows += seed_rows
    pooled = paired_table(rows)
    print(f"\n{len(per_seed)} seeds pooled (per-user scores averaged over seeds, then paired):\n" + paired_markdown(pooled))
    meta = dict(data='beauty', seeds=list(per_seed), letters=letters, variants=[v for v in a.variants.split(';') if v], also=a.also,
                letters_from='judge_beauty.json length (chosen on validation users)' if not a.letters else '--letters',
                retriever=asdict(retriever_config(config)) | {'seed': 'per run'}, judge=judge_note('small'),
                tokenizer=dict(config="default (8 x 256), on the CF table (items_path 'cf'), cut to the first letters", epochs=a.tok_epochs),
                runs=a.params, threads=a.threads, retriever_s=round(sum(r['train_s'] + r['test_s'] for r in rows)),
                seconds_this_call=round(time.time() - t0))  # a call that finds every stage done takes seconds
    write_result(a.out, dict(meta=meta, pooled=pooled, per_seed=per_seed, summary=summarise(rows),
                             results=[{k: v for k, v in row.items() if k not in ('ranks', 'history')} for row in rows]))

if __name__ == '__main__': main()
