"""Kaggle's service as it really is (issue 59): a chain against the local stand-in for each rule of the real service
that the kaggle client's source and Kaggle's issue tracker show, and that the stand-in keeps (nbs/12_standin.ipynb).

- a push is asynchronous: right after it, a status or output request that names no version answers for the
  previous session, so the chain names the version it pushed (`owner/slug/N`) in every status, log and output call;
- a dataset version takes time (meanwhile the status says the previous version is ready) and can fail; the chain
  waits for the version it made, and stops on a failed one;
- creating the checkpoint dataset is idempotent: a slug already in use gets a new version;
- a push whose sources are invalid still runs: the chain says so and waits for it;
- a push is never repeated while an earlier one may still run: a lost reply is looked up, and an earlier session
  still running is waited for;
- 429 replies carry Retry-After, which the chain honours;
- the admin-only pool is refused; `letter8 kaggle chain` asks for the machine the experiment was made for;
- a TPU session whose image has no torch_xla stops with a clear message, and is not pushed again;
- 403 means a wrong slug or no access, not bad credentials; a new kernel is named after its title.

In none of them a duplicate session, a stale checkpoint mounted, or a silent CPU run. Waits go through an injected
sleep that records them: no test depends on how long anything takes, only on the order things happen in.
"""
import json, os, sys, time, warnings
from pathlib import Path

import nbformat
import numpy as np
import pytest

for _k in [k for k in os.environ if k.startswith('KAGGLE_')]: os.environ.pop(_k)  # no token checked at import (see test_kaggle.py)
import contextlib, io  # noqa: E402
from letter8_tokenizer.chain import kaggle_config_dir  # noqa: E402
kaggle_config_dir()
with contextlib.redirect_stdout(io.StringIO()): import kaggle  # noqa: E402,F401

from letter8_tokenizer.standin import KaggleStandin  # noqa: E402
from letter8_tokenizer.chain import (KaggleAccessError, KaggleChain, KaggleChainError, KaggleKernelError, kaggle_api,  # noqa: E402
                                     experiment_chain)
from letter8_tokenizer.kaggle_env import TPU_WITHOUT_XLA  # noqa: E402
from letter8_tokenizer.cli import main  # noqa: E402

sys.path.insert(0, str(Path(__file__).parent))
from test_kaggle import PARAMS, BODY, KEY, make_fake_segment, local_run, env, standin, fake_nb  # noqa: E402,F401 (fixtures)

KERNEL, DATASET, SLUG = 'tester/letter8-segment', 'tester/letter8-checkpoints', 'letter8-checkpoints'
STEPS = 12  # at 0.05 s a step and 0.3 s a session, no session can train them all: every chain has two sessions at least


class Sleeper:
    "An injected sleep: records every wait asked for, and sleeps a moment only (the stand-in's sessions run meanwhile)."
    def __init__(self): self.waits = []
    def __call__(self, s): self.waits.append(s); time.sleep(min(s, 0.05))


@pytest.fixture(scope='module')
def reference(tmp_path_factory):
    d = tmp_path_factory.mktemp('ref')
    local_run(make_fake_segment(d/'segment.ipynb'), d/'work', overrides=json.dumps({'steps': STEPS, 'step_s': 0.0}), catalog_items=64)
    return np.load(d/'work'/'run'/'codes'/'codes.npy')


def chain_for(env, standin, nb, state='chain', **kw):
    args = dict(experiment='run', params={'overrides': json.dumps({'steps': STEPS, 'step_s': 0.05}), 'catalog_items': 64},
                accelerator='T4 x2', session_limit_s=0.3, margin_s=0.0, timeout_s=60, poll_s=0.2, endpoint=standin.url,
                sleep=Sleeper(), log=[].append)
    args.update(kw)
    return KaggleChain(env/state, nb, KERNEL, DATASET, **args)


def versions(standin): return standin.kernels['letter8-segment']['versions']


def assert_one_session_per_push_and_fresh_mounts(standin, state):
    "No duplicate session: one push per session of the chain; each session after the first mounted a newer version, the last the newest."
    assert len(standin.pushes) == len(versions(standin)) == state['session'], state['history']
    mounted = [v['mounted'].get(SLUG) for v in versions(standin)]
    ready = [i + 1 for i, st in enumerate(standin.datasets[SLUG]['states']) if st['status'] == 'READY']
    assert mounted[0] is None and mounted[1:] == sorted(set(mounted[1:])) and mounted[-1] == ready[-1], (mounted, ready)


def test_stale_status_after_a_push(env, standin, fake_nb, reference):
    "Right after a push the kernel's status is the previous session's; every call names the version pushed."
    standin.stale_polls = 3
    state = chain_for(env, standin, fake_nb).run()
    assert state['done'] and state['session'] >= 2, state['history']
    np.testing.assert_array_equal(np.load(env/'chain'/'codes'/'codes.npy'), reference)
    assert_one_session_per_push_and_fresh_mounts(standin, state)
    steps = [h['step'] for h in state['history']]
    assert steps == sorted(set(steps)) and steps[-1] == STEPS  # every session made progress: none read an older session
    for method in ('GetKernelSessionStatus', 'ListKernelSessionOutput'):
        labels = [b.get('versionLabel') for b in standin.bodies(method)]
        assert labels and all(labels), (method, labels)  # never the unversioned, stale answer
    assert {f'v{h["kernel_version"]}' for h in state['history']} <= {b['versionLabel'] for b in standin.bodies('ListKernelSessionOutput')}
    assert len(standin.bodies('ListKernelSessionOutput')) > len(state['history'])  # the output came in pages
    # the rule itself: a new push, then the kernel's status without a version is the finished, previous session's
    api = kaggle_api(standin.url)
    r = api.kernels_push(str(env/'chain'/'kernel'))
    assert str(api.kernels_status(KERNEL).status).endswith('COMPLETE')
    assert str(api.kernels_status(f'{KERNEL}/{r.version_number}').status).split('.')[-1] in ('QUEUED', 'RUNNING', 'COMPLETE')
    assert standin.bodies('GetKernelSessionStatus')[-2].get('versionLabel') is None


def test_dataset_version_slow_then_ready(env, standin, fake_nb, reference):
    "A new dataset version is processing for a while, with the previous one 'ready': the chain waits for its own."
    standin.dataset_polls = 5
    sleep = Sleeper()
    state = chain_for(env, standin, fake_nb, sleep=sleep).run()
    assert state['done'], state['history']
    np.testing.assert_array_equal(np.load(env/'chain'/'codes'/'codes.npy'), reference)
    assert_one_session_per_push_and_fresh_mounts(standin, state)
    mounted = [v['mounted'].get(SLUG) for v in versions(standin)]
    assert mounted[1:] == list(range(1, state['session'])), mounted  # session k mounted version k - 1, the newest
    assert len(standin.calls('GetDatasetStatus')) >= 5 * (state['session'] - 1)


def test_dataset_version_that_fails(env, standin, fake_nb, reference):
    "A version that fails stops the chain before the next push (which would mount older checkpoints); run again, it uploads anew."
    standin.fail_dataset_versions = {1}
    with pytest.raises(KaggleChainError, match='version 1 failed'):
        chain_for(env, standin, fake_nb).run()
    assert len(standin.pushes) == 1  # no session pushed onto the failed version
    s = json.loads((env/'chain'/'chain.json').read_text())
    assert (s['phase'], s['session'], s['dataset_version'], s['upload']) == ('upload', 1, 0, None)
    state = chain_for(env, standin, fake_nb).run()
    assert state['done'], state['history']
    np.testing.assert_array_equal(np.load(env/'chain'/'codes'/'codes.npy'), reference)
    assert [v['mounted'].get(SLUG) for v in versions(standin)][1] == 2  # the new version, not the failed one
    assert [st['status'] for st in standin.datasets[SLUG]['states']][:2] == ['FAILED', 'READY']
    assert len(standin.pushes) == state['session']


def test_existing_dataset_slug_gets_a_version(env, standin, fake_nb, reference):
    "A fresh state folder and a dataset slug already in use (a crash after creating it): a new version, never a stale mount."
    old = env/'old-ckpt'
    (old/'checkpoints'/'step-000000030').mkdir(parents=True)
    (old/'checkpoints'/'step-000000030'/'manifest.json').write_text(json.dumps({'step': 30, 'files': {}}))
    (old/'dataset-metadata.json').write_text(json.dumps({'id': DATASET, 'title': 'old checkpoints', 'licenses': [{'name': 'CC0-1.0'}]}))
    api = kaggle_api(standin.url)
    assert api.dataset_create_new(str(old), quiet=True, dir_mode='zip').status == 'ok'
    state = chain_for(env, standin, fake_nb).run()
    assert state['done'], state['history']
    np.testing.assert_array_equal(np.load(env/'chain'/'codes'/'codes.npy'), reference)
    assert len(standin.calls('CreateDataset')) == 1  # ours above; the chain only added versions
    assert len(standin.calls('CreateDatasetVersion')) == state['session'] - 1
    assert all(v['mounted'].get(SLUG) != 1 for v in versions(standin))  # the old step 30 was never mounted
    assert_one_session_per_push_and_fresh_mounts(standin, state)


def test_invalid_sources_still_run(env, standin, fake_nb, reference):
    "A source Kaggle cannot attach is named in the reply and the session runs anyway: the chain warns, and waits for it."
    logs = []
    with pytest.warns(UserWarning, match="could not attach tester/no-such-items"):
        state = chain_for(env, standin, fake_nb, dataset_sources=['tester/no-such-items'], log=logs.append).run()
    assert state['done'] and any('warning: session 1: Kaggle could not attach tester/no-such-items' in l for l in logs)
    assert state['invalid_sources'] == ['tester/no-such-items']
    np.testing.assert_array_equal(np.load(env/'chain'/'codes'/'codes.npy'), reference)
    assert len(standin.pushes) == state['session']  # waited for: not pushed a second time


def test_lost_push_reply_is_looked_up(env, standin, fake_nb):
    "The push landed but its reply was lost (HTTP 502): the chain finds the version it made, and does not push again."
    standin.fail_after['SaveKernel'] = [502]
    logs = []
    state = chain_for(env, standin, fake_nb, params={'overrides': json.dumps({'steps': 3, 'step_s': 0.0})},
                      session_limit_s=0, log=logs.append).run()
    assert state['done'] and state['session'] == 1
    assert len(standin.calls('SaveKernel')) == len(standin.pushes) == 1
    assert any('the earlier push landed as version 1' in l for l in logs), logs


def test_no_push_while_an_earlier_session_runs(env, standin, fake_nb):
    "A session of the kernel still running (pushed from another state folder): the chain waits for it before pushing."
    kdir = env/'earlier'
    nb = nbformat.v4.new_notebook(cells=[nbformat.v4.new_code_cell('import time; time.sleep(2)')])
    nb.metadata['kernelspec'] = {'name': 'python3', 'display_name': 'Python 3', 'language': 'python'}
    kdir.mkdir(); nbformat.write(nb, str(kdir/'seg.ipynb'))
    (kdir/'kernel-metadata.json').write_text(json.dumps({'id': KERNEL, 'title': 'Letter8 Segment', 'code_file': 'seg.ipynb',
                                                         'language': 'python', 'kernel_type': 'notebook'}))
    seen, push = [], standin._api_SaveKernel
    standin._api_SaveKernel = lambda b: (seen.append([v['status'] for v in versions(standin)] if 'letter8-segment' in standin.kernels
                                                     else []), push(b))[1]
    kaggle_api(standin.url).kernels_push(str(kdir))
    logs = []
    state = chain_for(env, standin, fake_nb, params={'overrides': json.dumps({'steps': 3, 'step_s': 0.0})},
                      session_limit_s=0, log=logs.append).run()
    assert state['done'] and state['kernel_version'] == 2
    assert seen == [[], ['COMPLETE']], seen  # the chain pushed only once version 1 had ended
    assert any('version 1 is' in l and 'waiting for it to end' in l for l in logs), logs


def test_429_with_retry_after(env, standin, fake_nb):
    "429 replies carry Retry-After: the chain waits that long, then goes on."
    standin.fail_next.update(GetKernelSessionStatus=[(429, {'Retry-After': '7'})], ListKernelSessionOutput=[(429, {'Retry-After': '3'})],
                             GetKernel=[(429, {'Retry-After': '11'})])
    sleep = Sleeper()
    state = chain_for(env, standin, fake_nb, params={'overrides': json.dumps({'steps': 3, 'step_s': 0.0})},
                      session_limit_s=0, sleep=sleep).run()
    assert state['done'] and len(standin.pushes) == 1
    assert {11.0, 7.0, 3.0} <= set(sleep.waits), sleep.waits
    assert not any(standin.fail_next.values())


def test_admin_only_pool_and_the_t4_names(env, standin, fake_nb):
    "The admin-only pool is refused before any request; 'T4', 'GPU' and 'T4 x2' all ask for NvidiaTeslaT4, two T4s."
    with pytest.raises(ValueError, match="internal pool of Kaggle's administrators"):
        chain_for(env, standin, fake_nb, accelerator='NvidiaTeslaT4Highmem')
    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        rc = main(['kaggle', 'plan', '--step-s', '1', '--steps-left', '100', '--accelerator', 'NvidiaTeslaT4Highmem'])
    assert rc == 2 and "--accelerator 'NvidiaTeslaT4Highmem'" in err.getvalue() and 'T4 x2' in err.getvalue()
    assert not standin.requests
    for name in ('T4', 'GPU', 'T4 x2'):
        assert chain_for(env, standin, fake_nb, state=f'c-{name}', accelerator=name).machine == 'GPU T4 x2 (NvidiaTeslaT4: two T4 GPUs)'
    kdir = env/'highmem'
    kdir.mkdir()
    make_fake_segment(kdir/'seg.ipynb')
    (kdir/'kernel-metadata.json').write_text(json.dumps({'id': KERNEL, 'title': 'Letter8 Segment', 'code_file': 'seg.ipynb',
                                                         'language': 'python', 'kernel_type': 'notebook', 'enable_gpu': True}))
    with pytest.raises(Exception, match='400|internal pool'):  # the service refuses it too
        kaggle_api(standin.url).kernels_push(str(kdir), acc='NvidiaTeslaT4Highmem')
    assert not standin.pushes


TPU_PROBE = '''import sys; sys.modules['torch_xla'] = None  # the standard image: no torch_xla (the stand-in runs sessions here, which may have it)
from letter8_tokenizer.kaggle_env import probe_environment
probe_environment(device=device)  # the segment notebook's environment cell: refuses a TPU session without torch_xla
'''


def test_tpu_image_without_torch_xla(env, standin):
    "A TPU experiment whose notebook and metadata pin a CPU/GPU image: pins dropped, and the session without torch_xla stops, once."
    folder = env/'experiments'/'on-tpu'
    folder.mkdir(parents=True)
    nb = nbformat.v4.new_notebook(cells=[nbformat.v4.new_code_cell(PARAMS + 'device: str = "auto"\n', metadata={'tags': ['parameters']}),
                                         nbformat.v4.new_code_cell(TPU_PROBE), nbformat.v4.new_code_cell(BODY)])
    nb.metadata['kernelspec'] = {'name': 'python3', 'display_name': 'Python 3', 'language': 'python'}
    nb.metadata['kaggle'] = {'dockerImageVersionId': 31040, 'isGpuEnabled': True}  # left by a GPU notebook
    nbformat.write(nb, str(folder/'on-tpu.ipynb'))
    (folder/'parameters.yaml').write_text('experiment: run\ncatalog_items: 64\n')
    (folder/'kernel-metadata.json').write_text(json.dumps({
        'id': KERNEL, 'title': 'Letter8 Segment', 'code_file': 'on-tpu.ipynb', 'language': 'python', 'kernel_type': 'notebook',
        'enable_tpu': True, 'machine_shape': 'TpuV5E8', 'enable_internet': True, 'docker_image': 'gcr.io/kaggle-images/python'}))
    logs = []
    ch = experiment_chain(folder, DATASET, endpoint=standin.url, log=logs.append, poll_s=0.2, sleep=Sleeper(), timeout_s=60)
    assert (ch.accelerator, ch.internet) == ('TpuV5E8', True)  # the machine the experiment was made for
    with pytest.raises(KaggleKernelError, match=TPU_WITHOUT_XLA) as e: ch.run()
    assert 'docker_image' in str(e.value) and 'kaggle-cli issue 1197' in str(e.value)
    assert len(standin.pushes) == 1  # error_retries=1, yet not pushed again: it would land on the same image
    p = standin.pushes[0]
    assert p['enableTpu'] and p['machineShape'] == 'TpuV5E8' and not p.get('dockerImage')
    assert 'dockerImageVersionId' not in json.loads(p['text'])['metadata'].get('kaggle', {})
    assert 'device = "xla"' in json.loads(p['text'])['cells'][1]['source']  # the chain asks for the TPU, never a CPU fallback
    assert versions(standin)[0]['image'] == 'tpu-vm' and not list(versions(standin)[0]['working'].rglob('step-*'))  # nothing trained
    s = json.loads((folder/'chain'/'chain.json').read_text())
    assert (s['phase'], s['stopped']) == ('push', 'TPU image without torch_xla')
    assert any('dropped metadata.kaggle.dockerImageVersionId' in l for l in logs), logs  # (the chain writes no docker_image)


def test_kaggle_chain_uses_the_experiments_accelerator(env, standin, monkeypatch):
    "`letter8 kaggle chain` asks for the machine `letter8 new` wrote into kernel-metadata.json, unless --accelerator says otherwise."
    made = []
    monkeypatch.setattr(KaggleChain, 'run', lambda self: made.append(self) or {'phase': 'done'})
    for acc in ('TPU', 'none', 'T4'):
        with warnings.catch_warnings():
            warnings.simplefilter('ignore')
            assert main(['new', f'exp-{acc.lower()}', '--dest', str(env/'experiments'), '--username', 'tester', '--accelerator', acc]) == 0
        assert main(['kaggle', 'chain', '--experiment', str(env/'experiments'/f'exp-{acc.lower()}'), '--dataset', DATASET,
                     '--endpoint', standin.url]) == 0
    assert [(c.accelerator, c.internet) for c in made] == [('TpuV5E8', True), ('none', False), ('NvidiaTeslaT4', True)]
    assert main(['kaggle', 'chain', '--experiment', str(env/'experiments'/'exp-tpu'), '--dataset', DATASET, '--accelerator', 'T4 x2']) == 0
    assert made[-1].accelerator == 'T4 x2' and made[-1].machine.startswith('GPU T4 x2')
    meta = json.loads((env/'experiments'/'exp-tpu'/'kernel-metadata.json').read_text())
    assert meta['enable_internet'] and 'docker_image' not in meta  # the pushed folder installs (internet on) on the TPU image


def test_403_is_a_wrong_slug_not_credentials(env, standin, fake_nb):
    "Kaggle answers 403 for a kernel this account cannot see: the error says wrong slug or no access, not credentials."
    ch = KaggleChain(env/'other', fake_nb, 'someone-else/letter8-segment', DATASET, endpoint=standin.url, sleep=Sleeper(),
                     log=[].append, accelerator='none')
    with pytest.raises(KaggleAccessError, match='wrong kernel slug or no access') as e: ch.run()
    assert 'refused the credentials' not in str(e.value) and not standin.pushes
    never = KaggleChain(env/'never', fake_nb, 'tester/never-pushed', DATASET, endpoint=standin.url, sleep=Sleeper(), log=[].append)
    with pytest.raises(KaggleAccessError, match=r'kernels status tester/never-pushed/3: wrong kernel slug or no access'):
        never._status(3)
    assert never.latest_version() is None  # before the first push: no version, not an error


def test_a_new_kernel_is_named_after_its_title(env, standin, fake_nb, monkeypatch):
    "Kaggle names a new kernel after its title: a title that does not resolve to the slug stops the chain, naming both."
    import letter8_tokenizer.chain as chain_mod
    monkeypatch.setattr(chain_mod, 'kernel_title', lambda slug: 'Something Else')
    with warnings.catch_warnings():
        warnings.simplefilter('ignore')  # kernel_metadata warns about the title too
        with pytest.raises(KaggleChainError, match='saved the push as /code/tester/something-else, not tester/letter8-segment'):
            chain_for(env, standin, fake_nb).run()
    assert 'something-else' in standin.kernels and 'letter8-segment' not in standin.kernels
