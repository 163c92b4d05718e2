"""The decoder phase's step: encoding each batch again, against the codes the training loop keeps (`decoder_codes`).

  python bench/tokenizer/decoder_step.py                    # the default model on WordNet 20k, batch 1024, one thread
  python bench/tokenizer/decoder_step.py --rounds 5         # bench/results/decoder_step.json

In the decoder phase the encoder and codebooks are frozen, so `TokenizerTask.decoder_codes` encodes the catalog once
and each `decoder_step` gets its batch's codes; before, every step ran the encoder and the quantiser on its batch
first. Both are timed here on the same model (the default config, built and initialised on the catalog), the same
batches, interleaved (A, B, A, B), each step closed with its optimiser step; the first step of each is left out.
Each way trains its own copy of the model, so their losses, printed too, show that both fit the same codes (equal up to
the order of a sum). Prints a
table of medians and writes JSON.
"""
import argparse, copy, sys, time
from pathlib import Path
import numpy as np, torch
sys.path.insert(0, str(Path(__file__).resolve().parents[2]))  # the clone's root, for bench.common
from bench.common import RESULTS, wordnet, write_result
from letter8_tokenizer.config import Config
from letter8_tokenizer.model import build_tokenizer, encode
from letter8_tokenizer.train import init_codebooks, make_optimizer, decoder_step

def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument('--n', type=int, default=20000, help='WordNet synsets (the catalog is built in the cache root the first time; 0: all)')
    ap.add_argument('--catalog', default=None, help='a catalog folder with items.npy instead of WordNet')
    ap.add_argument('--batch', type=int, default=1024)
    ap.add_argument('--rounds', type=int, default=3, help='rounds of --steps steps of each way')
    ap.add_argument('--steps', type=int, default=5)
    ap.add_argument('--threads', type=int, default=1)
    ap.add_argument('--out', default=str(RESULTS/'decoder_step.json'))
    a = ap.parse_args()
    torch.set_num_threads(a.threads)
    items = wordnet(a.n, a.catalog)
    model = build_tokenizer(Config(), items); init_codebooks(model, items)
    a_model, b_model = model, copy.deepcopy(model)  # one copy per way, each with its own optimiser: their losses stay comparable
    a_opt, b_opt = make_optimizer(a_model), make_optimizer(b_model)
    x = np.asarray(items.emb, np.float32)
    rng = np.random.default_rng(0)
    batches = [np.sort(rng.choice(len(x), a.batch, replace=False)) for _ in range(a.steps)]
    codes = torch.as_tensor(encode(model, x))
    ways = {'encode each batch (before)': lambda r: decoder_step(a_model, a_opt, x[r]),
            'kept codes (decoder_codes)': lambda r: decoder_step(b_model, b_opt, x[r], codes=codes[r], latent_spread=1.0)}
    times, losses = {k: [] for k in ways}, {k: [] for k in ways}
    for k, f in ways.items(): f(batches[0])  # warm-up
    for _ in range(a.rounds):
        for k, f in ways.items():
            for r in batches:
                t = time.perf_counter(); out = f(r); times[k].append(time.perf_counter() - t); losses[k].append(out['recon'])
    base = np.median(times['encode each batch (before)'])
    print(f"\n{len(x):,} items x {x.shape[1]}, the default model, batch {a.batch}, {a.threads} thread(s), median of {a.rounds * a.steps} steps\n")
    print('| decoder step | median ms | speedup | mean recon |\n|---|---|---|---|')
    rows = []
    for k in ways:
        m = float(np.median(times[k])); rows.append(dict(way=k, median_s=m, speedup=base / m, mean_recon=float(np.mean(losses[k]))))
        print(f"| {k} | {m * 1000:.1f} | {base / m:.2f}x | {np.mean(losses[k]):.6f} |")
    write_result(a.out, dict(catalog=a.catalog or f'WordNet {a.n or "all"}', items=len(x), batch=a.batch, threads=a.threads, rows=rows))

if __name__ == '__main__': main()
