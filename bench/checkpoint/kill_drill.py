"""Kill drill over `letter8 run`: SIGKILL the runner, the kernel, or both, at random instants (in training, in
saves, in the export), run again until done, and check that every run ends with the same code table, tokenizer
and probe as an uninterrupted run, and that no run ever reports done without them.

    python bench/checkpoint/kill_drill.py --kills 30        # writes bench/results/kill_drill.json

`tests/test_kill_drill.py` runs the same drill with a handful of kills."""
import argparse, json, os, random, signal, subprocess, sys, tempfile, time
from pathlib import Path
sys.path.insert(0, str(Path(__file__).resolve().parents[2]))  # the clone's root, for bench.common
from bench.common import RESULTS, ROOT, write_result

OVERRIDES = {'optim.epochs': 30, 'schedule.save_every_steps': 3}
ITEMS = 600

def letter8_run(out, experiment, extra=()):
    "Start `letter8 run` in its own process group (so a kill can take the runner and its kernel together)."
    cmd = [str(Path(sys.executable).parent/'letter8'), 'run', '--experiment', experiment, '--catalog-items', str(ITEMS),
           '--out', str(out), '--threads', '1', '--overrides', json.dumps(OVERRIDES), '--max-segments', '8', *extra]
    return subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, start_new_session=True, cwd=str(ROOT))

def files_of(run):
    "What a finished run exported, as comparable values: codes, tokenizer weights and config, probe numbers."
    import torch
    from letter8_tokenizer.codes import CodeTable
    probe = json.loads((run/'probe'/'probe.json').read_text())
    return dict(codes=CodeTable.load(run/'codes').codes, config=(run/'tokenizer'/'config.json').read_text(),
                weights=torch.load(run/'tokenizer'/'model.pt', map_location='cpu', weights_only=True),
                probe=json.dumps({k: v for k, v in probe.items() if k != 'meta'}, sort_keys=True),
                metrics=(run/'metrics.jsonl').read_text())

def same(a, b):
    "Names of the exported things that differ between two runs (empty: identical)."
    import torch
    bad = [k for k in ('config', 'probe', 'metrics') if a[k] != b[k]]
    if a['codes'].shape != b['codes'].shape or not (a['codes'] == b['codes']).all(): bad.append('codes')
    if a['weights'].keys() != b['weights'].keys() or not all(torch.equal(a['weights'][k], b['weights'][k]) for k in a['weights']): bad.append('weights')
    return bad

def phase_now(run, since=0.0):
    """Where a kill lands: export (trained, or export folders being written), save (a checkpoint being written), training
    (a checkpoint committed since `since`, the launch: the kernel is in its training loop), else startup."""
    from letter8_tokenizer.runfolder import read_status
    try:
        st = read_status(run) or {}
        if st.get('status') == 'trained' or any(p.name.startswith(('.codes.', '.tokenizer.', '.probe.')) for p in run.glob('.*')): return 'export'
        if any(p.name.startswith('.tmp-step') for p in (run/'checkpoints').glob('.*')): return 'save'
        if st.get('status') == 'running' and any(p.stat().st_mtime > since for p in (run/'checkpoints').glob('step-*')): return 'training'
    except (OSError, ValueError): pass  # a folder renamed while we looked
    return 'startup'

def wait_for(p, run, goal, since, limit_s):
    "Poll until the run is in phase `goal` ('any': a random instant), the runner ends, or `limit_s` passes."
    end = time.time() + limit_s
    while p.poll() is None and time.time() < end:
        if goal != 'any' and phase_now(run, since) == goal: return
        time.sleep(0.005)

def check_done_means_exported(run):
    "The invariant after every kill: a status that says done comes with a committed, verifiable export."
    from letter8_tokenizer.runfolder import read_status, RunPaths
    from letter8_tokenizer.export import verify_export
    st = read_status(run) or {}
    if st.get('done'):
        problem = verify_export(RunPaths(run), st.get('step'))
        assert problem is None, f"{run} says done but its export does not verify: {problem}"

def kill(proc, run, target):
    "SIGKILL the runner's process group, the runner alone, or the kernel alone (its pid is in the run lock)."
    from letter8_tokenizer.runfolder import read_lock
    if target == 'kernel':
        pid = (read_lock(run) or {}).get('kernel_pid')
        if not pid: target = 'group'
        else:
            try: os.kill(pid, signal.SIGKILL); return 'kernel'
            except ProcessLookupError: target = 'group'
    if target == 'runner': os.kill(proc.pid, signal.SIGKILL); return 'runner'
    try: os.killpg(proc.pid, signal.SIGKILL)
    except ProcessLookupError: pass
    return 'group'

def reference(out):
    "One uninterrupted run: its exports and its wall time."
    t = time.time()
    p = letter8_run(out, 'ref')
    so, se = p.communicate(timeout=900)
    assert p.returncode == 0, so + se
    return files_of(out/'ref'), time.time() - t

def drill(n_kills, out, seed=0, targets=('group', 'kernel', 'runner'), log=print):
    "Kill runs until `n_kills` kills have landed; every run is then finished and compared with the reference."
    out = Path(out); rng = random.Random(seed)
    ref, ref_s = reference(out)
    log(f"reference: {ref_s:.1f}s uninterrupted")
    kills, runs, refused, t0 = [], [], 0, time.time()
    while len(kills) < n_kills:
        exp = f"run{len(runs):02d}"; run = out/exp
        want = min(rng.randint(1, 4), n_kills - len(kills))
        mine, launches = 0, 0
        while True:
            launches += 1
            assert launches <= 15, f"{exp}: still not done after {launches - 1} launches of letter8 run"
            p, since = letter8_run(out, exp), time.time()
            while p.poll() is None and mine < want:
                goal = rng.choice(['training', 'save', 'export', 'any'])
                wait_for(p, run, goal, since, rng.uniform(0.5, ref_s) if goal == 'any' else 1.5 * ref_s)
                if p.poll() is not None: break
                where = phase_now(run, since)
                how = kill(p, run, rng.choice(targets))
                kills.append(dict(run=exp, target=how, phase=where, t=round(time.time() - t0, 1))); mine += 1
                log(f"kill {len(kills):3d}: {exp} {how:<6} in {where}")
                if how != 'kernel': break
                time.sleep(0.5); check_done_means_exported(run); since = time.time()
            so, se = p.communicate(timeout=900)
            check_done_means_exported(run)
            if 'locked by' in se: refused += 1; time.sleep(1.0); continue  # an orphaned kernel still finishing: wait for it
            assert 'not retried' not in so, f"{exp}: a kill left the run in a state that fails permanently:\n{so}\n{se}"
            if p.returncode == 0: break  # done (the kills that landed before it finished count)
        bad = same(ref, files_of(run))
        runs.append(dict(run=exp, kills=mine, differs=bad))
        log(f"{exp}: {mine} kills, {'identical to the reference' if not bad else 'DIFFERS: ' + ', '.join(bad)}")
    return dict(kills=len(kills), runs=len(runs), identical=sum(not r['differs'] for r in runs), refused_by_lock=refused,
                by_target={t: sum(k['target'] == t for k in kills) for t in ('group', 'kernel', 'runner')},
                by_phase={ph: sum(k['phase'] == ph for k in kills) for ph in ('startup', 'training', 'save', 'export')},
                reference_s=round(ref_s, 1), drill_s=round(time.time() - t0, 1), detail=runs, kill_log=kills)

if __name__ == '__main__':
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument('--kills', type=int, default=30); ap.add_argument('--seed', type=int, default=0)
    ap.add_argument('--work', default=None, help='folder for the runs (default: a temporary one, removed after)')
    ap.add_argument('--out', default=str(RESULTS/'kill_drill.json'))
    a = ap.parse_args()
    if a.work and Path(a.work).exists() and any(Path(a.work).iterdir()): sys.exit(f"--work {a.work} is not empty: name a new folder.")
    with tempfile.TemporaryDirectory() as tmp:
        res = drill(a.kills, a.work or tmp, a.seed, log=lambda *x: print(*x, flush=True))
    print(f"\n{res['kills']} kills over {res['runs']} runs ({res['by_target']}; landed {res['by_phase']}); "
          f"{res['identical']}/{res['runs']} runs identical to the uninterrupted one; {res['refused_by_lock']} starts refused by the lock; "
          f"reference {res['reference_s']}s, drill {res['drill_s']}s")
    write_result(a.out, res)
    sys.exit(0 if res['identical'] == res['runs'] else 1)
