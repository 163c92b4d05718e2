"Small, hand-checkable tests of letter8_tokenizer.probe: each statistic, the baselines, and the report files."
import json, re
import numpy as np
import pytest

from letter8_tokenizer.probe import (check_codes, perplexity, code_usage, prefix_ids, collisions, collision_buckets,
                                     reconstruction, split_items, shuffle_codes, prefix_features, prefix_probe,
                                     majority_accuracy, neighbour_ratio, nearest, probe, compare, write_report,
                                     explore, code_items)

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
    with pytest.raises(ValueError, match='level_sizes'): code_usage(CODES, level_sizes=[2, 2, 4])


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
    page = explore(small_report, level=0, code=1)
    assert '<table' in page.data and 'item &lt;50&gt; &amp; co' in page.data
    rows = code_items(small_report, level=0, code=1, n_items=2, n_neighbours=2)
    assert [r['item'] for r in rows] == [50, 51] and all(len(r['neighbours']) == 2 for r in rows)
    with pytest.raises(ValueError, match='dead code'): code_items(small_report, level=0, code=3 + 10)
    w = explore(small_report, interactive=True)
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
