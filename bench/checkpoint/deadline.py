"""When to stop a session so that its last checkpoint commits: our `Deadline` rule against the rules others use.

  python bench/checkpoint/deadline.py                 # 10,000 sessions per scenario (~20-40 s on 2 cores)
  python bench/checkpoint/deadline.py --sessions 2000

Every simulated session has its own heavy-tailed step and save times: lognormal around a per-session median
(step 1-60 s, save 5-120 s, log-uniform), times a truncated-Pareto spike now and then (1% of steps up to 10x,
5% of saves up to 5x). Only the end of each session is stepped through, from 3 x (slowest step + slowest
save + margin) + 10 x slowest step before the cutoff; the hours before are summarised by what the rule has
already observed (the last `--window` steps, one save per `--every` minutes). Periodic saves every `--every` minutes run for every rule alike (an OOM kill gives no
warning). All rules see the same draws (common random numbers) and check after every step; once a rule says
stop, the session saves (unless a periodic save just committed) and ends.

Rules:
  ours        stop when now + max(p95 step + p95 save + margin, max step + max save) > cutoff (`Deadline`; the
              simulated sessions have no epoch ends, so its epoch-end reserve, `budget(epoch_ends)`, is 0 here)
  timer       stop when now >= cutoff - margin: Lightning `Timer(duration=limit - margin)`, no save budget
  slurm-90s   stop when now >= cutoff - 90 s: SLURM `--signal=USR1@90` as Lightning uses it
  tf-6xstep   stop when now >= cutoff - 6 x mean step: TF `PreemptionCheckpointHandler`

Scenarios: `in-distribution` clips every step and save inside the simulated window to the largest one the
session had already observed (the premise of invariant 3: ours must miss nothing); `heavy-tail` does not clip,
so a record-slow step or save can land at the end.

A missed commit: the session hit the cutoff before the final checkpoint committed. Wasted time: cutoff minus
the end of the last step that a committed checkpoint holds (work lost after it, the final save, idle time).
The vectorised rule is checked against the real `Deadline` class on the first sessions (agreement reported).
Writes bench/results/deadline.json.
"""
import argparse, sys, time
from pathlib import Path
import numpy as np
sys.path.insert(0, str(Path(__file__).resolve().parents[2]))  # the clone's root, for bench.common
from bench.common import RESULTS, write_result
from letter8_tokenizer.session import Deadline

RULES = ['ours', 'timer', 'slurm-90s', 'tf-6xstep']

def table(rows, cols):
    w = {c: max(len(c), *(len(str(r[c])) for r in rows)) for c in cols}
    line = lambda r: '| ' + ' | '.join(str(r[c]).ljust(w[c]) for c in cols) + ' |'
    return '\n'.join([line({c: c for c in cols}), '|' + '|'.join('-' * (w[c] + 2) for c in cols) + '|', *map(line, rows)])

def log_uniform(rng, lo, hi, n): return np.exp(rng.uniform(np.log(lo), np.log(hi), n))

def truncated_pareto(rng, a, cap, shape):
    "Pareto(a) on [1, cap] by inverse CDF."
    u = rng.random(shape)
    return (1 - u * (1 - cap ** -a)) ** (-1 / a)

class Sessions:
    "Per-session step and save time distributions; draws vectorised over sessions."
    def __init__(self, rng, n):
        self.rng, self.n = rng, n
        self.step_med, self.step_sig = log_uniform(rng, 1, 60, n), rng.uniform(0.05, 0.3, n)
        self.save_med, self.save_sig = log_uniform(rng, 5, 120, n), rng.uniform(0.1, 0.4, n)
    def _draw(self, med, sig, p, cap, shape):
        x = med[:, None] * np.exp(sig[:, None] * self.rng.standard_normal(shape))
        spike = self.rng.random(shape) < p
        return np.where(spike, x * truncated_pareto(self.rng, 2.0, cap, shape), x)
    def steps(self, k): return self._draw(self.step_med, self.step_sig, 0.01, 10, (self.n, k))
    def saves(self, k): return self._draw(self.save_med, self.save_sig, 0.05, 5, (self.n, k))

def p95_full(ring):
    "np.percentile(ring, 95, axis=0) for a full window, via one partition."
    pos = 0.95 * (ring.shape[0] - 1)
    lo, frac = int(pos), pos - int(pos)
    part = np.partition(ring, [lo, lo + 1], axis=0)
    return part[lo] + (part[lo + 1] - part[lo]) * frac

def p95_max_ragged(vals, counts):
    "np.percentile(row[:count], 95) and max for NaN-padded rows."
    s = np.sort(vals, axis=1)  # NaN sorts last
    pos = 0.95 * (counts - 1)
    lo = np.floor(pos).astype(int)
    hi = np.minimum(lo + 1, counts - 1)
    r = np.arange(len(s))
    return s[r, lo] + (s[r, hi] - s[r, lo]) * (pos - lo), s[r, counts - 1]

def simulate(n, seed, clip, a, track=0):
    """Step all sessions through their last minutes, vectorised over the sessions still running.
    Each session starts `3 x (slowest step + slowest save + margin) + 10 x slowest step` before the cutoff (what it
    has seen so far), early enough that no rule can want to stop yet."""
    rng = np.random.default_rng(seed)
    S = Sessions(rng, n)
    L, T, M, W = a.limit_h * 3600, a.every * 60, a.margin, a.window
    hist_saves_n = int((L - 3600) // T)
    ring = S.steps(W).T.copy()                          # [W, n]: the last W steps before: all observed
    hist_saves = S.saves(hist_saves_n)
    step_cap, save_cap = ring.max(0), hist_saves.max(1)
    t = L - (3 * (step_cap + save_cap + M) + 10 * step_cap)
    saves = np.full((n, hist_saves_n + int(np.ceil((L - t.min()) / T)) + 2), np.nan)
    saves[:, :hist_saves_n] = hist_saves
    last_save = t - rng.uniform(0, T, n)                # when the last periodic save committed
    final_save = S.saves(1)[:, 0]                       # the stop-time save, same draw for every rule
    st = dict(gid=np.arange(n), t=t, last_save=last_save, progress=last_save - S.saves(1)[:, 0],
              final_save=np.minimum(final_save, save_cap) if clip else final_save, step_cap=step_cap,
              save_cap=save_cap, run_step_max=step_cap.copy(), run_save_max=save_cap.copy(), ring_sum=ring.sum(0),
              saves=saves, n_saves=np.full(n, hist_saves_n), ours_iter=np.full(n, -1), alive=np.ones(n, bool),
              **{f'decided_{r}': np.zeros(n, bool) for r in RULES}, **{f'missed_{r}': np.zeros(n, bool) for r in RULES},
              **{f'wasted_{r}': np.zeros(n) for r in RULES})
    out = {k: v.copy() for k, v in st.items()}
    trace = {'hist_steps': ring[:, :track].T.copy(), 'hist_saves': saves[:track, :hist_saves_n].copy(),
             'last_save': last_save[:track].copy(), 't0': st['t'][:track].copy(), 'steps': [], 'saves': []}
    ptr, it = 0, 0
    while len(st['gid']):
        g, t, k = st['gid'], st['t'], len(st['gid'])
        dt, sv = S._draw(S.step_med[g], S.step_sig[g], 0.01, 10, (k, 1))[:, 0], S._draw(S.save_med[g], S.save_sig[g], 0.05, 5, (k, 1))[:, 0]
        if clip: dt, sv = np.minimum(dt, st['step_cap']), np.minimum(sv, st['save_cap'])
        t_end = t + dt
        died = t_end > L                                # the cutoff falls inside this step
        st['ring_sum'] += dt - ring[ptr]
        ring[ptr] = dt
        ptr = (ptr + 1) % W
        st['run_step_max'] = np.maximum(st['run_step_max'], dt)
        due = ~died & (t_end - st['last_save'] >= T)
        died_saving = due & (t_end + sv > L)
        ok_save = due & ~died_saving
        st['progress'] = np.where(ok_save, t_end, st['progress'])
        idx = np.flatnonzero(ok_save)
        st['saves'][idx, st['n_saves'][idx]] = sv[idx]
        st['n_saves'][idx] += 1
        st['run_save_max'] = np.maximum(st['run_save_max'], np.where(ok_save, sv, 0))
        st['last_save'] = np.where(ok_save, t_end + sv, st['last_save'])
        st['t'] = t = np.where(ok_save, t_end + sv, t_end)
        dead = died | died_saving
        if track:
            mine = g < track
            for name, v in [('steps', dt), ('saves', np.where(ok_save, sv, np.nan))]:
                row = np.full(track, np.nan)
                row[g[mine]] = v[mine]
                trace[name].append(row)
        triggers = {'timer': t >= L - M, 'slurm-90s': t >= L - 90, 'tf-6xstep': t >= L - 6 * st['ring_sum'] / W}
        ours = np.zeros(k, bool)
        near = np.flatnonzero(~dead & ~st['decided_ours'] & (t + st['run_step_max'] + st['run_save_max'] + M > L))
        if len(near):
            window = ring[:, near]
            v95, vmax = p95_max_ragged(st['saves'][near], st['n_saves'][near])
            budget = np.maximum(p95_full(window) + v95 + M, window.max(0) + vmax)
            ours[near] = t[near] + budget > L
        triggers['ours'] = ours
        commits = ok_save | (t + st['final_save'] <= L)
        for r in RULES:
            dec, wasted = st[f'decided_{r}'], st[f'wasted_{r}']
            lost = dead & ~dec
            stop = ~dead & ~dec & triggers[r]
            st[f'missed_{r}'] |= lost | (stop & ~commits)
            wasted = np.where(lost, L - st['progress'], wasted)
            st[f'wasted_{r}'] = np.where(stop & commits, L - t_end, np.where(stop, L - st['progress'], wasted))
            st[f'decided_{r}'] = dec | stop | lost
        st['ours_iter'] = np.where(triggers['ours'] & (st['ours_iter'] < 0) & ~dead, it, st['ours_iter'])
        st['alive'] = ~dead & ~np.all([st[f'decided_{r}'] for r in RULES], axis=0)
        it += 1
        if st['alive'].sum() < 0.7 * k or not st['alive'].any():
            for key in out: out[key][st['gid']] = st[key]
            keep = st['alive']
            st = {key: v[keep] for key, v in st.items()}
            ring = ring[:, keep]
    trace['ours_iter'] = out['ours_iter'][:track]
    return dict(missed={r: out[f'missed_{r}'] for r in RULES}, wasted={r: out[f'wasted_{r}'] for r in RULES},
                first_check_stop=int((out['ours_iter'] == 0).sum()), iterations=it), trace

def replay_with_class(trace, a):
    "Feed the first sessions' draws to the real `Deadline` (fake clock); compare the iteration it stops at."
    L, T = a.limit_h * 3600, a.every * 60
    steps, saves = np.array(trace['steps']), np.array(trace['saves'])
    agree = 0
    for i in range(len(trace['ours_iter'])):
        now = [trace['t0'][i]]
        dl = Deadline(limit_s=L, start=0, margin_s=a.margin, save_every_s=T, window=a.window, clock=lambda: now[0])
        for x in trace['hist_steps'][i]: dl.record_step(x)
        for x in trace['hist_saves'][i]: dl.record_save(x)
        dl.last_save = trace['last_save'][i]
        stop_at = -1
        for k in range(len(steps)):
            if np.isnan(steps[k, i]): break
            now[0] += steps[k, i]
            dl.record_step(steps[k, i])
            if dl.should_save_periodic():
                now[0] += saves[k, i]
                dl.record_save(saves[k, i])
            if dl.should_stop():
                stop_at = k
                break
        agree += int(stop_at == trace["ours_iter"][i])
    return agree, len(trace['ours_iter'])

def main():
    p = argparse.ArgumentParser(description=__doc__.split('\n')[0])
    p.add_argument('--sessions', type=int, default=10_000)
    p.add_argument('--seed', type=int, default=0)
    p.add_argument('--limit_h', type=float, default=12.0, help='session limit (Kaggle: 12 h, 9 h on TPU)')
    p.add_argument('--margin', type=float, default=60.0, help='safety margin s (ours, and the timer rule)')
    p.add_argument('--every', type=float, default=30.0, help='periodic save interval, minutes')
    p.add_argument('--window', type=int, default=500, help='step/save times the rule remembers')
    p.add_argument('--check', type=int, default=300, help='sessions replayed through the real Deadline class')
    p.add_argument('--out', default=str(RESULTS/'deadline.json'))
    a = p.parse_args()
    t0 = time.perf_counter()
    res = dict(config={k: v for k, v in vars(a).items() if k != 'out'}, scenarios={})
    for sc, clip, seed in [('in-distribution', True, a.seed), ('heavy-tail', False, a.seed + 1)]:
        out, trace = simulate(a.sessions, seed, clip, a, track=a.check if clip else 0)
        mine = out['wasted']['ours'].mean()
        rows = [dict(rule=r, missed_commits=int(out['missed'][r].sum()),
                     missed_pct=f"{100 * out['missed'][r].mean():.2f}",
                     mean_wasted_s=f"{out['wasted'][r].mean():.1f}",
                     wasted_vs_ours=f"{out['wasted'][r].mean() / mine:.2f}x") for r in RULES]
        print(f"\n## {sc}: {a.sessions:,} sessions, {a.limit_h:g} h limit, margin {a.margin:g} s, periodic save every "
              f"{a.every:g} min\n")
        print(table(rows, ['rule', 'missed_commits', 'missed_pct', 'mean_wasted_s', 'wasted_vs_ours']))
        res['scenarios'][sc] = dict(rows=rows, first_check_stop=out['first_check_stop'], iterations=out['iterations'],
                                    wasted_p50={r: float(np.median(out['wasted'][r])) for r in RULES},
                                    wasted_p99={r: float(np.percentile(out['wasted'][r], 99)) for r in RULES})
        if clip:
            agree, k = replay_with_class(trace, a)
            print(f"\nreal Deadline class replayed on {k} sessions: same stop step in {agree}/{k}")
            res['class_agreement'] = dict(agree=agree, sessions=k)
    assert res['scenarios']['in-distribution']['rows'][0]['missed_commits'] == 0, 'ours missed a commit in distribution'
    res['seconds'] = time.perf_counter() - t0
    print(f"\n{res['seconds']:.1f} s")
    write_result(a.out, res)

if __name__ == '__main__': main()
