"Property tests of letter8_tokenizer.codes: random codes with forced collisions, spills, save/load, bad input."
import json
from collections import Counter

import numpy as np
import pytest

from letter8_tokenizer.codes import (CodeTable, TokenVocab, codes_to_strings, collision_stats,
                                     resolve_collisions, strings_to_codes)

# ---------------------------------------------------------------------------------------------------------------
# helpers

def random_codes(rng, n, sizes, dup_share=0.3, heavy=0):
    "Random codes with `dup_share` of the rows copying another row, and `heavy` rows copying one row."
    codes = np.stack([rng.integers(0, k, n) for k in sizes], 1)
    dup = rng.choice(n, int(n * dup_share), replace=False)
    codes[dup] = codes[rng.integers(0, n, len(dup))]
    if heavy: codes[rng.choice(n, heavy, replace=False)] = codes[0]
    return codes

def groups(codes, levels):
    "Counter of the first `levels` letters of each row."
    return Counter(map(tuple, codes[:, :levels].tolist()))

def feasible(codes, sizes):
    "Whether every prefix of L-2 letters holds at most K_{L-2} * K_{L-1} items (the whole table for L <= 2)."
    L = len(sizes)
    cap = sizes[-1] * (sizes[-2] if L > 1 else 1)
    return max(groups(codes, max(L - 2, 0)).values()) <= cap

def check_resolution(codes, res, sizes):
    new = res.codes
    assert new.shape == codes.shape
    assert len(set(map(tuple, new.tolist()))) == len(new), 'duplicates left'
    full, bucket = groups(codes, len(sizes)), groups(codes, len(sizes) - 1)
    shared = np.array([full[tuple(r)] > 1 for r in codes.tolist()])
    assert (new[~shared] == codes[~shared]).all(), 'a non-colliding item moved'
    assert res.moved.tolist() == np.flatnonzero((new != codes).any(1)).tolist()
    assert len(res.moved) == len(codes) - len(full), 'exactly one item of each group keeps its code'
    roomy = np.array([bucket[tuple(r)] <= sizes[-1] for r in codes[:, :-1].tolist()])
    assert (new[roomy, :-1] == codes[roomy, :-1]).all(), 'an item left a prefix that had room'
    if len(sizes) > 1:
        assert (new[:, :-2] == codes[:, :-2]).all(), 'an item left its level L-2 prefix'
        for prefix, count in bucket.items():
            if count > sizes[-1]:
                rows = (codes[:, :-1] == prefix).all(1)
                assert (new[rows, :-1] == prefix).all(1).sum() == sizes[-1], 'an over-full prefix keeps exactly K_last items'
    rep = res.report
    assert rep['collision_rate_after'] == 0 and rep['moved'] == len(res.moved)
    assert rep['collision_rate_before'] == pytest.approx(shared.mean())
    assert rep['unique_per_depth'][-1] == len(codes)

# ---------------------------------------------------------------------------------------------------------------
# resolution

def test_random_codes_resolve_or_fail_clearly():
    rng = np.random.default_rng(0)
    outcomes = Counter()
    for trial in range(300):
        L = int(rng.integers(1, 6))
        sizes = [int(k) for k in rng.integers(2, 7, L)]
        n = int(rng.integers(2, min(np.prod(sizes), 400) + 1))
        codes = random_codes(rng, n, sizes, dup_share=rng.uniform(0, 0.6), heavy=int(rng.integers(0, 3 * sizes[-1])) if n > 20 else 0)
        before = codes.copy()
        if feasible(codes, sizes):
            res = resolve_collisions(codes, sizes=sizes)
            check_resolution(codes, res, sizes)
            outcomes['spilled' if res.report['spilled'] else 'resolved'] += 1
        else:
            with pytest.raises(ValueError, match='items cannot get a unique code.*more codes'):
                resolve_collisions(codes, sizes=sizes)
            outcomes['infeasible'] += 1
        assert (codes == before).all(), 'the input was modified'
    assert min(outcomes.values()) >= 10, outcomes

def test_distances_random_and_chunking_does_not_change_result():
    rng = np.random.default_rng(1)
    for trial in range(20):
        L, K, d = int(rng.integers(2, 5)), int(rng.integers(4, 33)), 8
        sizes = [int(rng.integers(2, 6)) for _ in range(L - 1)] + [K]
        n = int(rng.integers(50, 2000))
        codebook = rng.normal(size=(K, d)).astype(np.float32)
        residual = rng.normal(size=(n, d)).astype(np.float32)
        last = ((residual[:, None] - codebook[None])**2).sum(-1).argmin(1)
        codes = np.c_[random_codes(rng, n, sizes[:-1], dup_share=0), last]
        if not feasible(codes, sizes): continue
        res = resolve_collisions(codes, residual, codebook, sizes=sizes)
        check_resolution(codes, res, sizes)
        small = resolve_collisions(codes, residual, codebook, sizes=sizes, max_cells=K)
        assert (small.codes == res.codes).all()
        if res.report['moved']:
            assert res.report['dist_increase_mean'] >= 0 and res.report['dist_increase_max'] >= res.report['dist_increase_mean']

def test_one_mover_takes_nearest_free_code():
    rng = np.random.default_rng(2)
    for trial in range(200):
        K = int(rng.integers(3, 40))
        taken = rng.choice(K, int(rng.integers(1, K)), replace=False)
        c = int(taken[0])
        codes = np.r_[np.c_[np.zeros(len(taken), int), taken], [[0, c]]]
        res = resolve_collisions(codes, sizes=[2, K])
        free = np.setdiff1d(np.arange(K), taken)
        want = free[np.lexsort((free, np.abs(free - c)))[0]]
        assert res.moved.tolist() == [len(taken)] and res.codes[-1, 1] == want
        assert res.report['shift_max'] == abs(want - c)

def test_keeper_is_closest_with_distances_else_lowest_row():
    codebook = np.eye(3, dtype=np.float32)
    residual = np.array([[0, .1, .9], [0, 0, 1], [.9, 0, .1]], np.float32)
    res = resolve_collisions([[0, 2]] * 3, residual, codebook)
    assert res.moved.tolist() == [0, 2] and res.codes[:, 1].tolist() == [1, 2, 0]
    assert resolve_collisions([[0, 2]] * 3, sizes=[1, 3]).moved.tolist() == [1, 2]

def test_spill_goes_to_nearest_sibling_and_levels_1_2():
    codes = np.array([[0, 3, 1]] * 6 + [[0, 2, 0], [0, 2, 1], [0, 2, 2], [0, 2, 3]])
    res = resolve_collisions(codes, sizes=[1, 6, 4])  # the nearer sibling b_2 is full, so b_4
    assert res.codes[:, 1].tolist() == [3] * 4 + [4, 4] + [2] * 4
    assert res.report['spilled'] == 2
    res = resolve_collisions([[2, 0]] * 5, sizes=[4, 4])
    assert sorted(map(tuple, res.codes.tolist())) == [(1, 0), (2, 0), (2, 1), (2, 2), (2, 3)]
    assert resolve_collisions([[1]] * 3 + [[0]], sizes=4).codes[:, 0].tolist() == [1, 2, 3, 0]
    with pytest.raises(ValueError, match=r'^1 items cannot get a unique code: 5 items but level a has 4 codes'):
        resolve_collisions([[1]] * 5, sizes=4)

def test_deterministic_and_medium_size():
    rng = np.random.default_rng(3)
    codes = random_codes(rng, 100_000, [256] * 8, dup_share=0.1, heavy=300)
    a, b = resolve_collisions(codes), resolve_collisions(codes.copy())
    assert (a.codes == b.codes).all() and a.report == b.report
    assert collision_stats(a.codes)['unique'] == len(codes) and a.report['spilled'] > 0
    assert (a.codes[:, :6] == codes[:, :6]).all()

def test_wide_codes_beyond_64_bits():
    rng = np.random.default_rng(4)
    sizes = [2**20] * 4 + [8]
    codes = random_codes(rng, 5000, sizes, dup_share=0.2)
    codes[:, :4] //= 2**18  # fewer prefixes, so buckets hold several items
    check_resolution(codes, resolve_collisions(codes, sizes=sizes), sizes)

# ---------------------------------------------------------------------------------------------------------------
# strings and vocabulary

def test_strings_and_vocab_round_trip():
    rng = np.random.default_rng(5)
    for trial in range(30):
        L = int(rng.integers(1, 27))
        sizes = [int(k) for k in rng.integers(1, 600, L)]
        codes = np.stack([rng.integers(0, k, 20) for k in sizes], 1)
        strings = codes_to_strings(codes, sizes)
        assert (strings_to_codes(strings, sizes) == codes).all()
        v = TokenVocab(sizes)
        ids = v.encode(codes)
        assert (v.decode(ids) == codes).all() and len(v) == 5 + sum(sizes)
        assert [v.tokens[i] for i in ids[3]] == [f"<{chr(97 + l)}_{c}>" for l, c in enumerate(codes[3])]

@pytest.mark.parametrize('bad,msg', [(['<a_1><b_2>', '<a_1><b_2><c_3>'], "'<a_1><b_2><c_3>' has 3 tokens; expected 2"),
                                     (['<a_1>x<b_2>'], "text outside"), (['<b_1><a_2>'], "level 1 is letter 'a'"),
                                     (['<a_-1><b_2>'], 'not of the form'), ([5], 'is a int, not a str'),
                                     (['<a_1><b_256>'], 'out of range')])
def test_malformed_strings(bad, msg):
    with pytest.raises(ValueError, match=msg): strings_to_codes(bad)

# ---------------------------------------------------------------------------------------------------------------
# code table

@pytest.mark.parametrize('items', [None, 'int', 'str'])
@pytest.mark.parametrize('sizes', [[256] * 8, [7, 300, 5], [2**20] * 4 + [64]])
def test_table_save_load_round_trip(tmp_path, items, sizes):
    rng = np.random.default_rng(6)
    codes = random_codes(rng, 3000, sizes, dup_share=0.05)
    ids = {None: None, 'int': rng.permutation(10**6)[:3000], 'str': [f"item-{i}" for i in rng.permutation(3000)]}[items]
    t = CodeTable.build(codes, ids, sizes)
    t2 = CodeTable.load(t.save(tmp_path/'t'))
    assert (t2.codes == t.codes).all() and t2.codes.dtype == t.codes.dtype and t2.sizes == t.sizes
    assert t2.report == t.report and t2.specials == t.specials and repr(t2) == repr(t)
    assert (t2.items is None) if items is None else (t2.items == t.items).all() and t2.items.dtype == t.items.dtype
    for row in rng.integers(0, 3000, 20):
        item = row if items is None else t.items[row].item()
        s = t2.lookup(item)
        assert t2.item_of(s) == item and (t2.lookup(item, as_codes=True) == t.codes[row]).all()
    assert (t2.rows_of(t.codes) == np.arange(3000)).all()
    rows = json.loads(t.to_jsonl(tmp_path/'t.jsonl').read_text().splitlines()[1])
    assert rows == {'item': 1 if items is None else t.items[1].item(), 'code': t.strings()[1]}

def damage(path, how):
    if how == 'flip':
        b = bytearray((path/'codes.npy').read_bytes()); b[-3] ^= 1; (path/'codes.npy').write_bytes(bytes(b))
    elif how == 'drop_npy': (path/'codes.npy').unlink()
    elif how == 'drop_json': (path/'codes.json').unlink()
    elif how == 'garble': (path/'codes.json').write_text('{"format": "letter8_')
    elif how == 'foreign': (path/'codes.json').write_text('{"format": "other"}')
    elif how == 'newer':
        m = json.loads((path/'codes.json').read_text()); m['version'] = 99; (path/'codes.json').write_text(json.dumps(m))

@pytest.mark.parametrize('how,err,msg', [('flip', ValueError, 'does not match the sha256'), ('drop_npy', FileNotFoundError, 'codes.npy is missing'),
                                         ('drop_json', FileNotFoundError, 'codes.json is missing'), ('garble', ValueError, 'is corrupt'),
                                         ('foreign', ValueError, 'not a CodeTable file'), ('newer', ValueError, 'upgrade')])
def test_load_damaged(tmp_path, how, err, msg):
    path = CodeTable([[0, 1], [1, 0]]).save(tmp_path/'t')
    damage(path, how)
    with pytest.raises(err, match=msg) as e: CodeTable.load(path)
    assert str(path) in str(e.value)

def test_load_missing_dir(tmp_path):
    with pytest.raises(FileNotFoundError, match='does not exist'): CodeTable.load(tmp_path/'nothing')

@pytest.mark.parametrize('kw,msg', [(dict(codes=[1, 2, 3]), 'must be 2-D'), (dict(codes=[[0, -2]]), 'is negative'),
                                    (dict(codes=[[0, 256]]), 'level b has 256 codes'), (dict(codes=[[0.0, 1.0]]), "astype"),
                                    (dict(codes=[[0, 1], [0, 2]], items=[1, 2, 3]), '3 item ids for 2 code rows'),
                                    (dict(codes=[[0, 1], [0, 2]], items=['x', 'x']), "'x' appears 2 times"),
                                    (dict(codes=[[0, 1], [0, 1]]), 'share a full code'),
                                    (dict(codes=[[0, 1]], sizes=[4]), 'one size per level'),
                                    (dict(codes=np.zeros((1, 27), int)), 'between 1 and 26')])
def test_bad_table_input(kw, msg):
    with pytest.raises(ValueError, match=msg): CodeTable(**kw)

def test_bad_resolution_input():
    with pytest.raises(ValueError, match='residual has 2 rows'): resolve_collisions([[0, 1]], np.zeros((2, 3)), np.zeros((256, 3)))
    with pytest.raises(ValueError, match='codebook has 5 rows'): resolve_collisions([[0, 1]], np.zeros((1, 3)), np.zeros((5, 3)), sizes=8)
    with pytest.raises(ValueError, match='NaN'): resolve_collisions([[0, 1]], np.full((1, 3), np.nan), np.zeros((256, 3)))
    with pytest.raises(ValueError, match='Give both'): resolve_collisions([[0, 1]], codebook=np.zeros((256, 3)))
