"""FlopsCounter: floating-point operations of the cube operators that run on npu (matmul family).

Counts 2*M*K*N per matrix product (mm, addmm, bmm, baddbmm, addbmm and the matmuls inside
attention), as torch_npu counts its MM/BMM/FA operators. `traversed` counts every operator while
started; `recorded` skips operators run while paused (recomputation), giving MFU vs HFU numbers.
"""

import threading

from torch_npu import _C

__all__ = ["FlopsCounter"]


def _matmul_flops(name, inputs, outputs):
    base = name.split(".")[0]
    if base in ("aten::mm", "aten::bmm") and len(inputs) >= 2:
        a, b = inputs[0], inputs[1]
    elif base in ("aten::addmm", "aten::baddbmm", "aten::addbmm") and len(inputs) >= 3:
        a, b = inputs[1], inputs[2]
    else:
        return 0
    if a.dim() < 2 or b.dim() < 2:
        return 0
    batch = a.shape[0] if a.dim() == 3 else 1
    return 2 * batch * a.shape[-2] * a.shape[-1] * b.shape[-1]


class FlopsCounter:
    """The process-wide flops counter (a singleton): start, pause, resume, stop, get_flops."""

    _instance = None
    _lock = threading.Lock()

    def __new__(cls):
        with cls._lock:
            if cls._instance is None:
                cls._instance = super().__new__(cls)
                cls._instance._init()
            return cls._instance

    def _init(self):
        self._enabled = False
        self._paused = False
        self._recorded = 0
        self._traversed = 0
        self._hook = None

    def _on_op(self, name, inputs, outputs, device, start_ns, end_ns):
        flops = _matmul_flops(name, inputs, outputs)
        if flops and self._enabled:
            self._traversed += flops
            if not self._paused:
                self._recorded += flops

    def start(self):
        """Count from now on (recomputed operators too)."""
        self._enabled = True
        if self._hook is None:
            self._hook = _C._add_python_op_hook(self._on_op)

    def stop(self):
        """Stop counting and reset both counts to 0."""
        self._enabled = False
        self._paused = False
        if self._hook is not None:
            _C._remove_op_hook(self._hook)
            self._hook = None
        self._recorded = 0
        self._traversed = 0

    def pause(self):
        """Stop adding to the recorded (no-recomputation) count; the traversed count goes on."""
        self._paused = True

    def resume(self):
        self._paused = False

    def get_flops(self):
        """[recorded flops (without recomputation), traversed flops (with recomputation)]."""
        return [self._recorded, self._traversed]
