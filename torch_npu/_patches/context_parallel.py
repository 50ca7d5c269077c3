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

    replaced = {}  # the handlers ours stand in for while context parallelism is on (e.g. tensor parallel ones)

    def _enable_cp_dtensor_dispatcher():
        enable_torchs()
        dispatcher, ours = DTensor._op_dispatcher, _npu_handlers()
        replaced.clear()
        replaced.update({k: v for k, v in dispatcher._custom_op_handlers.items() if k in ours})
        dispatcher._custom_op_handlers = {**dispatcher._custom_op_handlers, **ours}

    def _disable_cp_dtensor_dispatcher():
        disable_torchs()
        handlers = DTensor._op_dispatcher._custom_op_handlers
        for op in _npu_handlers():
            if op in replaced:
                handlers[op] = replaced[op]
            else:
                handlers.pop(op, None)

    cp._enable_cp_dtensor_dispatcher = _enable_cp_dtensor_dispatcher
    cp._disable_cp_dtensor_dispatcher = _disable_cp_dtensor_dispatcher
    return True
