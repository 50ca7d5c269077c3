"""NpuPreGenDropout: dropout whose bit masks are drawn ahead, for each registered probability one large mask
(npu_dropout_gen_mask of max_mb x 1024 x 1024 elements) that the calls of one forward consume in turn; the
model's forward hook draws the next large mask, its pre-hook orders the compute stream after the mask stream.
Used through NpuFairseqDropout-style models that call enable_dropout_ensemble(model) once."""

import math

import torch

import torch_npu
from torch_npu.ops.dropout_masks import _mask_bytes
from torch_npu.utils._error_code import ErrCode, ops_error

__all__ = []

_MIB = 1024 * 1024


class _PreGenDropoutTask:
    """The pre-drawn mask of one probability on one device and how far this forward has consumed it."""

    def __init__(self, device, p):
        self.device = device
        self.p = p
        self.mask = None
        self.idx = 0
        self.max_mb = 16

    def draw(self):
        self.mask = torch_npu.npu_dropout_gen_mask(
            [self.max_mb, 1024, 1024], p=self.p, dtype=torch.float32, device=self.device
        )
        self.idx = 0


class NpuPreGenDropout(torch.nn.Dropout):
    """Dropout with probability p from the pre-drawn mask of p (see enable_dropout_ensemble).

    Called with a tensor: the tensor with the next slice of the mask applied. Called with
    [shape, dtype, device]: that slice of the mask itself (not consumed)."""

    prob = set()
    task_dict = {}
    dropout_stream = None

    def __init__(self, p, module_name=None):
        super().__init__(p)
        self.module_name = module_name
        NpuPreGenDropout.prob.add(p)

    def forward(self, x):
        if isinstance(x, torch.Tensor):
            shape, apply_mask, result = x.shape, True, x
        elif isinstance(x, list):
            shape, apply_mask, result = x[0], False, None
        else:
            raise RuntimeError("input type error!" + ops_error(ErrCode.TYPE))
        if self.p == 0:
            return result
        if self.p not in NpuPreGenDropout.task_dict:
            raise RuntimeError(
                "NpuPreGenDropout input prob error! "
                f"You Only Register prob:{NpuPreGenDropout.task_dict.keys()}" + ops_error(ErrCode.VALUE)
            )
        mask_len = _mask_bytes(math.prod(shape))
        task = NpuPreGenDropout.task_dict[self.p]
        mask = task.mask[task.idx : task.idx + mask_len]
        if not apply_mask:
            return mask
        task.idx += mask_len
        if task.idx > task.mask.numel():  # this forward needs more: reuse from the start, draw more next time
            task.max_mb = max(task.idx * 8 // _MIB + 1, task.max_mb)
            mask = task.mask[:mask_len]
        return torch_npu.npu_dropout_do_mask(x, mask, self.p)[0]

    @classmethod
    def enable_dropout_ensemble(cls, model):
        """Draws the masks of every registered probability and keeps them drawn after each forward of model."""
        if cls.dropout_stream is None:
            cls.dropout_stream = torch.npu.Stream()

        def wait_for_masks(module, inputs):
            torch.npu.current_stream().wait_stream(cls.dropout_stream)

        def draw_next_masks(module, inputs, outputs):
            for task in cls.task_dict.values():
                task.draw()

        model.register_forward_pre_hook(wait_for_masks)
        device = f"npu:{torch.npu.current_device()}"
        for p in cls.prob:
            task = _PreGenDropoutTask(device, p)
            task.draw()
            cls.task_dict[p] = task
        model.register_forward_hook(draw_next_masks)
