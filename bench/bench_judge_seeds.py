"""Do the kit's IDs beat RQ-KMeans of the same CF table? Three seeds of each, at the length chosen on validation users.

One SASRec CF table of Amazon Beauty (`bench_judge_beauty.cf_stage`); then, for each seed s, the default tokenizer
(CF-aligned, seed s) and RQ-KMeans (seed s) of that table, both cut to the same number of letters, and one
`retrieval_run` (the small judge, fixed epochs, retriever seed s, every test user) over the two. The letters come from
the length `bench_judge_beauty.py` recommended on the validation users (`length.letters` in judge_beauty.json), never
from the test users. The paired table pools the seeds: each test user's score is averaged over the three runs of a
scheme, then the two schemes are paired over users.

  python bench/bench_judge_seeds.py --work /tmp/judge-seeds --threads 2     # resumable: run it again to go on

Variants of the tokenizer are chosen on the validation users the same way: `--variants 'loss.cf=0.1;loss.cf=1'` trains
one more tokenizer per variant (dotted config keys, `;` between variants) and scores its first letters beside the
others; `--also DIR` pairs them with the rows of an earlier run of this script (same seeds, same validation users) and
`--schemes` drops the schemes that run already scored. `--schemes letter` scores LETTER's released IDs
(Beauty.index.json) cut to the same letters, e.g. beside an earlier run's with `--also`.

Writes bench/results/judge_seeds_beauty.json (per-seed rows without ranks, per-seed and pooled paired tables, the command).
"""
import argparse, json, os, platform, shlex, sys, time
from argparse import Namespace
from dataclasses import asdict
from pathlib import Path
import numpy as np
import torch

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT)); sys.path.insert(0, str(ROOT/'bench'))
from bench_judge_beauty import DATA, cf_stage, kit_stage
from letter8_tokenizer.config import Config, override
from letter8_tokenizer.retrieval import (rqkmeans_scheme, scheme_from_index_json, retrieval_run, paired_table, paired_markdown, retriever_config, judge_note, summarise,
                                         report_rows)


def as_value(text:str):
    "A number, true/false/null as JSON reads them; anything else as the text."
    try: return json.loads(text)
    except ValueError: return text


def parse_variant(text:str) -> dict:
    "'loss.cf=0.1,loss.cf_temperature=0.2' as config overrides (numbers as numbers)."
    out = {}
    for part in filter(None, (t.strip() for t in text.split(','))):
        k, _, v = part.partition('=')
        if not _ or not k: sys.exit(f"--variants {text!r}: {part!r} is not KEY=VALUE (e.g. loss.cf=0.1).")
        out[k.strip()] = as_value(v.strip())
    return out


def kit_prefix(a, cf:Path, work:Path, seed:int, letters:int, variant:str='') -> Path:
    "The first `letters` letters of the tokenizer's IDs (default config, or with `variant`'s overrides) as a .npy named for its group."
    name = f'kit({variant})' if variant else 'kit'
    kit = kit_stage(Namespace(work=str(work/name if variant else work), seed=seed, tok_epochs=a.tok_epochs, tok_set=parse_variant(variant)), cf)
    out = work/'ids'/f'{name}[:{letters}].npy'
    if not out.exists(): out.parent.mkdir(parents=True, exist_ok=True); np.save(out, np.load(kit)[:, :letters])
    return out


def schemes(a, cf:Path, seed:int, letters:int) -> list[str]:
    "The schemes of one seed, all of `letters` letters: the kit's IDs, each variant's, RQ-KMeans', LETTER's released IDs (.npy files whose stems name the groups)."
    work, keep = Path(a.work)/f'seed{seed}', a.schemes.split(',')
    out = [kit_prefix(a, cf, work, seed, letters)] if 'kit' in keep else []
    out += [kit_prefix(a, cf, work, seed, letters, v) for v in filter(None, a.variants.split(';'))]
    if 'rq-kmeans' in keep:
        out.append(rq := work/'ids'/f'rq-kmeans[:{letters}].npy')
        if not rq.exists(): np.save(rq, rqkmeans_scheme(np.load(cf), levels=letters, k=256, seed=seed).base)
    if 'letter' in keep:
        out.append(lt := work/'ids'/f'letter[:{letters}].npy')
        if not lt.exists(): lt.parent.mkdir(parents=True, exist_ok=True); np.save(lt, scheme_from_index_json(Path(a.data)/'Beauty.index.json').base[:, :letters])
    return [str(p) for p in out]


def check_args(a):
    "Every flag checked before anything trains or is written: a clear exit naming the flag and the fix."
    bad = [x for x in a.schemes.split(',') if x not in ('', 'kit', 'rq-kmeans', 'letter')]
    if bad: sys.exit(f"--schemes {a.schemes!r}: {bad[0]!r} is not 'kit', 'rq-kmeans' or 'letter'; give a comma list of those, or ''.")
    if not all(x.strip().isdigit() for x in a.seeds.split(',')): sys.exit(f"--seeds {a.seeds!r}: give a comma list of whole numbers, e.g. 0,1,2.")
    if a.letters is not None and not 1 <= a.letters <= 8: sys.exit(f"--letters {a.letters}: the default tokenizer has 8 letters; give 1 to 8.")
    if a.cf and not Path(a.cf).is_file(): sys.exit(f"--cf {a.cf}: no such file; give a CF table (.npy) or leave --cf out to learn one.")
    if a.cf and not Path(a.cf).with_name('counts.npy').is_file():
        sys.exit(f"--cf {a.cf}: no counts.npy beside it (each item's training interactions, which cf_run writes); run cf_run on its folder again, or leave --cf out.")
    if a.also and not (Path(a.also)/f"seed{a.seeds.split(',')[0].strip()}"/'retrieval'/'retrieval.json').is_file():
        sys.exit(f"--also {a.also}: no finished run of this script for these seeds there; give the --work of one.")
    for v in filter(None, a.variants.split(';')):
        try: override(Config(), parse_variant(v))
        except (ValueError, KeyError, TypeError) as e: sys.exit(f"--variants {v!r}: {e}")
    if not a.schemes and not a.variants: sys.exit("--schemes '' and no --variants: nothing to score; list 'kit,rq-kmeans' or give --variants.")
    if 'letter' in a.schemes.split(',') and not (Path(a.data)/'Beauty.index.json').is_file(): sys.exit(f"--schemes letter: no Beauty.index.json in --data {a.data}.")


def main():
    p = argparse.ArgumentParser(description=__doc__.split('\n')[0])
    p.add_argument('--data', default=str(DATA), help='folder with Beauty.inter.json')
    p.add_argument('--work', required=True, help='run folder (outside the project); every stage resumes from it')
    p.add_argument('--threads', type=int, default=1)
    p.add_argument('--seeds', default='0,1,2')
    p.add_argument('--letters', type=int, default=None, help="ID length; unset: the one judge_beauty.json recommends on validation users")
    p.add_argument('--cf-dim', type=int, default=64); p.add_argument('--cf-epochs', type=int, default=40)
    p.add_argument('--tok-epochs', type=int, default=50, help="the tokenizer's steps, in passes over the catalog (with popularity draws, fewer, longer epochs)")
    p.add_argument('--cf', default=None, help='an existing CF table (.npy) to use; unset: learn one in --work')
    p.add_argument('--schemes', default='kit,rq-kmeans', help="which of 'kit', 'rq-kmeans' and 'letter' (LETTER's released IDs, cut the same) to score ('' with --also)")
    p.add_argument('--variants', default='', help="tokenizer variants, ';' between them, e.g. 'loss.cf=0.1;loss.cf=1'")
    p.add_argument('--also', default=None, help='an earlier --work of this script whose rows (same seeds) are paired with these')
    p.add_argument('--epochs', type=int, default=8, help="the retriever's epochs, all of them (patience = epochs)")
    p.add_argument('--out', default=str(ROOT/'bench'/'results'/'judge_seeds_beauty.json'))
    a = p.parse_args()
    check_args(a)
    torch.set_num_threads(a.threads)
    t0 = time.time()
    letters = a.letters or json.loads((ROOT/'bench'/'results'/'judge_beauty.json').read_text())['length']['letters']
    cf = Path(a.cf) if a.cf else cf_stage(Namespace(work=a.work, data=a.data, cf_dim=a.cf_dim, cf_epochs=a.cf_epochs))
    rows, per_seed = [], {}
    for seed in map(int, a.seeds.split(',')):
        config = dict(epochs=a.epochs, patience=a.epochs, seed=seed, d_model=64, ff=256, history='items')
        r = retrieval_run(Path(a.data)/'Beauty.inter.json', schemes(a, cf, seed, letters), Path(a.work)/f'seed{seed}'/'retrieval', config, progress=False)
        if r['status'] != 'done': sys.exit(f"retrieval (seed {seed}) stopped: {r['status']}; run again to resume.")
        seed_rows = r['rows'] + (report_rows(Path(a.also)/f'seed{seed}'/'retrieval') if a.also else [])
        per_seed[seed] = dict(test=paired_table(seed_rows), valid=paired_table(seed_rows, 'valid'))
        print(f"seed {seed}, validation users:\n" + paired_markdown(per_seed[seed]['valid']), flush=True)
        rows += seed_rows
    pooled = paired_table(rows)
    print(f"\n{len(per_seed)} seeds pooled (per-user scores averaged over seeds, then paired):\n" + paired_markdown(pooled))
    meta = dict(command='python bench/bench_judge_seeds.py ' + shlex.join(sys.argv[1:]), data=str(a.data), seeds=list(per_seed), letters=letters,
                variants=[v for v in a.variants.split(';') if v], also=a.also,
                letters_from='judge_beauty.json length (chosen on validation users)' if not a.letters else '--letters',
                retriever=asdict(retriever_config(config)) | {'seed': 'per run'}, judge=judge_note('small'),
                tokenizer=dict(config='default (8 x 256, CF-aligned), cut to the first letters', epochs=a.tok_epochs),
                threads=a.threads, python=platform.python_version(), torch=torch.__version__, cpus=os.cpu_count(), retriever_s=round(sum(r['train_s'] + r['test_s'] for r in rows)),
                seconds_this_call=round(time.time() - t0))  # a call that finds every stage done takes seconds
    out = dict(meta=meta, pooled=pooled, per_seed=per_seed, summary=summarise(rows),
               results=[{k: v for k, v in row.items() if k not in ('ranks', 'history')} for row in rows])
    Path(a.out).write_text(json.dumps(out, indent=1, default=str))
    print(f"wrote {a.out}")


if __name__ == '__main__': main()
