"""Score a finished run on every item of its catalog: `learning_health(sample=None)` of its latest checkpoint.

  python bench/score_run.py RUN_DIR --catalog /work/cache/wordnet-20k --set '{"model.precision": "bfloat16"}' \
      --out bench/results/rescore.json

`learning_health`'s default checks a sample of 5,000 items, whose probes on 1,000 test items cannot tell apart
differences of about 0.01-0.02. Here every item the run trained on is checked (the run's `data.holdout` rows are
scored apart, as unseen items), the init is fit on the same rows as the run's, each probe tests every item once
(5-fold), and the trained codes' probe gaps to the init's come with their paired standard errors. Pass the same
config overrides the run had (`--set`); the checkpoint holds the weights, not the config. Prints the verdict and a
table; writes JSON.
"""
import argparse, json, platform, shlex, time
from pathlib import Path
import torch
from letter8_tokenizer.config import Config, override
from letter8_tokenizer.data import Items
from letter8_tokenizer.model import learning_health
from bench_early_stop import trained_model, table  # the same loading and the same table as the early-stop bench

def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument('run', help='the run folder (checkpoint directory)')
    ap.add_argument('--catalog', required=True, help='folder with items.npy and labels.npy (a wordnet_catalog)')
    ap.add_argument('--set', default='{}', help="JSON of the run's dotted config overrides")
    ap.add_argument('--threads', type=int, default=1)
    ap.add_argument('--out', required=True)
    a = ap.parse_args()
    torch.set_num_threads(a.threads)
    cat = Path(a.catalog); items = Items(cat/'items.npy', labels=cat/'labels.npy')
    model, st = trained_model(override(Config(), json.loads(a.set)), items, a.run)
    t = time.perf_counter(); h = learning_health(model, items, sample=None); secs = time.perf_counter() - t
    print(f"{a.run}: epoch {st.get('epoch')}, {h.numbers['items']:,} items checked; {h.verdict}: {h}")
    table(h.numbers)
    out = dict(command='python bench/score_run.py ' + shlex.join([a.run, '--catalog', a.catalog, '--set', a.set, '--threads', str(a.threads)]),
               run=str(Path(a.run).resolve()), catalog=str(cat), config_overrides=json.loads(a.set), epoch=st.get('epoch'),
               threads=a.threads, platform=platform.platform(), torch=torch.__version__, health_s=secs, health=h.to_dict())
    Path(a.out).parent.mkdir(parents=True, exist_ok=True); Path(a.out).write_text(json.dumps(out, indent=1, default=float))
    print(f'\nwrote {a.out}')

if __name__ == '__main__': main()
