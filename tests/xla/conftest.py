"""The XLA tests run in their own environment (`make test-xla`: torch 2.9.0 + torch-xla 2.9.0, `PJRT_DEVICE=CPU`); `make test`
leaves this folder out. torch_xla's device is created here, before any test runs autograd on the CPU: after a CPU backward,
the first XLA backward in the process fails an assert in torch's autograd engine."""
import torch_xla

XLA = torch_xla.device()
