"""A segment notebook on XLA, as on a Kaggle TPU: papermill runs `nbs/segment.ipynb` with `device: xla` in a kernel that
sees four XLA CPU devices (`CPU_NUM_DEVICES=4`). Its `Segment` picks the device first and turns SPMD on, so the tokenizer
trains on all four devices: `status.json` and the ledger say so, and the run ends `done`."""
import json, os
from pathlib import Path
from letter8_tokenizer.checkpoint import Checkpointer
from letter8_tokenizer.runner import execute_segment

NB = Path(__file__).resolve().parents[2]/'nbs'/'segment.ipynb'
TINY = {'optim.epochs': 2, 'optim.batch_size': 128, 'schedule.log_every_s': 3600.0}

def test_segment_trains_on_every_xla_device(tmp_path):
    params = dict(experiment='tpu', work_dir=str(tmp_path/'runs'), catalog_items=512, device='xla', overrides=json.dumps(TINY))
    env = dict(PJRT_DEVICE='CPU', CPU_NUM_DEVICES='4', IN_TEST='')
    rec = execute_segment(NB, tmp_path/'seg-1.ipynb', params, 'seg-1', execution_timeout=600, env=env)
    assert (rec.done, rec.stop_reason, rec.error) == (True, 'done', None), rec.log and Path(rec.log).read_text()[-3000:]
    status = json.loads((tmp_path/'runs'/'tpu'/'status.json').read_text())
    assert (status['done'], status['device'], status['xla_devices'], status['spmd']) == (True, 'xla:0', 4, True)
    last = Checkpointer(tmp_path/'runs'/'tpu'/'checkpoints').load()
    row = last.meta['ledger'][-1]
    assert last.step > 0 and (row['device'], row['xla_devices'], row['spmd']) == ('xla:0', 4, True)
