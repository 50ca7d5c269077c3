"""npu_fast_condition_index_put(x, condition, value): x[condition] = value, in place; returns x."""

__all__ = ["npu_fast_condition_index_put"]


def npu_fast_condition_index_put(x, condition, value):
    return x.masked_fill_(condition, value)
