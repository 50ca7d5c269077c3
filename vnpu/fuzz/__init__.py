"""Differential fuzzing: random operator programs run on npu and on the CPU must agree bit for bit
(values, errors and gradients), and must never crash or hang (``vnpu fuzz``, ``make fuzz``)."""
