"""The tokenizer learns on real embeddings: on a WordNet subset, trained with a codebook refit after every epoch, its
codes rebuild the items better than the training-free init (`residual_init` on the embeddings) and far better than
random codes, probe at least as well as the init, and use their codebooks; margins do not depend on thread count or
float rounding. Issue 13's full bars (20k items, 8 x 256) are measured by bench/learning/train_wordnet.py."""
import copy, os
import numpy as np, pytest, torch
from pathlib import Path
from conftest import require_system
from letter8_tokenizer.config import Config, override
from letter8_tokenizer.text import WORDNET_NOUNS, WORDNET_PACKAGE, wordnet_catalog
from letter8_tokenizer.kmeans import residual_init
from letter8_tokenizer.probe import shuffle_codes
from letter8_tokenizer.health import code_metrics, probe_gaps, learning_health
from letter8_tokenizer.model import build_tokenizer, refresh_groups, encode, decode
from letter8_tokenizer.train import init_codebooks, make_optimizer, train_step, refit_codebooks, decoder_step

N, LEVELS, K, EPOCHS = 4000, 8, 32, 20
SMALL = {'model.levels': LEVELS, 'model.codebook_size': K, 'model.hidden': [256], 'optim.batch_size': 256, 'optim.epochs': EPOCHS}  # the default loss, loss.first_letter included

@pytest.fixture(scope='module')
def catalog():
    require_system(WORDNET_NOUNS, WORDNET_PACKAGE)
    cache = Path(os.environ.get('LETTER8_TEST_CACHE', Path.home()/'.cache'/'letter8'))  # built once (a minute or two), then reused
    return wordnet_catalog(cache/f'wordnet-{N}', n_items=N, seed=0, progress=False)

def fit(items, overrides=None, scale=1.0, refit=True):
    cfg = override(Config(), {**SMALL, **(overrides or {})})
    x = np.asarray(items.emb, np.float32) * np.float32(scale)
    class Rows:
        emb = x
        def __len__(self): return len(x)
        def take(self, r): return type('B', (), dict(emb=x[r]))()
    torch.manual_seed(0)
    model = build_tokenizer(cfg, items); init_codebooks(model, Rows()); opt = make_optimizer(model)
    rng, hist = np.random.default_rng(0), []
    for ep in range(EPOCHS):
        if ep: refresh_groups(model)
        perm = rng.permutation(len(x))
        hist += [train_step(model, opt, x[perm[i:i + 256]]) for i in range(0, len(x), 256)]
        if refit: hist[-1]['refit'] = refit_codebooks(model, Rows())
    return model, x, hist

def score(catalog, refit=True):
    "Train on `catalog` and score the trained codes, the init's and random codes with `code_metrics`."
    model, x, hist = fit(catalog, refit=refit)
    labels = np.asarray(catalog.labels)
    codes = encode(model, x)
    init = residual_init(x, levels=LEVELS, k=K, seed=0)
    init_mse = float(((init.decode() - x) ** 2).mean())
    rand = shuffle_codes(codes, 0)
    return dict(model=model, x=x, hist=hist, labels=labels, gap=probe_gaps(codes, init.codes, labels),
                trained=code_metrics(codes, x, [K] * LEVELS, labels, float(((decode(model, codes) - x) ** 2).mean())),
                init=code_metrics(init.codes, x, [K] * LEVELS, labels, init_mse),
                random=code_metrics(rand, x, [K] * LEVELS, labels, float(((decode(model, rand) - x) ** 2).mean())))

@pytest.fixture(scope='module')
def trained(catalog):
    d = score(catalog)
    for k in ('trained', 'init', 'random'): print(k, {m: round(v, 5) for m, v in d[k].items()})  # shown with pytest -s
    print('gap', {p: (round(g['delta'], 4), round(g['se'], 4)) for p, g in d['gap'].items()})
    return d

def test_no_collapse_during_training(trained):
    "The guard's signals stay healthy: latents keep their spread, the items are rebuilt far better than by their mean; they stay out of 'total'."
    last = trained['hist'][-1]
    assert last['latent_spread'] > 0.3 and last['recon_rel'] < 0.8, last
    w = Config().loss
    rest = w.commitment * last['commitment'] + w.diversity * last['diversity'] + w.first_letter * last['first_letter']
    assert abs(last['total'] - last['recon'] - rest) < 1e-4 * max(1, last['total']), last

def test_reconstruction_beats_init_and_random(trained):
    "Measured at 0.911x the init's MSE with 1 and 2 threads (4,000 items, 8 x 32, 20 epochs, SiLU, lr 1e-3, loss.first_letter 0.05, a balanced refit every epoch); random codes decode 2.65x worse."
    t, i, r = trained['trained'], trained['init'], trained['random']
    assert t['mse'] < 0.98 * i['mse'], (t['mse'], i['mse'])
    assert t['mse'] < 0.5 * r['mse'], (t['mse'], r['mse'])

def test_probes_beat_random_and_init(trained):
    """Every probe clearly above random codes and none significantly below the init's: each item is tested once (5-fold)
    and the trained codes are compared with the init's item by item, so the bound is two standard errors of that paired
    gap (0.011-0.015 on 4,000 items), not a guess at the noise. Measured with 1 and 2 threads: the lexicographer file's
    +0.017 to +0.022 (asserted above +0.01), the hypernym labels at depth 1 -0.001 to +0.002, at depth 2 +0.023 to +0.030
    (from one or two letters).
    The neighbour ratio stays within 0.003 of the init's (measured 0.9182 against 0.9196)."""
    t, i, r, gap = trained['trained'], trained['init'], trained['random'], trained['gap']
    for p in [k for k in t if k.startswith('probe')]:
        assert t[p] > r[p] + 0.05, (p, t[p], r[p])
        assert gap[p]['delta'] > -2 * gap[p]['se'] and 0 < gap[p]['se'] < 0.01, (p, gap[p])
    assert gap['probe0_d1']['delta'] > 0.01 and gap['probe0_d2']['delta'] > 0.01, gap
    assert t['neighbour_d1'] < r['neighbour_d1'] - 0.05 and t['neighbour_d1'] < i['neighbour_d1'] + 0.003, (t, i)

def test_codes_used_and_unique(trained):
    """Issue 13's usage bars on encoded items (measured: 100% used, least perplexity 0.95); collisions within 20
    items of the init's (measured 6 and 8 items against its 10, with 1 and 2 threads)."""
    t, i = trained['trained'], trained['init']
    assert t['min_used'] >= 0.9 and t['min_perplexity'] >= 0.5, t
    assert t['collide'] <= i['collide'] + 0.005, (t['collide'], i['collide'])

def test_health_verdict(trained):
    """The guard agrees: not collapsed, and it rebuilds the items better than its init. Whether it also groups them
    better turns on probe differences of 0.01, inside a 4,000-item catalog's run-to-run spread (AdamW's fused kernel,
    which rounds differently in the last bit, flipped probe1_d1 from 0.009 to just over 0.01 below the init's), so the
    verdict may be 'ok' or say exactly that: better rebuilt, grouped no better."""
    h = learning_health(trained['model'], trained['x'], sample=None, labels=trained['labels'])
    assert h.verdict != 'collapsed' and h.numbers['latent_spread'] > 0.3, str(h)
    assert h.numbers['trained']['mse'] < 0.98 * h.numbers['init']['mse'], str(h)
    assert h.verdict == 'ok' or str(h).startswith('Rebuilds the items better than the training-free init'), str(h)

def test_decoder_phase_fits_the_codes(trained):
    """The decoder phase on real items: `decoder_step` on the trained model's frozen codes leaves every item's code as it
    was and rebuilds the items better: after the joint training's 20 epochs, 4 epochs of it took the error to 0.944x
    what it was (measured with 1 and 2 threads; the MLP here is one layer of 256); the asserted bound leaves room for rounding."""
    model, x = copy.deepcopy(trained['model']), trained['x']
    codes = encode(model, x)
    mse = lambda: float(((decode(model, codes) - x) ** 2).mean())
    before, opt, rng = mse(), make_optimizer(model), np.random.default_rng(1)
    for _ in range(4):
        perm = rng.permutation(len(x))
        for i in range(0, len(x), 256): decoder_step(model, opt, x[perm[i:i + 256]])
    after = mse()
    print('decoder phase: mse', round(before, 7), '->', round(after, 7), f'({after / before:.3f}x)')  # shown with pytest -s
    np.testing.assert_array_equal(encode(model, x), codes)
    assert after < 0.97 * before, (after, before)

def test_scale_invariance(catalog, trained):
    "Inputs scaled by 1e3 train as well as the originals: the normaliser takes the scale out."
    model, x, _ = fit(catalog, scale=1e3)
    codes = encode(model, x)
    t = code_metrics(codes, x, [K] * LEVELS, trained['labels'], float(((decode(model, codes) - x) ** 2).mean()))
    ref, init_mse = trained['trained'], trained['init']['mse']
    assert abs(t['mse'] / 1e6 / init_mse - ref['mse'] / init_mse) < 0.05, (t['mse'] / 1e6, ref['mse'])
    assert abs(t['probe0_d1'] - ref['probe0_d1']) < 0.03 and abs(t['neighbour_d1'] - ref['neighbour_d1']) < 0.02

def test_held_out_split_and_early_stopping(catalog, tmp_path):
    """The product's own path on real items: `train_segment` with `data.holdout` and `optim.patience`, then
    `learning_health`, which finds the run's held-out rows itself. On 3,000 training items (8 x 32 codes) the joint
    epochs do not carry over to unseen items: their error is lowest after epoch 1 and then rises (measured 0.714,
    0.729, 0.731, 0.731 of their variance), so patience ends the joint epochs 3 epochs later and the decoder phase
    starts from epoch 1's weights; it lowers the unseen items' error (measured 0.695, 0.688, 0.686, 0.685), so the
    run ends on its last epoch. The guard then reads the unseen items against the init (measured 0.992x its error:
    'Memorised, not learned' from 0.99 up), and a run without a gain on them never reads 'ok'. On WordNet 20k the same
    split gains 5% over the init (bench/learning/train_wordnet.py)."""
    from letter8_tokenizer.train import train_segment, resolve_config
    from letter8_tokenizer.loop import read_metrics
    from letter8_tokenizer.checkpoint import Checkpointer
    cfg = override(Config(), {**SMALL, 'optim.epochs': 40, 'optim.decoder_share': 0.1, 'data.holdout': 0.25, 'optim.patience': 3,
                                     'schedule.log_every_s': 3600})
    r = train_segment(cfg, catalog, tmp_path/'run', progress=False)
    ends = [row['held_out_recon'] for row in read_metrics(tmp_path/'run') if 'held_out_recon' in row]
    st = Checkpointer(tmp_path/'run').load().state
    best = st['best']['epoch']
    dec = st['schedule']['decoder_from']  # where patience ended the joint epochs: 3 after their best
    assert r.status == 'done' and dec == int(np.argmin(ends[:dec])) + 1 + 3 and dec + 1 <= len(ends) <= dec + 4, (ends, dec)
    assert ends[best - 1] == min(ends) and (len(ends) == dec + 4 or len(ends) - best >= 3), (ends, best)
    assert all(torch.equal(st['model'][k], st['best']['model'][k]) for k in st['model'])
    model = build_tokenizer(resolve_config(cfg, catalog), catalog); model.load_state_dict(st['model'])
    h = learning_health(model, catalog, sample=None)
    held = h.numbers['held_out']
    assert min(ends[dec:]) < 0.98 * min(ends[:dec]), ends  # the decoder phase carries over to unseen items
    ratio = held['mse'] / held['init_mse']
    assert held['items'] == 1000 and h.numbers['items'] == 3000 and 0.9 < ratio < 1.1, held
    assert ratio < 0.99 or h.verdict == 'no better than init', (ratio, str(h))  # no gain on unseen items is never 'ok'
