"""torch's context-parallel dispatcher, enabled with the ring-attention handlers of npu attention operators
(torch_npu.distributed.tensor.experimental._context_parallel._npu_attention holds them)."""

from torch.distributed.tensor import DTensor


def _npu_handlers():
    # imported when the dispatcher is enabled: at patch time torch's experimental package is still importing
    from torch_npu.distributed.tensor.experimental._context_parallel import _npu_attention

    return _npu_attention.handlers()


def npu_attention_in_context_parallel():
    from torch.distributed.tensor.experimental._context_parallel import _attention as cp

    if getattr(cp._enable_cp_dtensor_dispatcher, "__module__", "") == __name__:
        return False
    enable_torchs, disable_torchs = cp._enable_cp_dtensor_dispatcher, cp._disable_cp_dtensor_dispatcher

    def _enable_cp_dtensor_dispatcher():
        enable_torchs()
        dispatcher = DTensor._op_dispatcher
        dispatcher._custom_op_handlers = {**dispatcher._custom_op_handlers, **_npu_handlers()}

    def _disable_cp_dtensor_dispatcher():
        disable_torchs()
        dispatcher, ours = DTensor._op_dispatcher, _npu_handlers()
        dispatcher._custom_op_handlers = {k: v for k, v in dispatcher._custom_op_handlers.items() if k not in ours}

    cp._enable_cp_dtensor_dispatcher = _enable_cp_dtensor_dispatcher
    cp._disable_cp_dtensor_dispatcher = _disable_cp_dtensor_dispatcher
    return True
