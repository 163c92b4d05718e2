"""The segment notebook from interactions to scored IDs, with real papermill kernels: SASRec learns the CF table
(`cf_path="sasrec"`), the tokenizer aligns to it, the export, then the retriever scores the run's IDs against
random and item IDs (`retrieval_ids`). Then the Kaggle way: a fresh working folder that only has the first run's
output as a read-only input (`resume_from`) finishes without training anything again."""
import json, shutil
from pathlib import Path
import numpy as np
import pytest
from letter8_tokenizer.runner import run_notebooks
from letter8_tokenizer.runfolder import read_status, RunPaths, stage_inputs
from letter8_tokenizer.data import synthetic_catalog
from letter8_tokenizer.sequences import synthetic_sequences
from letter8_tokenizer.export import verify_export

ROOT = Path(__file__).resolve().parent.parent
NB = ROOT/'nbs'/'segment.ipynb'
ENV = {'OMP_NUM_THREADS': 1, 'MKL_NUM_THREADS': 1}
CF = {'dim': 8, 'max_len': 10, 'epochs': 3, 'patience': 3, 'dropout': 0.1, 'lr': 0.005}
RETRIEVER = {'d_model': 16, 'heads': 2, 'enc_layers': 1, 'dec_layers': 1, 'ff': 32, 'epochs': 2, 'patience': 2, 'beam': 10,
             'valid_users': 100, 'batch_size': 64}


@pytest.fixture(scope='module')
def shop(tmp_path_factory):
    "A 300-item catalog and 400 users who walk its category tree, as LETTER's `.inter.json`."
    d = tmp_path_factory.mktemp('shop')
    synthetic_catalog(d/'catalog', n_items=300, dim=16, cf_dim=8, branching=(3, 4, 5), seed=0)
    users = synthetic_sequences(np.load(d/'catalog'/'labels.npy'), n_users=400, stay=0.7, wander=0.2, seed=0)
    (d/'shop.inter.json').write_text(json.dumps({f'u{u}': users[u].tolist() for u in range(len(users))}))
    return d


def params(shop, **kw):
    return dict(experiment='shop', items_path=str(shop/'catalog'/'items.npy'), cf_path='sasrec', interactions_path=str(shop/'shop.inter.json'),
                cf_overrides=json.dumps(CF), retrieval_ids='random:0,items', retriever_overrides=json.dumps(RETRIEVER), **kw)


@pytest.fixture(scope='module')
def first(shop, tmp_path_factory):
    out = tmp_path_factory.mktemp('first')
    return out, run_notebooks(NB, out, params(shop), max_segments=3, retries=0, env=ENV, progress=False)


def test_interactions_to_scored_ids(first):
    out, rep = first
    assert rep.status == 'done', rep
    run = RunPaths(Path(rep.run_dir))
    st = read_status(run.status)
    assert (st['status'], st['done']) == ('done', True)
    m = json.loads((run.cf/'cf_metrics.json').read_text())
    assert np.load(run.cf/'cf.npy').shape == (300, CF['dim']) and m['config']['dim'] == CF['dim']
    report = json.loads((run.retrieval/'retrieval.json').read_text())
    assert report['meta']['ids'] == [str(run.codes), 'random:0', 'items']
    assert [r['group'] for r in report['results']] == ['codes', 'random', 'item ids']
    assert all(np.isfinite(r['recall@10']) for r in report['results'])
    assert [g['group'] for g in st['retrieval']] == ['codes', 'random', 'item ids']
    verdict = json.loads((run.probe/'probe.json').read_text())['retrieval']  # the recommender's verdict leads the probe report
    assert verdict['headline'].startswith('these IDs retrieve') and 'than item ids' in verdict['message'] and st['ids_verdict'] == verdict['message']
    assert (run.probe/'probe.html').read_text().count('Retrieval: these IDs retrieve') == 1 and verify_export(run) is None
    nb = json.loads(Path(rep.segments[-1].notebook).read_text())
    shown = ''.join(''.join(o.get('data', {}).get('text/markdown', '')) for c in nb['cells'] if c['cell_type'] == 'code' for o in c.get('outputs', []))
    assert '| codes |' in shown and '| random |' in shown  # the results table is in the saved notebook


def test_done_run_is_not_run_again(first, shop):
    out, rep = first
    again = run_notebooks(NB, out, params(shop), max_segments=1, env=ENV, progress=False)
    assert again.status == 'done' and again.segments == [] and 'already done' in again.message


def test_kaggle_style_resume_trains_nothing_again(first, shop, tmp_path):
    "Only the first run's output, read-only, and a new working folder: CF, tokenizer and retriever all resume at their end."
    out, rep = first
    inp = tmp_path/'input'/'shop'
    shutil.copytree(rep.run_dir, inp)
    for p in inp.rglob('*'):
        if p.is_file(): p.chmod(0o444)
    rep2 = run_notebooks(NB, tmp_path/'working', params(shop, resume_from=str(inp/'checkpoints')), max_segments=2, retries=0, env=ENV, progress=False)
    assert rep2.status == 'done', rep2
    run2 = RunPaths(Path(rep2.run_dir))
    assert np.array_equal(np.load(run2.cf/'cf.npy'), np.load(inp/'cf'/'cf.npy'))
    rows = lambda r: [{k: v for k, v in x.items() if not k.endswith('_s')} for x in json.loads((r/'retrieval.json').read_text())['results']]
    assert rows(run2.retrieval) == rows(inp/'retrieval')  # reused, not retrained
    assert not (run2.retrieval/'checkpoints').exists()
    assert rep2.segments[0].end_step == rep.segments[-1].end_step  # the tokenizer resumed at its end


def test_missing_interactions_fail_before_anything_runs(shop, tmp_path):
    with pytest.raises(ValueError, match='set interactions_path'):
        stage_inputs(RunPaths(tmp_path), 'cf', 'sasrec')
    with pytest.raises(ValueError, match='set interactions_path'):  # an InputError, raised before any kernel starts
        run_notebooks(NB, tmp_path, dict(params(shop), interactions_path=''), max_segments=2, retries=1, env=ENV, progress=False)
    assert not (tmp_path/'shop'/'checkpoints').exists()
