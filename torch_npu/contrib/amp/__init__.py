"""torch_npu.contrib.amp: apex-style mixed precision (amp.initialize / amp.scale_loss).

The real torch_npu has no contrib.amp (on Ascend this API comes from Ascend's apex); vnpu provides it
for code written against it and warns once that it is a vnpu extension. Opt levels:

- O0: float32 training, static loss scale 1.
- O1: the model's forward runs under torch.autocast("npu", float16) (torch_npu's autocast lists);
  parameters stay float32; dynamic loss scaling.
- O2: the model is cast to float16 except batch norms, its forward casts float inputs to float16 and
  outputs to float32; the optimizer updates float32 master copies of the parameters, which are
  copied back after every step; dynamic loss scaling.
- O3: pure float16 (batch norms too), static loss scale 1.

Dynamic loss scaling starts at 2**16, halves on an overflow (and skips that step), doubles after
2000 clean steps, within [min_loss_scale, max_loss_scale].
"""

from torch_npu.contrib.amp.frontend import initialize, load_state_dict, master_params, scale_loss, state_dict

__all__ = ["initialize", "scale_loss", "master_params", "state_dict", "load_state_dict"]
