"""A disk that fits (issue 60): before step 0 a segment estimates what the run will still write into its folder (the kept
checkpoints and the one being written, metrics, the export, the catalog, SASRec's and the retriever's parts) and refuses
a run that cannot fit its disk's free space, with the numbers and the fix, leaving the folder as it was. The estimate is
checked against what real tiny runs write at their peak (measured at each checkpoint commit, before the oldest
checkpoint goes, and at the end), fresh and resumed."""
import json
from pathlib import Path
import numpy as np
import pytest
import letter8_tokenizer.runfolder as runfolder
import letter8_tokenizer.train as train
from letter8_tokenizer.checkpoint import Checkpointer
from letter8_tokenizer.params import InputError, check_experiment, segment_config
from letter8_tokenizer.runfolder import run_paths, stage_inputs, disk_need, folder_bytes, human_bytes, read_status, interaction_counts
from letter8_tokenizer.stages import run_stages
from letter8_tokenizer.data import synthetic_catalog
from letter8_tokenizer.sequences import synthetic_sequences

OVERRIDES = {'optim.epochs': 10, 'optim.batch_size': 100}  # 500 items: 5 steps an epoch, 50 steps, a checkpoint every 10


def params(wd, **kw):
    return dict(work_dir=str(wd), experiment='tiny', catalog_items=500, overrides=json.dumps(OVERRIDES), session_limit_s=900.0, **kw)


def estimate(prm) -> dict:
    "`disk_need` as the segment computes it, before it opens anything."
    p = check_experiment(prm)
    run = run_paths(p['work_dir'], p['experiment'], create=False)
    inputs = stage_inputs(run, p['items_path'], p['cf_path'], p['interactions_path'], p['retrieval_ids'], p['catalog_items'])
    return disk_need(run, p, segment_config(p['config_path'], p['overrides']), inputs)


def snapshot(root:Path) -> dict:
    return {str(f.relative_to(root)): (f.stat().st_size, f.stat().st_mtime_ns) for f in root.rglob('*') if f.is_file()}


@pytest.fixture
def peak(monkeypatch):
    "`peak['sizes']`: bytes of the folder `peak['root']` at each checkpoint commit (the old checkpoint not yet removed)."
    state, orig = {'root': None, 'sizes': []}, Checkpointer._after_commit
    def measured(self, final):
        if state['root'] is not None: state['sizes'].append(folder_bytes(state['root']))
        return orig(self, final)
    monkeypatch.setattr(Checkpointer, '_after_commit', measured)
    return state


def top(peak) -> int:
    return max(peak['sizes'] + [folder_bytes(peak['root'])])


def test_refused_before_step_0_nothing_written(tmp_path, monkeypatch):
    need = estimate(params(tmp_path))
    monkeypatch.setattr(runfolder, 'disk_free', lambda path: 2**20)
    with pytest.raises(InputError) as e: run_stages(params(tmp_path))
    msg = str(e.value)
    assert f"needs about {human_bytes(sum(need.values()))} more disk" in msg and 'but its disk has 1.0 MiB free' in msg
    assert all(f"{part} {human_bytes(b)}" in msg for part, b in need.items()), (need, msg)
    assert f"the run {tmp_path/'tiny'} " in msg and 'nothing was written' in msg
    assert '"schedule.keep": 2' in msg and '--work-dir' in msg and '/kaggle/working holds about 20 GB' in msg
    assert list(tmp_path.iterdir()) == []  # not even the run folder


def test_check_names_its_parts(tmp_path):
    "The estimate builds the model on torch's meta device and opens no data: it names each part and touches nothing."
    need = estimate(params(tmp_path))
    assert {'catalog', 'training metrics', 'tokenizer checkpoints', 'export'} == set(need) and all(v > 0 for v in need.values()), need
    assert list(tmp_path.iterdir()) == []  # not even the run folder


def test_estimate_within_1_5_of_a_tiny_run(tmp_path, peak):
    est = sum(estimate(params(tmp_path)).values())
    peak['root'] = tmp_path/'tiny'
    got = run_stages(params(tmp_path))
    assert [r.status for r in got.values()] == ['skipped', 'done', 'done', 'skipped']
    assert len(peak['sizes']) >= 5, peak
    assert top(peak) <= est <= 1.5 * top(peak), (est, top(peak))


def test_resumed_run_counts_only_what_is_to_come(tmp_path, monkeypatch, peak):
    orig = train.train_segment
    monkeypatch.setattr(train, 'train_segment', lambda *a, **kw: orig(*a, max_steps=25, **kw))
    assert run_stages(params(tmp_path))['train'].status == 'step_limit'
    monkeypatch.setattr(train, 'train_segment', orig)
    run = tmp_path/'tiny'
    assert read_status(run)['step'] == 25
    fresh, resumed = estimate(params(tmp_path/'other')), estimate(params(tmp_path))
    assert 'catalog' not in resumed and sum(resumed.values()) < sum(fresh.values()) - folder_bytes(run/'checkpoints')
    assert resumed['training metrics'] == fresh['training metrics'] // 2  # 25 of 50 steps left
    before, need = snapshot(run), sum(resumed.values())
    monkeypatch.setattr(runfolder, 'disk_free', lambda path: need - 1)
    with pytest.raises(InputError, match=f"needs about {human_bytes(need)} more disk"): run_stages(params(tmp_path))
    assert snapshot(run) == before  # refused: the run folder as it was, no lock, no status written
    monkeypatch.setattr(runfolder, 'disk_free', lambda path: need)  # just enough
    size0, peak['root'] = folder_bytes(run), run
    got = run_stages(params(tmp_path))
    assert got['train'].status == 'done' and got['export'].status == 'done'
    grew = top(peak) - size0
    assert grew <= need <= 1.5 * grew, (need, grew)


def test_cf_and_retriever_parts_within_1_5(tmp_path, peak, monkeypatch):
    """With SASRec learning the CF table and the retriever scoring three schemes, the estimate still holds. Both commit
    every 20 steps here: a run longer than their 10-minute save interval keeps `keep` full checkpoints, as counted, where
    a tiny one would keep only its step-0 weights and its last."""
    from letter8_tokenizer.cf import CFTask
    from letter8_tokenizer.retriever import RetrieverTask
    for task in (CFTask, RetrieverTask): monkeypatch.setattr(task, 'save_every_steps', 20)
    d = tmp_path/'shop'
    synthetic_catalog(d, n_items=300, dim=16, cf_dim=8, branching=(3, 4, 5), seed=0)
    users = synthetic_sequences(np.load(d/'labels.npy'), n_users=400, stay=0.7, wander=0.2, seed=0)
    (d/'shop.inter.json').write_text(json.dumps({f'u{u}': users[u].tolist() for u in range(len(users))}))
    cf = {'dim': 8, 'max_len': 10, 'epochs': 3, 'patience': 3, 'dropout': 0.1, 'lr': 0.005}
    ret = {'d_model': 16, 'heads': 2, 'enc_layers': 1, 'dec_layers': 1, 'ff': 32, 'epochs': 2, 'patience': 2, 'beam': 10,
           'valid_users': 100, 'batch_size': 64}
    prm = dict(work_dir=str(tmp_path/'w'), experiment='shop', items_path=str(d/'items.npy'), cf_path='sasrec',
               interactions_path=str(d/'shop.inter.json'), cf_overrides=json.dumps(cf), retrieval_ids='random:0,items',
               retriever_overrides=json.dumps(ret), overrides=json.dumps({'optim.epochs': 6, 'optim.batch_size': 50}),
               session_limit_s=900.0)
    assert interaction_counts(d/'shop.inter.json') == (400, sum(len(u) for u in users))
    need = estimate(prm)
    assert {'CF stage', 'retriever', 'tokenizer checkpoints', 'export'} <= set(need), need
    peak['root'] = tmp_path/'w'/'shop'
    got = run_stages(prm)
    assert all(r.done for r in got.values()), got
    assert top(peak) <= sum(need.values()) <= 1.5 * top(peak), (need, top(peak))
