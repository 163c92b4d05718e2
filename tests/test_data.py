"Memory stays bounded by chunk and batch sizes, not by the number of items (DESIGN invariant 6)."
import json, subprocess, sys
import numpy as np

CHILD = r'''
import sys, json, resource, numpy as np
from letter8_tokenizer.data import Items
items = Items(sys.argv[1], validate=False, chunk_rows=8192)
before = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
total = 0.0
for c in items.chunks(): total += float(c.emb[:, 0].sum())
after_chunks = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
n = sum(len(b.index) for b in items.batches(1024, mix=2))
after_batches = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
print(json.dumps(dict(chunks_mb=(after_chunks - before) / 1024, batches_mb=(after_batches - before) / 1024, n=n)))
'''

def test_chunks_and_batches_do_not_hold_the_file(tmp_path):
    n, d = 300_000, 256  # a 147 MB float16 file; a chunk is 8,192 rows (8 MB as float32)
    x = np.lib.format.open_memmap(tmp_path/'items.npy', 'w+', np.float16, (n, d))
    for s in range(0, n, 50_000): x[s:s+50_000] = np.random.default_rng(s).normal(size=(min(50_000, n - s), d))
    x.flush(); del x
    out = subprocess.run([sys.executable, '-c', CHILD, str(tmp_path/'items.npy')], capture_output=True, text=True, check=True)
    r = json.loads(out.stdout)
    assert r['n'] == n
    file_mb = n * d * 2 / 2**20
    assert r['chunks_mb'] < file_mb / 3 and r['batches_mb'] < file_mb / 3, (r, file_mb)
