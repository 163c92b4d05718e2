"""Score a finished run on every item of its catalog: `learning_health(sample=None)` of its latest checkpoint.

  python bench/score_run.py RUN_DIR --catalog /work/cache/wordnet-20k --set '{"model.precision": "bfloat16"}' \
      --out bench/results/rescore.json
  python bench/score_run.py RUN_DIR --catalog DIR/inputs --report /tmp/probe --out rescore.json  # and the probe report

`learning_health`'s default checks a sample of 5,000 items, whose probes on 1,000 test items cannot tell apart
differences of about 0.01-0.02. Here every item the run trained on is checked (the run's `data.holdout` rows are
scored apart, as unseen items), the init is fit on the same rows as the run's, each probe tests every item once
(5-fold), and the trained codes' probe gaps to the init's come with their paired standard errors. Pass the same
config overrides the run had (`--set`); the checkpoint holds the weights, not the config. Prints the verdict and a
table; writes JSON. With --report DIR it also writes the probe report the export would write for this run (`probe`
with `probe_inputs`: the tokenizer's latents, codebooks and decoder; probes against three inits' mean) and records
its verdict beside `learning_health`'s: the report judges the IDs, `learning_health` the tokenizer (probe page).
"""
import argparse, json, platform, shlex, time
from pathlib import Path
import torch
from letter8_tokenizer.config import Config, override
from letter8_tokenizer.data import Items
from letter8_tokenizer.probe import learning_health
from bench_early_stop import trained_model, table  # the same loading and the same table as the early-stop bench

def probe_report(model, items, catalog:Path, folder:str):
    "The export's probe report of `model` on `items`, written to `folder`."
    from letter8_tokenizer.export import encode_run, probe_inputs
    from letter8_tokenizer.probe import probe, write_report
    codes, z, _ = encode_run(model, items)
    names = catalog/'label_names.json'
    rep = probe(codes, items.emb, labels=items.labels, label_names=json.loads(names.read_text())['levels'] if names.exists() else None, **probe_inputs(model, z))
    write_report(rep, folder, title=f'probe: {catalog.name}')
    return rep

def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument('run', help='the run folder (checkpoint directory)')
    ap.add_argument('--catalog', required=True, help='folder with items.npy and labels.npy (a wordnet_catalog)')
    ap.add_argument('--set', default='{}', help="JSON of the run's dotted config overrides")
    ap.add_argument('--threads', type=int, default=1)
    ap.add_argument('--report', default=None, help='also write the probe report (probe.html, probe.json) to this folder')
    ap.add_argument('--out', required=True)
    a = ap.parse_args()
    torch.set_num_threads(a.threads)
    cat = Path(a.catalog); items = Items(cat/'items.npy', labels=cat/'labels.npy')
    model, st = trained_model(override(Config(), json.loads(a.set)), items, a.run)
    t = time.perf_counter(); h = learning_health(model, items, sample=None); secs = time.perf_counter() - t
    print(f"{a.run}: epoch {st.get('epoch')}, {h.numbers['items']:,} items checked; {h.verdict}: {h}")
    table(h.numbers)
    out = dict(command='python bench/score_run.py ' + shlex.join([a.run, '--catalog', a.catalog, '--set', a.set, '--threads', str(a.threads)]
                                                                 + (['--report', a.report] if a.report else [])),
               run=str(Path(a.run).resolve()), catalog=str(cat), config_overrides=json.loads(a.set), epoch=st.get('epoch'),
               threads=a.threads, platform=platform.platform(), torch=torch.__version__, health_s=secs, health=h.to_dict())
    if a.report:
        t = time.perf_counter(); rep = probe_report(model, items, cat, a.report)
        out['report'] = dict(seconds=time.perf_counter() - t, verdict=rep.verdict, headline=rep.headline(), init=rep.meta['init'], comparison=rep.comparison)
        print(f"\nprobe report ({a.report}/probe.html): {rep.headline()}")
    Path(a.out).parent.mkdir(parents=True, exist_ok=True); Path(a.out).write_text(json.dumps(out, indent=1, default=float))
    print(f'\nwrote {a.out}')

if __name__ == '__main__': main()
