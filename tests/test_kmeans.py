"Constrained k-means: bounds hold exactly on random feasible problems; missing faiss names the extra."
import subprocess, sys
import numpy as np, pytest
from letter8_tokenizer.kmeans import constrained_kmeans, residual_init, check_bounds, letter_bounds

def random_problem(rng):
    n, d, k = int(rng.integers(50, 3000)), int(rng.integers(2, 40)), int(rng.integers(2, 64))
    k = min(k, n)
    lo = int(rng.integers(0, n // k + 1))
    hi = int(rng.integers(max(-(-n // k), lo, 1), n + 1))
    centers = rng.normal(0, 4, (int(rng.integers(1, 10)), d))
    x = (centers[rng.integers(0, len(centers), n)] + rng.normal(0, 1, (n, d))).astype(rng.choice([np.float32, np.float64, np.float16]))
    return x, k, lo, hi

@pytest.mark.parametrize('seed', range(30))
def test_sizes_always_within_bounds(seed):
    x, k, lo, hi = random_problem(np.random.default_rng(seed))
    C, labels = constrained_kmeans(x, k, size_min=lo, size_max=hi, niter=5, seed=seed)
    sizes = np.bincount(labels, minlength=k)
    assert C.shape == (k, x.shape[1]) and labels.shape == (len(x),)
    assert sizes.min() >= lo and sizes.max() <= hi, (len(x), k, lo, hi, sizes.min(), sizes.max())

def test_exactly_balanced_and_deterministic():
    rng = np.random.default_rng(0)
    x = np.r_[rng.normal(0, 1, (900, 8)), rng.normal(8, 1, (100, 8))].astype(np.float32)
    a = constrained_kmeans(x, 10, size_min=100, size_max=100)
    b = constrained_kmeans(x, 10, size_min=100, size_max=100)
    assert (np.bincount(a[1]) == 100).all()
    np.testing.assert_array_equal(a[1], b[1]); np.testing.assert_array_equal(a[0], b[0])

def test_sampled_fit_still_assigns_all_within_bounds():
    rng = np.random.default_rng(1)
    x = rng.normal(size=(30_000, 16)).astype(np.float32)
    lo, hi = letter_bounds(len(x), 64)
    _, labels = constrained_kmeans(x, 64, max_points_per_centroid=32)  # fit on 2,048 points, assign 30,000
    sizes = np.bincount(labels, minlength=64)
    assert sizes.min() >= lo and sizes.max() <= hi

def test_residual_init_bounds_every_level():
    rng = np.random.default_rng(2)
    x = rng.normal(size=(4000, 8)).astype(np.float32)
    init = residual_init(x, levels=3, k=[16, 32, 8])
    for l, k in enumerate([16, 32, 8]):
        lo, hi = letter_bounds(len(x), k)
        sizes = np.bincount(init.codes[:, l], minlength=k)
        assert sizes.min() >= lo and sizes.max() <= hi

@pytest.mark.parametrize('n,k,lo,hi,msg', [(10, 20, None, None, 'only n=10 points'), (100, 10, 11, None, 'size_min <= 10'),
                                           (100, 10, None, 9, 'size_max >= 10'), (100, 10, 5, 4, 'size_max=4 must be >=')])
def test_bad_bounds_name_the_fix(n, k, lo, hi, msg):
    with pytest.raises(ValueError, match=msg): check_bounds(n, k, lo, hi)

def test_missing_faiss_names_the_extra():
    code = ("import sys; sys.modules['faiss'] = None\n"
            "import numpy as np\nfrom letter8_tokenizer.kmeans import constrained_kmeans\n"
            "try: constrained_kmeans(np.zeros((10, 2), np.float32), 2)\n"
            "except ImportError as e: print(e)\n")
    out = subprocess.run([sys.executable, '-c', code], capture_output=True, text=True, check=True).stdout
    assert "letter8-tokenizer[cpu]" in out and "letter8-tokenizer[gpu]" in out, out

def test_thread_settings_given_back():
    "The one-thread seeding and small repair searches leave faiss's and BLAS's thread counts as they found them."
    import faiss
    from threadpoolctl import threadpool_info
    before = (faiss.omp_get_max_threads(), [d['num_threads'] for d in threadpool_info()])
    rng = np.random.default_rng(3)
    x = np.r_[rng.normal(0, 1, (1500, 8)), rng.normal(5, 1, (500, 8))].astype(np.float32)
    _, labels = constrained_kmeans(x, 20, size_min=100, size_max=100)  # exact sizes: cap and fill both run
    assert (np.bincount(labels, minlength=20) == 100).all()
    assert (faiss.omp_get_max_threads(), [d['num_threads'] for d in threadpool_info()]) == before

@pytest.mark.parametrize('seed', range(5))
def test_within_matches_a_fresh_search_every_round(seed):
    "One distance block, revisited only where a point's nearest cluster left, answers every round like a fresh argmin."
    from letter8_tokenizer.kmeans import _within
    rng = np.random.default_rng(seed)
    n, k = 300, 40
    D = rng.random((k, n)).astype(np.float32)  # distance of point j to cluster i
    rows, cols = np.sort(rng.choice(n, 200, replace=False)), np.sort(rng.choice(k, 30, replace=False))
    near = _within(None, lambda r, c: D[np.ix_(c, r)].copy(), rows, cols)
    while len(cols):
        d, j = near(rows, cols)
        sub = D[np.ix_(cols, rows)]
        np.testing.assert_array_equal(j, cols[sub.argmin(0)]); np.testing.assert_array_equal(d, sub.min(0))
        rows = np.sort(rng.choice(rows, max(1, len(rows) * 3 // 4), replace=False))  # both sets only shrink
        cols = np.sort(rng.choice(cols, len(cols) - int(rng.integers(1, 5)), replace=False)) if len(cols) > 4 else cols[:0]

def test_block_and_search_repairs_both_keep_bounds():
    "The CPU's one-block repair and the per-round search (the GPU's path, forced by a tiny block limit) both land inside the bounds."
    import letter8_tokenizer.kmeans as K
    rng = np.random.default_rng(5)
    x = np.r_[rng.normal(0, 1, (1500, 8)), rng.normal(5, 1, (500, 8))].astype(np.float32)
    C = x[rng.choice(len(x), 20, replace=False)]
    lo, hi = 60, 140
    a = K.balanced_assign(x, C, lo, hi, gpu=False)
    real = K._within
    K._within = lambda nearest, block, rows0, cols0: real(nearest, block, rows0, cols0, max_block=0)
    try: b = K.balanced_assign(x, C, lo, hi, gpu=False)
    finally: K._within = real
    for lab in (a, b):
        s = np.bincount(lab, minlength=20); assert s.min() >= lo and s.max() <= hi, (s.min(), s.max())
