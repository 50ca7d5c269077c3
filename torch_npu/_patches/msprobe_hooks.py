"""msprobe sees an npu operator's backward as one operator, as on a card."""

import functools


def operator_backward_is_one_api():
    """While an npu operator's backward composition runs, msprobe's API hooks stay quiet (the operator's own
    backward hook still dumps its gradients)."""
    from msprobe.core.common.const import Const
    from msprobe.core.dump.hook_manager import BaseHookManager

    from torch_npu.ops.registration import in_operator_backward

    original = BaseHookManager._should_execute_hook
    if getattr(original, "__vnpu_patch__", False):
        return False

    @functools.wraps(original)
    def _should_execute_hook(self, hook_type, tid, is_forward=True):
        if hook_type == Const.API and in_operator_backward():
            return False
        return original(self, hook_type, tid, is_forward)

    _should_execute_hook.__vnpu_patch__ = True
    BaseHookManager._should_execute_hook = _should_execute_hook
    return True
