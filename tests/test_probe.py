"Small, hand-checkable tests of letter8_tokenizer.probe and probe_report: each statistic, the baselines, the verdict, and the report files."
import json, re
import numpy as np
import pytest

from letter8_tokenizer.codes import check_codes
from letter8_tokenizer.kmeans import residual_init
from letter8_tokenizer.probe import (perplexity, code_usage, prefix_ids, collisions, collision_buckets,
                                     reconstruction, split_items, shuffle_codes, prefix_features, prefix_probe,
                                     majority_accuracy, neighbour_ratio, judge_codes, gains, relative_spread, item_variance,
                                     mean_reconstruction_mse, item_mse, VERDICTS)
from letter8_tokenizer.probe_report import nearest, probe, compare, write_report, code_items

# six items, three levels: a = 0 0 0 1 1 1; items 3 and 4 share all letters
CODES = np.array([[0, 0, 0], [0, 0, 1], [0, 1, 0], [1, 2, 0], [1, 2, 0], [1, 3, 2]])


def test_perplexity_uniform_and_single_code():
    assert perplexity([3, 3, 3, 3]) == pytest.approx(4)
    assert perplexity([6, 0, 0, 0]) == pytest.approx(1)
    assert perplexity([2, 1, 1]) == pytest.approx(np.exp(-(.5 * np.log(.5) + 2 * .25 * np.log(.25))))


def test_code_usage_per_level():
    rows = code_usage(CODES, level_sizes=[2, 4, 4])
    assert [r['used'] for r in rows] == [2, 4, 3]
    assert [r['dead'] for r in rows] == [0, 0, 1]
    assert rows[0]['perplexity'] == pytest.approx(2) and rows[0]['top_share'] == pytest.approx(.5)
    assert rows[2]['top_share'] == pytest.approx(4 / 6)
    single = code_usage(np.zeros((6, 1), int), level_sizes=8)[0]
    assert single['perplexity'] == pytest.approx(1) and single['dead'] == 7 and single['top_share'] == 1


def test_collisions_by_depth():
    rows = collisions(CODES)
    assert [r['unique'] for r in rows] == [2, 4, 5]
    assert [r['largest'] for r in rows] == [3, 2, 2]
    assert [r['colliding'] for r in rows] == pytest.approx([1, 4 / 6, 2 / 6])
    assert prefix_ids(CODES)[:, 1].tolist() == [0, 0, 1, 2, 2, 3]
    unique = collisions(np.arange(12).reshape(6, 2))
    assert [r['colliding'] for r in unique] == [0, 0]


def test_collision_buckets_name_the_items():
    b = collision_buckets(CODES, labels=np.array([[0], [0], [0], [1], [2], [1]]))
    assert len(b) == 1 and b[0]['items'] == [3, 4] and b[0]['code'] == '<a_1><b_2><c_0>'
    assert b[0]['purity'] == [0.5]


def test_reconstruction_exact_with_exact_codebooks():
    rng = np.random.default_rng(0)
    books = [rng.normal(size=(4, 5)) * s for s in (3, 2, 1)]
    lat = sum(books[l][CODES[:, l]] for l in range(3))
    rows = reconstruction(lat, CODES, books)
    assert rows[-1]['mse'] == pytest.approx(0, abs=1e-12) and rows[-1]['explained'] == pytest.approx(1)
    assert rows[0]['explained'] < rows[1]['explained'] < rows[2]['explained']
    # mse after one letter by hand
    assert rows[0]['mse'] == pytest.approx(((lat - books[0][CODES[:, 0]])**2).mean())


def test_reconstruction_rejects_mismatched_inputs():
    books = [np.zeros((4, 5))] * 3
    with pytest.raises(ValueError, match='latents has 5 rows but codes has 6'): reconstruction(np.zeros((5, 5)), CODES, books)
    with pytest.raises(ValueError, match='level b reach 3 but its codebook has 2 rows'): reconstruction(np.zeros((6, 5)), CODES, [books[0], np.zeros((2, 5)), books[2]])


def test_random_baseline_keeps_usage_and_breaks_link():
    codes = np.stack([np.arange(600) % 6, np.arange(600) % 10], 1)
    sh = shuffle_codes(codes, seed=3)
    for l in range(2): assert np.bincount(sh[:, l]).tolist() == np.bincount(codes[:, l]).tolist()
    assert (sh != codes).any()
    y = codes[:, 0]
    tr, te = split_items(600, .25, seed=0)
    assert prefix_probe(codes, y, tr, te)[0] == 1.0
    assert prefix_probe(sh, y, tr, te)[0] < 0.4


def test_probe_perfect_when_codes_are_labels():
    y = np.repeat(np.arange(5), 12)
    codes = np.stack([y, np.arange(60) % 7], 1)
    tr, te = split_items(60, .25, seed=1)
    assert prefix_probe(codes, y, tr, te) == [1.0, 1.0]
    assert majority_accuracy(y, tr, te) < .5


def test_prefix_probe_equals_sklearn_multinomial_nb():
    from sklearn.naive_bayes import MultinomialNB
    rng = np.random.default_rng(0)
    codes = rng.integers(0, 4, (300, 3))
    y = (codes[:, 0] * 2 + rng.integers(0, 2, 300)) % 5
    tr, te = split_items(300, .3, seed=0)
    ours = prefix_probe(codes, y, tr, te, alpha=0.5)
    for d in range(1, 4):
        X = prefix_features(codes, d)
        nb = MultinomialNB(alpha=0.5).fit(X[tr], y[tr])
        assert ours[d - 1] == pytest.approx((nb.predict(X[te]) == y[te]).mean())


def test_neighbour_ratio_and_nearest():
    pts = np.array([[0., 0], [0, 1], [10, 0], [50, 0], [50, 1], [95, 0]])
    r = neighbour_ratio(CODES, pts, pairs=4000, seed=0)
    assert r[1] < r[0] < 1
    assert nearest(pts, np.array([0, 3]), 2).tolist() == [[1, 2], [4, 2]]
    assert np.isnan(neighbour_ratio(np.arange(12).reshape(6, 2), pts)[0])


def test_bad_input_names_the_fix():
    emb = np.zeros((6, 4), np.float32)
    with pytest.raises(ValueError, match='emb has 5 rows but codes has 6'): probe(CODES, emb[:5])
    with pytest.raises(ValueError, match='labels has 4 rows'): probe(CODES, emb, labels=np.zeros(4, int))
    with pytest.raises(ValueError, match="astype\\('int64'\\)"): probe(CODES, emb, labels=np.zeros(6))
    with pytest.raises(ValueError, match='both latents and codebooks'): probe(CODES, emb, latents=emb)
    with pytest.raises(ValueError, match='2-D'): check_codes(CODES[:, 0])
    with pytest.raises(ValueError, match='level b has 2 codes'): code_usage(CODES, level_sizes=[2, 2, 4])
    with pytest.raises(ValueError, match='init_codes has shape'): probe(CODES, emb, init_codes=CODES[:, :2])
    with pytest.raises(ValueError, match='latent_spread'): probe(CODES, emb, latent_spread=-1.0)


@pytest.fixture(scope='module')
def small_report():
    rng = np.random.default_rng(0)
    y = np.repeat(np.arange(4), 50)
    leaf = y * 3 + rng.integers(0, 3, 200)
    emb = (np.eye(12)[leaf] * 5 + rng.normal(0, .3, (200, 12))).astype(np.float32)
    codes = np.stack([y, leaf % 3, rng.integers(0, 4, 200)], 1)
    books = [rng.normal(size=(k, 12)) for k in (4, 3, 4)]
    titles = [f'item <{i}> & co' for i in range(200)]
    return probe(codes, emb, labels=np.stack([y, leaf], 1), cf=emb[:, :6], titles=titles, latents=emb,
                 codebooks=books, label_names=['top', 'leaf'], pairs=500)


def test_probe_report_tables_and_compare(small_report):
    t = small_report.tables()
    assert {'usage', 'collisions', 'neighbours', 'reconstruction', 'probes', 'baselines', 'buckets'} <= set(t)
    assert t['probes'].loc[1, 'top'] == 1.0 and t['probes'].loc[1, 'top random'] < .6
    assert t['probes'].loc[2, 'leaf'] > t['probes'].loc[1, 'leaf']
    cmp = compare({'a': small_report, 'b': small_report})
    assert list(cmp.columns) == ['a', 'b'] and cmp.loc[('probe top', 'a'), 'a'] == 1.0


def test_explorer_is_static_html_by_default(small_report):
    page = small_report.explore(level=0, code=1)
    assert '<table' in page.data and 'item &lt;50&gt; &amp; co' in page.data
    rows = code_items(small_report, level=0, code=1, n_items=2, n_neighbours=2)
    assert [r['item'] for r in rows] == [50, 51] and all(len(r['neighbours']) == 2 for r in rows)
    with pytest.raises(ValueError, match='dead code'): code_items(small_report, level=0, code=3 + 10)
    w = small_report.explore(interactive=True)
    level, code = w.children[0].children
    level.value = 1
    assert 'level b' in w.children[1].value


def test_write_report_files(small_report, tmp_path):
    out = write_report(small_report, tmp_path/'rep')
    assert out['html'].exists() and out['json'].exists()
    assert sorted(p.name for p in out['png']) == ['prefixes.png', 'probes.png', 'reconstruction.png', 'usage.png']
    for p in out['png']: assert p.read_bytes()[:8] == b'\x89PNG\r\n\x1a\n'
    page = out['html'].read_text()
    srcs = re.findall(r'src="([^"]*)"', page)
    assert len(srcs) == 4 and all(s.startswith('data:image/png;base64,') and len(s) > 1000 for s in srcs)
    assert 'href=' not in page
    data = json.loads(out['json'].read_text())
    assert data['meta']['items'] == 200 and len(data['probes']) == 2 * 3 and data['probes'][0]['accuracy'] == 1.0


# ---- the verdict: trained codes against the init codes and random codes, in the same run ----

def _catalog(n=600, seed=0):
    "Items in 6 well-separated groups of 4 subgroups: k-means codes find them, shuffled codes cannot."
    rng = np.random.default_rng(seed)
    top = rng.integers(0, 6, n)
    sub = top * 4 + rng.integers(0, 4, n)
    centres, subc = rng.normal(size=(6, 16)) * 6, rng.normal(size=(24, 16)) * 2
    emb = (centres[top] + subc[sub] + rng.normal(0, .5, (n, 16))).astype(np.float32)
    return emb, np.stack([top, sub], 1)


@pytest.fixture(scope='module')
def cat():
    emb, labels = _catalog()
    init = residual_init(emb, levels=3, k=[6, 4, 8], gpu=False, seed=0)
    return emb, labels, init


def test_init_codes_computed_and_compared(cat):
    emb, labels, init = cat
    rep = probe(init.codes, emb, labels=labels, raw_probe=False, pairs=2000)  # init computed here, same sizes and seed
    assert rep.meta['init'].startswith('residual_init on emb') and rep.data['init'].shape == init.codes.shape
    assert {'init', 'random'} <= set(rep.probes[0]) and {'init', 'random'} <= set(rep.neighbours[0])
    assert rep.probes[0]['init'] > rep.probes[0]['random'] + 0.3  # k-means finds the 6 groups; shuffled codes do not
    assert rep.verdict in VERDICTS


def test_probes_judged_against_several_inits(cat, tmp_path):
    "With `init_seeds`, a probe row's `init` is the mean of that many inits (seeds 0, 1, ...), each scored on the same folds."
    from letter8_tokenizer.probe import prefix_probe_cv
    from letter8_tokenizer.stats import pooled_gap
    emb, labels, init = cat
    rep = probe(init.codes, emb, labels=labels, raw_probe=False, pairs=500, init_seeds=2)
    assert 'seeds 0-1' in rep.meta['init'] and (rep.data['init'] == init.codes).all()  # the other rows: seed 0's init
    inits = [residual_init(emb, levels=3, k=[6, 4, 8], gpu=False, seed=s).codes for s in (0, 1)]
    for row in (r for r in rep.probes if r['depth'] <= 2):
        y, d = labels[:, int(row['label'][-1])], row['depth'] - 1
        correct = lambda c: prefix_probe_cv(c, y, folds=5, seed=0, alpha=0.1)[d]
        g = pooled_gap(correct(init.codes), [correct(c) for c in inits])
        assert row['init'] == pytest.approx(np.mean([correct(c).mean() for c in inits])) and row['se_init'] == pytest.approx(g['se'])
        assert row['init_sd'] == pytest.approx(g['init_sd'])
    assert 'Init: residual_init on emb, level sizes 4/6/8, seeds 0-1 (probes against their mean' in write_report(rep, tmp_path)['html'].read_text()
    one = probe(init.codes, emb, labels=labels, raw_probe=False, pairs=500, init_seeds=1)
    assert 'init_sd' not in one.probes[0] and one.meta['init'].endswith('seed 0')
    with pytest.raises(ValueError, match='init_seeds=0'): probe(init.codes, emb, init_seeds=0)


def test_four_verdicts(cat):
    emb, labels, init = cat
    kw = dict(labels=labels, raw_probe=False, pairs=2000)
    assert probe(init.codes, emb, compare_init=False, **kw).verdict == 'ok'  # beats random codes; no init compared
    assert probe(init.codes, emb, init_codes=init.codes, **kw).verdict == 'no better than init'  # it IS the init
    shuffled = probe(np.random.default_rng(1).permutation(init.codes), emb, init_codes=init.codes, **kw)
    assert shuffled.verdict == 'no better than random' and 'random codes' in shuffled.headline()
    assert probe(init.codes, emb, compare_init=False, latent_spread=1e-4, **kw).verdict == 'collapsed'
    one_id = probe(np.zeros_like(init.codes), emb, init_codes=init.codes, **kw)  # every item gets the same letters
    assert one_id.verdict == 'collapsed' and 'no information' in one_id.headline()


def test_codes_better_than_init_read_ok(cat):
    "Codes that know the groups beat a deliberately poor init (k-means on one noise dimension) and random codes."
    emb, labels, init = cat
    poor = residual_init(np.random.default_rng(5).normal(size=(len(emb), 1)).astype(np.float32), levels=3, k=[6, 4, 8], gpu=False).codes
    oracle = np.stack([labels[:, 0], labels[:, 1] % 4, init.codes[:, 2]], 1)
    rep = probe(oracle, emb, labels=labels, init_codes=poor, raw_probe=False, pairs=2000)
    assert rep.verdict == 'ok', rep.headline()
    assert rep.judgement['status']['init'] == dict(probes='better', neighbours='better')


def test_latent_spread_from_latents_is_scale_free(cat):
    emb, labels, init = cat
    pt = np.random.default_rng(0).normal(size=(1, 16))
    collapsed = (pt + 1e-4 * np.random.default_rng(1).normal(size=emb.shape)).astype(np.float32)
    books = [np.zeros((k, 16), np.float32) for k in (6, 4, 8)]
    for scale in (1e-3, 1.0, 1e3):
        rep = probe(init.codes, emb, labels=labels, latents=collapsed * scale, codebooks=books, compare_init=False, raw_probe=False, pairs=500)
        assert rep.meta['latent_spread'] < 1e-3 and rep.verdict == 'collapsed' and 'encoder collapsed' in rep.headline()
    assert relative_spread(emb * 1e3) == pytest.approx(relative_spread(emb), rel=1e-9)


def test_judge_uses_margins_not_rounding():
    def rows(t, i, r, ratio):
        return [dict(statistic='probe y', at='a', better='higher', decides=True, trained=t, init=i, random=r),
                dict(statistic='neighbour ratio', at='a', better='lower', decides=True, trained=ratio[0], init=ratio[1], random=ratio[2])]
    # differences well inside the margins are ties, whatever the last bits are
    tie = rows(0.50 + 1e-12, 0.50, 0.20, (0.80, 0.80 + 1e-12, 1.0))
    assert judge_codes(tie)['verdict'] == 'no better than init' and judge_codes(tie)['status']['init'] == dict(probes='level', neighbours='level')
    assert judge_codes(rows(0.60, 0.50, 0.20, (0.70, 0.80, 1.0)))['verdict'] == 'ok'
    assert judge_codes(rows(0.60, 0.50, 0.20, (0.70, 0.80, 1.0)), probe_margin=0.2)['verdict'] == 'ok'  # probes tie, neighbours still better
    assert judge_codes(rows(0.60, 0.50, 0.20, (0.70, 0.80, 1.0)), probe_margin=0.2, ratio_margin=0.2)['verdict'] == 'no better than init'  # both tie
    assert judge_codes(rows(0.21, 0.50, 0.20, (0.99, 0.80, 1.0)))['verdict'] == 'no better than random'
    assert gains(rows(0.6, 0.5, 0.2, (0.7, 0.8, 1.0)), 'random') == pytest.approx(dict(probes=0.4, neighbours=0.3))
    assert judge_codes(rows(0.6, 0.5, 0.2, (0.7, 0.8, 1.0)), latent_spread=0.005)['verdict'] == 'collapsed'


def test_reconstruction_in_the_input_space(cat):
    emb, labels, init = cat
    assert item_mse(emb, emb + 0.5) == pytest.approx(0.25)
    # the code-means decoder of one level is the within-cluster variance; of unique codes, exact
    one = init.codes[:, :1]
    within = np.mean([((emb[one[:, 0] == c] - emb[one[:, 0] == c].mean(0)) ** 2).sum() for c in range(6)]) * 6 / emb.size
    assert mean_reconstruction_mse(emb, one) == pytest.approx(within, rel=1e-9)
    assert mean_reconstruction_mse(emb, np.arange(len(emb))[:, None]) == pytest.approx(0, abs=1e-12)
    # a tokenizer's reconstruction, as an array or as a function of the codes, lands in the comparison table
    rec = emb + 0.1
    a = probe(init.codes, emb, init_codes=init.codes, recon=rec, pairs=500)
    b = probe(init.codes, emb, init_codes=init.codes, recon=lambda c: rec[:len(c)] if len(c) == len(rec) else None, pairs=500)
    row = {(r['statistic'], r['at']): r for r in a.comparison}[('reconstruction MSE', 'tokenizer')]
    assert row['trained'] == pytest.approx(0.01) and row['init'] == pytest.approx(mean_reconstruction_mse(emb, init.codes))
    assert b.comparison == a.comparison
    assert a.meta['item_variance'] == pytest.approx(item_variance(emb)) and item_variance(emb) > row['init']
    # without recon, a decoder passed as `decode` gives the tokenizer's row (here the identity on the summed code vectors)
    d = probe(init.codes, emb, init_codes=init.codes, latents=emb, codebooks=init.codebooks, decode=lambda z, depth: z, pairs=500)
    drow = {(r['statistic'], r['at']): r for r in d.comparison}[('reconstruction MSE', 'tokenizer')]
    assert drow['trained'] == pytest.approx(d.reconstruction[-1]['mse'])


def test_verdict_in_json_html_and_plot(cat, tmp_path):
    emb, labels, init = cat
    rep = probe(np.random.default_rng(1).permutation(init.codes), emb, labels=labels, init_codes=init.codes, raw_probe=False, pairs=500)
    out = write_report(rep, tmp_path/'r')
    data = json.loads(out['json'].read_text())
    assert data['verdict'] == 'no better than random' and data['judgement']['advice']
    assert {r['statistic'] for r in data['comparison']} >= {'probe label0', 'neighbour ratio', 'codes used / size', 'perplexity / size',
                                                           'colliding before resolution', 'reconstruction MSE'}
    page = out['html'].read_text()
    assert page.index('class="verdict"') < page.index('<img') and '#cb181d' in page and 'Try:' in page
    fig = rep.plot(('probes',))
    assert fig._suptitle.get_text() == 'verdict: no better than random'
    assert [t.get_text() for t in fig.axes[0].get_legend().get_texts()][:4] == ['chance', 'trained', 'init', 'random']
