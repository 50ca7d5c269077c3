"""The check shared by every host-synchronising call: refused while this thread's current stream
is capturing an NPU graph, as ACL graph capture refuses it on hardware."""

from torch_npu import _C
from torch_npu.utils._error_code import ErrCode, graph_error


def refuse_during_capture(what):
    if _C._current_stream_capturing():
        raise RuntimeError(
            f"operation not permitted when stream is capturing: {what} synchronises the host with "
            "the device. Run it outside torch.npu.graph(...)." + graph_error(ErrCode.NOT_SUPPORT)
        )
