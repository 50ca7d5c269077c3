"""Decompositions that inductor chooses by device, answered for npu calls as for CPU calls.

Inductor and AOT autograd pick some decompositions by the device of the tensors they trace (random draws,
small matmuls). The choice is made while an npu graph still holds npu tensors, before vnpu compiles it as the
CPU graph it computes, so for npu calls the CPU's choice is put in: the compiled npu graph then holds what the
compiled CPU graph holds and computes its bits. Each patch that needs it (random_decompositions,
matmul_decompositions) names the table, the CPU's rule per operator and what makes a call an npu call."""

import functools

__all__ = ["answer_npu_calls_as_on_the_cpu"]

_MARK = "_vnpu_answers_npu_calls_as_on_the_cpu"


def _choosing(decomposition, cpu_rule, is_npu_call):
    @functools.wraps(decomposition)
    def decompose(*args, **kwargs):
        return (cpu_rule if is_npu_call(*args) else decomposition)(*args, **kwargs)

    setattr(decompose, _MARK, True)
    return decompose


def answer_npu_calls_as_on_the_cpu(table, cpu_rules, is_npu_call):
    """Replaces table[op] for each op of cpu_rules by a decomposition that answers the calls is_npu_call(*args)
    accepts with cpu_rules[op] and the others with the decomposition it replaces. Applying it again changes
    nothing; True when it replaced one."""
    changed = False
    for op, cpu_rule in cpu_rules.items():
        decomposition = table.get(op)
        if decomposition is not None and not getattr(decomposition, _MARK, False):
            table[op] = _choosing(decomposition, cpu_rule, is_npu_call)
            changed = True
    return changed
