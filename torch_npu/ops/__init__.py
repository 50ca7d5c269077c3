"""torch_npu's operators that PyTorch does not have (torch.ops.npu.*), registered with torch.library."""
from torch_npu.ops import format_cast  # noqa: F401
