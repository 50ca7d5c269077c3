"""A Dynamo guard on the npu deterministic level: code compiled at one level is compiled again at another.

Called by a backend while Dynamo compiles a frame (torch_npu's inductor calls it for npu_backend="ascendc", whose
kernels are generated for the level in force); outside a compilation there is nothing to guard and it returns False.
"""


def install_npu_deterministic_level_guard() -> bool:
    import torch._guards
    from torch._dynamo.guards import get_verbose_code_parts
    from torch._dynamo.source import GlobalStateSource

    import torch_npu

    tracing = torch._guards.TracingContext.try_get()
    if tracing is None:
        return False
    level = torch_npu.npu._get_deterministic_level()

    def add_level_guard(builder, guard):
        builder.guard_manager.root.add_lambda_guard(
            lambda _: torch_npu.npu._get_deterministic_level() == level,
            get_verbose_code_parts([f"torch_npu.npu._get_deterministic_level() == {level}"], guard),
            guard.user_stack,
        )

    tracing.guards_context.dynamo_guards.add(GlobalStateSource().make_guard(add_level_guard))
    return True
