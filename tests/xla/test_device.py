"Device choice and the optimizer on XLA's CPU backend (the stand-in for a TPU)."
import torch
from letter8_tokenizer.config import Config, override
from letter8_tokenizer.distributed import pick_device, has_torch_xla
from letter8_tokenizer.model import Letter8
from letter8_tokenizer.train import make_optimizer

def test_xla_is_picked_when_asked():
    assert has_torch_xla()
    assert pick_device('xla').type == 'xla'
    assert pick_device('cpu') == torch.device('cpu')

def test_sasrec_and_the_retriever_take_xla_by_name():
    "They pick their device as the tokenizer does (`letter8 cf --device xla`, `letter8 retrieval --device xla`)."
    import numpy as np
    from letter8_tokenizer.cli import check_device
    from letter8_tokenizer.cf import CFTask
    from letter8_tokenizer.ids import IdScheme
    from letter8_tokenizer.retriever import RetrieverTask
    from letter8_tokenizer.sequences import synthetic_sequences, leave_one_out
    check_device('xla')
    split = leave_one_out(synthetic_sequences(np.arange(40)[:, None] % 4, n_users=30, min_len=4, max_len=8, seed=0), 6)
    assert CFTask(split, dict(dim=8, max_len=6), 'xla').device.type == 'xla'
    codes = np.stack([np.arange(40) % 4, np.arange(40) // 4], 1)
    assert RetrieverTask(IdScheme(codes, 10, 'ids'), split, dict(d_model=16, heads=2, max_len=6), 'xla').device.type == 'xla'

def test_auto_is_not_xla_on_the_cpu_backend():
    "'auto' takes XLA only when it reports TPU devices: its CPU backend is no reason to leave the eager CPU."
    assert pick_device('auto').type in ('cpu', 'cuda')

def test_optimizer_on_xla_is_not_fused():
    cfg = override(Config(), {'model.in_dim': 16, 'model.hidden': [32], 'model.e_dim': 8, 'model.codebook_size': 8})
    model = Letter8(cfg).to(pick_device('xla'))
    opt = make_optimizer(model)
    assert not opt.defaults.get('fused')
    loss = sum(p.sum() for p in model.parameters() if p.requires_grad)
    loss.backward(); opt.step()  # a fused AdamW would refuse the XLA parameters here
