"""torchair.ops: operators used inside graphs."""

import torch

__all__ = ["npu_print"]


def npu_print(*args, summarize_size=3):
    """Prints its arguments (tensors summarised to `summarize_size` elements at each end) when it runs."""
    if not isinstance(summarize_size, int) or summarize_size == 0 or summarize_size < -1:
        raise ValueError(f"summarize_size must be -1 (everything) or a positive int, got {summarize_size}")
    parts = []
    for a in args:
        if isinstance(a, torch.Tensor):
            flat = a.detach().reshape(-1).cpu()
            if summarize_size != -1 and flat.numel() > 2 * summarize_size:
                shown = f"{flat[:summarize_size].tolist()} ... {flat[-summarize_size:].tolist()}"
            else:
                shown = str(flat.tolist())
            parts.append(f"{shown} (shape {list(a.shape)}, {a.dtype})")
        else:
            parts.append(str(a))
    print(" ".join(parts))
