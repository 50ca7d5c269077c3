"""The exact text of every error the torch_npu API raises for bad input (the first line; torch_npu's
"[ERROR] ... ERRxxyyy" suffix follows on the next line where torch_npu adds one)."""

import pytest
import torch

import torch_npu
from torch_npu import contrib
from torch_npu.contrib.module.channel_shuffle import ChannelShuffle

NPU = "npu"


def t(*shape, dtype=torch.float32):
    return (
        torch.randn(*shape).to(dtype).to(NPU)
        if dtype.is_floating_point
        else torch.zeros(*shape, dtype=dtype, device=NPU)
    )


def graph_in_capture(fn):
    g = torch.npu.NPUGraph()
    with torch.npu.graph(g):
        fn()


class _Module(torch.nn.Linear):
    pass


def _hooked():
    m = torch.nn.Linear(2, 2).npu()
    m.register_forward_hook(lambda *a: None)
    return m


CASES = [
    # torch.npu: options, config, limits
    (
        lambda: torch.npu.set_option({"ACL_PRECISION_MODE": "fp64"}),
        ValueError,
        "value of ACL_PRECISION_MODE should be in ['allow_fp32_to_fp16', 'must_keep_origin_dtype'] but got fp64",
    ),
    (
        lambda: torch.npu.set_option({"ACL_AICORE_NUM": 40}),
        ValueError,
        "value of ACL_AICORE_NUM should be in 1..32 but got 40",
    ),
    (lambda: torch.npu.set_device_limit(0, foo=1), TypeError, "set_device_limit(device, cube_num=-1, vector_num=-1)"),
    (
        lambda: torch.npu.set_stream_limit(torch.npu.Stream(), 0),
        ValueError,
        "cube_num must be -1 (no limit) or in [1, 24], but got 0",
    ),
    (lambda: torch.npu.get_stream_limit(3), TypeError, "expected a torch_npu.npu.Stream, got int"),
    (lambda: torch.npu.use_compatible_impl(1), TypeError, "is_enable must be a bool, but got <class 'int'>"),
    (
        lambda: setattr(torch.npu.matmul, "cube_math_type", 7),
        ValueError,
        "cube_math_type must be one of ['KEEP_DTYPE', 'ALLOW_FP32_DOWN_PRECISION', 'USE_FP16', 'USE_HF32', "
        "'USE_FP32_ADD'], but got 7",
    ),
    (
        lambda: torch.npu.set_aoe("/proc/vnpu_forbidden/aoe"),
        ValueError,
        "the path of '/proc/vnpu_forbidden/aoe' is invaild.",
    ),
    (
        lambda: torch.npu.set_dump("/nonexistent/acl.json"),
        AssertionError,
        "cfg_file /nonexistent/acl.json path does not exists.",
    ),
    # reliability, deterministic, autocast, sync debug
    (lambda: torch.npu.stress_detect("gpu"), ValueError, "detect_type must be 'aic' or 'hccs', but got 'gpu'"),
    (lambda: torch.npu.set_op_timeout_ms(-1), ValueError, "timeout must be a non-negative int (ms), but got -1"),
    (lambda: torch.npu.set_deterministic_level(3), ValueError, "deterministic level must be 0, 1 or 2, but got 3"),
    (
        lambda: torch.npu.set_autocast_dtype(torch.float64),
        ValueError,
        "npu autocast supports [torch.float16, torch.bfloat16, torch.float32], not torch.float64",
    ),
    (
        lambda: torch.npu.set_sync_debug_mode("loud"),
        RuntimeError,
        "invalid value of debug_mode, expected one of `default`, `warn`, `error`",
    ),
    (lambda: torch.npu.utilization(9), AssertionError, "Invalid device id"),
    (lambda: torch.npu.synchronize(torch.device("cpu")), ValueError, "Expected a npu device, but got: cpu"),
    # obfuscation, overflow
    (
        lambda: torch.npu.obfuscation_initialize(0, 0, 1),
        ValueError,
        "hidden_size must be in [1, 10000] when cmd is 1, but got 0",
    ),
    (
        lambda: torch.npu.obfuscation_initialize(8, 0, 1, obf_coefficient=2.0),
        ValueError,
        "obf_coefficient must be in (0.0, 1.0], but got 2.0",
    ),
    (
        lambda: torch.npu.obfuscation_initialize(8, 0, 1, data_type=torch.int64),
        TypeError,
        "data_type must be float16, float32, bfloat16 or int8, but got torch.int64",
    ),
    (
        lambda: torch.npu.obfuscation_calculate(1, t(2), None),
        RuntimeError,
        "obfuscation_calculate: the PMCC model-obfuscation engine is not deployed on this machine (ACL error 507018); "
        "vnpu provides no PMCC service",
    ),
    (
        lambda: torch.npu.obfuscation_finalize(1),
        RuntimeError,
        "obfuscation_finalize: the PMCC model-obfuscation engine is not deployed on this machine (ACL error 507018); "
        "vnpu provides no PMCC service",
    ),
    (lambda: torch.npu.utils.npu_check_overflow("inf"), RuntimeError, "Unsupport type."),
    # memory
    (
        lambda: torch.npu.set_per_process_memory_fraction(2.0),
        ValueError,
        "Invalid fraction value: 2.0. Allowed range: 0~1",
    ),
    (
        lambda: torch.npu.set_per_process_memory_fraction("half"),
        TypeError,
        "Invalid type for fraction argument, must be `float`",
    ),
    (
        lambda: torch.npu.caching_allocator_alloc(-1),
        TypeError,
        "Invalid type for size argument, must be a non-negative int",
    ),
    (
        lambda: torch.npu.caching_allocator_delete(0x1000),
        ValueError,
        "caching_allocator_delete: 0x1000 was not allocated by caching_allocator_alloc",
    ),
    (
        lambda: torch.npu.MemPool(allocator="malloc"),
        TypeError,
        "MemPool allocator must be an NPUPluggableAllocator or None",
    ),
    (
        lambda: torch.npu.NPUPluggableAllocator("/nonexistent.so", "a", "f"),
        FileNotFoundError,
        "NPUPluggableAllocator: /nonexistent.so does not exist",
    ),
    (
        lambda: torch.npu.change_current_allocator("malloc"),
        TypeError,
        "change_current_allocator expects an NPUPluggableAllocator",
    ),
    (
        lambda: torch.npu.memory._record_memory_history(enabled="on"),
        ValueError,
        "enabled must be None, 'state' or 'all', but got 'on'",
    ),
    (
        lambda: torch.npu.memory._record_memory_history(stacks="cpp"),
        ValueError,
        "stacks must be 'python' or 'all', but got 'cpp'",
    ),
    # streams, events, mstx
    (
        lambda: torch.npu.Event(enable_timing=True).elapsed_time(3),
        TypeError,
        "elapsed_time expects an npu Event, got int",
    ),
    (
        lambda: torch.npu.Event().ipc_handle(),
        RuntimeError,
        "Event.ipc_handle needs an event created with interprocess=True",
    ),
    (
        lambda: torch.npu.Event.from_ipc_handle(0, b"x"),
        RuntimeError,
        "from_ipc_handle expects a handle made by Event.ipc_handle()",
    ),
    (lambda: torch.npu.ExternalStream(0), ValueError, "stream_ptr must be a non-zero int handle, but got 0"),
    (lambda: torch.npu.mstx.mark(1), TypeError, "mstx message must be a str, but got int"),
    (lambda: torch.npu.mstx.range_end(10**9), ValueError, "mstx.range_end: no open range with id 1000000000"),
    # graphs
    (
        lambda: torch.npu.NPUGraph().capture_begin(capture_error_mode="strict"),
        ValueError,
        "capture_error_mode must be one of ('global', 'thread_local', 'relaxed'), but got 'strict'",
    ),
    (
        lambda: torch.npu.NPUGraph().capture_begin(),
        RuntimeError,
        "NPU graphs must be captured on a non-default stream. (However, after capture, it's ok to replay them on the "
        "default stream.)",
    ),
    (lambda: torch.npu.NPUGraph().update({}), TypeError, "cpu_update_input must be a list of dicts"),
    (lambda: torch.npu.graph(object()), TypeError, "torch.npu.graph expects a torch.npu.NPUGraph"),
    (
        lambda: torch.npu.graph_task_group_end(torch.npu.Stream()),
        RuntimeError,
        "graph_task_group_end without graph_task_group_begin",
    ),
    (
        lambda: torch.npu.graph_task_update_end(torch.npu.Stream()),
        RuntimeError,
        "graph_task_update_end without graph_task_update_begin",
    ),
    (
        lambda: torch.npu.graph_task_group_begin(torch.npu.Stream()),
        RuntimeError,
        "graph_task_group_begin must be called while an NPU graph captures on this stream",
    ),
    (
        lambda: torch.npu.super_kernel_scope_end("x"),
        RuntimeError,
        "super_kernel_scope_end without super_kernel_scope_begin",
    ),
    (
        lambda: torch.npu.register_npu_graph_handler("aten::mm")(int),
        TypeError,
        "register_npu_graph_handler decorates NpuGraphOpHandler subclasses",
    ),
    (
        lambda: graph_in_capture(lambda: torch.npu.synchronize()),
        RuntimeError,
        "operation not permitted when stream is capturing: torch.npu.synchronize() synchronises the host with the device. "
        "Run it outside torch.npu.graph(...).",
    ),
    (
        lambda: torch.npu.make_graphed_callables(lambda a: a, (3,)),
        TypeError,
        "In the beta API, sample_args for each callable must contain only Tensors. Other types are not allowed.",
    ),
    (
        lambda: torch.npu.make_graphed_callables(_hooked(), (t(1, 2),)),
        RuntimeError,
        "Modules must not have hooks registered at the time they are passed. However, registering hooks on modules after "
        "passing them through make_graphed_callables is allowed.",
    ),
    (
        lambda: torch_npu.npu.npugraph_ex.register_replacement(1, 2, []),
        TypeError,
        "register_replacement expects search_fn and replace_fn functions",
    ),
    # legacy storages, module attributes
    (lambda: torch.npu.FloatStorage.from_buffer(b"1234"), RuntimeError, "from_buffer: Not available for NPU storage"),
    (lambda: torch_npu.not_an_api, AttributeError, "module 'torch_npu' has no attribute 'not_an_api'"),
    (lambda: torch_npu.npu.not_an_api, AttributeError, "module 'torch_npu.npu' has no attribute 'not_an_api'"),
    (lambda: torch_npu.nn.Conv9d, AttributeError, "module 'torch_npu.nn' has no attribute 'Conv9d'"),
    # formats
    (lambda: torch_npu.npu_format_cast(t(2, 2), -1), RuntimeError, "npu_format_cast: cannot cast to Format.UNDEFINED"),
    (
        lambda: torch_npu.npu_format_cast(t(2, 2), 32),
        RuntimeError,
        "npu_format_cast: format NDC1HWC0 needs a 5-D tensor, got 2-D",
    ),
    (
        lambda: torch_npu.npu_format_cast(t(1, 1, 1, 1, 2), 3),
        RuntimeError,
        "npu_format_cast: format NC1HWC0 needs at most 4 dimensions, got 5",
    ),
    (
        lambda: torch_npu.npu_format_cast(torch.ones(2, 2), 29),
        RuntimeError,
        "npu_format_cast expects an npu tensor, got one on cpu",
    ),
    (
        lambda: torch_npu.empty_with_format((2,), layout=torch.sparse_coo, device=NPU),
        RuntimeError,
        "empty_with_format supports torch.strided only, got torch.sparse_coo",
    ),
    (
        lambda: torch_npu.empty_with_format((2,), device="cpu"),
        RuntimeError,
        "empty_with_format makes npu tensors, got device cpu",
    ),
    # optim
    (
        lambda: torch_npu.optim.NpuFusedAdadelta([torch.nn.Parameter(t(1))], rho=2.0),
        ValueError,
        "Invalid rho value: 2.0",
    ),
    (
        lambda: torch_npu.optim.NpuFusedAdam([torch.nn.Parameter(t(1))], betas=(0.9, 1.0)),
        ValueError,
        "Invalid beta parameter at index 1: 1.0",
    ),
    (
        lambda: torch_npu.optim.NpuFusedSGD([torch.nn.Parameter(t(1))], lr=0.1, nesterov=True),
        ValueError,
        "Nesterov momentum requires a momentum and zero dampening",
    ),
    (
        lambda: torch_npu.optim.NpuFusedBertAdam([torch.nn.Parameter(t(1))], lr=-1.0),
        ValueError,
        "Invalid learning rate: -1.0 - should be >= 0.0",
    ),
    (
        lambda: torch_npu.optim.NpuFusedBertAdam([torch.nn.Parameter(t(1))], lr=0.1, schedule="cubic"),
        ValueError,
        "Invalid schedule parameter: cubic",
    ),
    (
        lambda: torch_npu.optim.NpuFusedBertAdam([torch.nn.Parameter(t(1))], lr=0.1, warmup=1.5),
        ValueError,
        "Invalid warmup: 1.5 - should be in [0.0, 1.0[ or -1",
    ),
    (
        lambda: torch_npu.optim.NpuFusedBertAdam([torch.nn.Parameter(t(1))], lr=0.1, b1=1.0),
        ValueError,
        "Invalid b1 parameter: 1.0 - should be in [0.0, 1.0[",
    ),
    (
        lambda: torch_npu.optim.NpuFusedBertAdam([torch.nn.Parameter(t(1))], lr=0.1, b2=-0.1),
        ValueError,
        "Invalid b2 parameter: -0.1 - should be in [0.0, 1.0[",
    ),
    (
        lambda: torch_npu.optim.NpuFusedBertAdam([torch.nn.Parameter(t(1))], lr=0.1, e=-1.0),
        ValueError,
        "Invalid epsilon value: -1.0 - should be >= 0.0",
    ),
    # utils
    (lambda: torch_npu.utils.npu_combine_tensors([1]), TypeError, "npu_combine_tensors expects tensors, got int"),
    (
        lambda: torch_npu.utils.npu_combine_tensors([t(1), t(1, dtype=torch.float16)]),
        RuntimeError,
        "npu_combine_tensors needs tensors of one dtype on one device, got torch.float32 on npu:0 and torch.float16 on npu:0",
    ),
    (lambda: torch_npu.utils.set_thread_affinity([-1, 2]), ValueError, "Invalid core range: [-1, 2]"),
    (
        lambda: torch_npu.utils.collect_env.check_path_owner_consistent("/nonexistent"),
        RuntimeError,
        "The path does not exist: /nonexistent",
    ),
    (
        lambda: __import__("torch_npu.utils.profiler", fromlist=["x"]).Profile._cls(profile_type="GPU"),
        ValueError,
        "profile_type must be TORCH, CANN, GE or NONE, but got 'GPU'",
    ),
    # contrib
    (
        lambda: torch_npu.contrib.amp.scale_loss(t(1), None).__enter__()
        if not torch_npu.contrib.amp.frontend._state.scalers
        else (_ for _ in ()).throw(RuntimeError("Call torch_npu.contrib.amp.initialize() before amp.scale_loss()")),
        RuntimeError,
        "Call torch_npu.contrib.amp.initialize() before amp.scale_loss()",
    ),
    (
        lambda: contrib.npu_single_level_responsible_flags((2, 2), t(1, 4).long(), (8, 8), 1),
        RuntimeError,
        "boxes must be a float16 or float32 tensor, got torch.int64",
    ),
    (
        lambda: contrib.npu_fused_attention(
            t(8, 64), t(1, 1, 8, 8), t(64, 64), t(64, 64), t(64, 64), t(64), t(64), t(64)
        ),
        RuntimeError,
        "fused attention check compatibility failed, format not matches (expected [29, 29, 29, 29, 29, 2, 2, 2], "
        "got [2, 0, 2, 2, 2, 2, 2, 2])",
    ),
    (
        lambda: contrib.function.dropout_with_byte_mask(t(2), p=1.5),
        ValueError,
        "dropout probability has to be between 0 and 1, but got 1.5",
    ),
    (
        lambda: contrib.module.DropoutWithByteMask(p=-0.1),
        ValueError,
        "dropout probability has to be between 0 and 1, but got -0.1",
    ),
    (lambda: ChannelShuffle(5, groups=2), ValueError, "in_channels (5) must be divisible by groups (2)"),
    (lambda: ChannelShuffle(4)(t(1, 2, 1, 1), t(1, 1, 1, 1)), RuntimeError, "ChannelShuffle expects 4 channels, got 3"),
    (
        lambda: contrib.ModulatedDeformConv(2, 2, 3, pack=False)(t(1, 2, 4, 4)),
        RuntimeError,
        "ModulatedDeformConv(pack=False) takes offset and mask from the caller: call "
        "ModulatedDeformConv2dFunction.apply(x, offset, mask, weight, bias, ...) directly",
    ),
    (lambda: contrib.module.FusedColorJitter(hue=0.7), ValueError, "hue must be in [0, 0.5], but got 0.7"),
    (lambda: contrib.MultiheadAttention(10, 3), ValueError, "embed_dim must be divisible by num_heads"),
    (
        lambda: contrib.MultiheadAttention(8, 2, kdim=4, self_attention=True),
        ValueError,
        "Self-attention requires query, key and value to be of the same size",
    ),
    (
        lambda: contrib.PSROIPool(2, 2, 1.0, 2, 3)(t(1, 4, 4, 4), t(1, 5)),
        RuntimeError,
        "PSROIPool expects 12 channels, got 4",
    ),
    (
        lambda: contrib.QuantConv2d(1, 1, 1, torch.float16, round_mode="floor"),
        ValueError,
        "round_mode must be 'rint', but got 'floor'",
    ),
    (
        lambda: contrib.MultiheadAttention(8, 2)(t(2, 8), t(2, 8), t(2, 8), 1, 2, 2, incremental_state={}),
        NotImplementedError,
        "torch_npu.contrib.MultiheadAttention: incremental decoding (incremental_state) is not "
        "implemented in vnpu; call it without incremental_state",
    ),
]


def _first_line(e):
    return str(e).split("\n")[0]


@pytest.mark.parametrize("call,kind,message", CASES, ids=[c[2][:48] for c in CASES])
def test_exact_error_message(call, kind, message):
    with pytest.raises(kind) as info:
        call()
    assert _first_line(info.value) == message


def _q(*shape):
    return torch.zeros(*shape, dtype=torch.int8, device=NPU)


OP_CASES = [
    (lambda: torch_npu.npu_swiglu(t(3, 5)), "npu_swiglu: the size of dim -1 (5) must be even"),
    (lambda: torch_npu.npu_swiglu(t(4), 3), "npu_swiglu: dim=3 is out of range for a 1-D input"),
    (lambda: torch_npu.npu_geglu(t(4), approximate=2), "npu_geglu: approximate must be 0 (erf) or 1 (tanh), got 2"),
    (
        lambda: torch_npu.npu_gelu(t(4), approximate="fast"),
        "npu_gelu: approximate must be 'none' or 'tanh', got 'fast'",
    ),
    (
        lambda: torch_npu.npu_scaled_masked_softmax(t(2, 2), t(2, 2) > 0),
        "npu_scaled_masked_softmax: x must be 4-D (N, C, H, W), got 2-D",
    ),
    (
        lambda: torch_npu.npu_dropout_with_add_softmax(t(2, 2), t(2, 3), 1.0, 0.1, -1),
        "npu_dropout_with_add_softmax: self (2, 2) and x1 (2, 3) differ",
    ),
    (
        lambda: torch_npu.npu_rms_norm(t(2, 8), t(4)),
        "npu_rms_norm: gamma shape (4,) must match the last dims of x (2, 8)",
    ),
    (lambda: torch_npu.npu_add_rms_norm(t(2, 8), t(3, 8), t(8)), "npu_add_rms_norm: x1 (2, 8) and x2 (3, 8) differ"),
    (lambda: torch_npu.npu_deep_norm(t(2, 8), t(3, 8), t(8), t(8)), "npu_deep_norm: x (2, 8) and gx (3, 8) differ"),
    (lambda: torch_npu.npu_rotary_mul(t(4, 4), t(4, 4), t(4, 4)), "npu_rotary_mul: self must be 3-D or 4-D, got 2-D"),
    (lambda: torch_npu.npu_rotary_mul(t(1, 2, 3), t(3), t(3)), "npu_rotary_mul: the last dim (3) must be even"),
    (
        lambda: torch_npu.npu_apply_rotary_pos_emb(t(2, 2, 2), t(2, 2, 2), t(2, 2, 2), t(2, 2, 2)),
        "npu_apply_rotary_pos_emb: query must be 4-D for layout BSND, got 3-D",
    ),
    (
        lambda: torch_npu.npu_interleave_rope(t(2, 2, 2), t(2, 2, 2), t(2, 2, 2)),
        "npu_interleave_rope: x must be 4-D [B, N, S, D], got 3-D",
    ),
    (
        lambda: torch_npu.npu_mrope(t(2).long(), t(2, 8), t(2, 8), t(4, 4), 3),
        "npu_mrope: head_size=3 must divide query (8) and key (8) widths",
    ),
    (
        lambda: torch_npu.npu_mrope(t(2).long(), t(2, 8), t(2, 8), t(4, 16), 8),
        "npu_mrope: rotary_dim (cos_sin_cache.shape[-1]) exceeds head_size",
    ),
    (lambda: torch_npu.npu_one_hot(t(3).long(), depth=0), "npu_one_hot: depth must be >= 1, got 0"),
    (
        lambda: torch_npu.npu_one_hot(t(3).long(), num_classes=4, depth=5),
        "npu_one_hot: num_classes=4 must be -1 or equal depth=5",
    ),
    (lambda: torch_npu.npu_pad(t(2, 2), [1]), "npu_pad: paddings needs 2 values per dim (4), got 1"),
    (
        lambda: torch_npu.npu_confusion_transpose(t(2, 6), [1, 0], [2, 2, 3], False),
        "npu_confusion_transpose: perm [1, 0] and shape [2, 2, 3] differ in rank",
    ),
    (lambda: torch_npu.npu_transpose(t(2, 3), [0, 0]), "npu_transpose: perm [0, 0] is not a permutation of 2 dims"),
    (
        lambda: torch_npu.npu_scatter_nd_update(t(2, 2), t(1, 3).long(), t(1)),
        "npu_scatter_nd_update: indices' last dim (3) exceeds self's rank (2)",
    ),
    (
        lambda: torch_npu.npu_scatter_nd_update(t(4, 3), t(2, 1).long(), t(3, 3)),
        "npu_scatter_nd_update: updates (3, 3) must be indices.shape[:-1] + self.shape[K:] = (2, 3)",
    ),
    (
        lambda: torch_npu.npu_dtype_cast(t(2), 99),
        "npu_dtype_cast: dtype=99 is not a dtype vnpu supports (torch.uint8, "
        "torch.int8, torch.int16, torch.int32, torch.int64, torch.float16, torch.float32, torch.float64, torch.complex64, "
        "torch.complex128, torch.bool, torch.bfloat16, torch.float8_e5m2, torch.float8_e4m3fn)",
    ),
    (
        lambda: torch_npu.npu_linear(t(2, 3), t(4, 5)),
        "npu_linear: input's last dim (3) must equal weight's in_features (5)",
    ),
    (lambda: torch_npu.npu_bmmV2(t(2, 3), t(4, 5), []), "npu_bmmV2: self (2, 3) and mat2 (4, 5) do not chain"),
    (
        lambda: torch_npu.npu_quant_matmul(_q(2, 3), _q(4, 5), t(5)),
        "npu_quant_matmul: x1 (2, 3) and x2 (4, 5) do not chain",
    ),
    (
        lambda: torch_npu.npu_weight_quant_batchmatmul(t(2, 3), _q(4, 5), t(5)),
        "npu_weight_quant_batchmatmul: x (2, 3) and weight (4, 5) do not chain",
    ),
    (
        lambda: torch_npu.npu_weight_quant_batchmatmul(t(2, 4), _q(4, 5), t(5), antiquant_group_size=2),
        "npu_weight_quant_batchmatmul: a group-wise antiquant_scale must be [ceil(k / group), n]",
    ),
    (
        lambda: torch_npu.npu_dynamic_quant(t(2, 4), quant_mode="perchannel"),
        "npu_dynamic_quant: quant_mode must be 'pertoken' or 'pertensor', got 'perchannel'",
    ),
    (
        lambda: torch_npu.npu_dynamic_quant(t(2, 4), dst_type=torch.int32),
        "npu_dynamic_quant: dst_type=3: vnpu quantises to int8 only",
    ),
    (
        lambda: torch_npu.npu_quantize(t(2, 2), t(2), None, torch.float32),
        "npu_quantize: dtype must be an 8- or 32-bit integer type, got torch.float32",
    ),
    (
        lambda: torch_npu.npu_grouped_matmul([t(2, 3)], [t(3, 2)], scale=[t(2)]),
        "npu_grouped_matmul: with scale (quantised), x and weight must be int8, got torch.float32 and torch.float32",
    ),
    (
        lambda: torch_npu.npu_grouped_matmul([t(2, 3)], [t(3, 2)], group_type=2),
        "npu_grouped_matmul: group_type=2: only -1 (no grouping) and 0 (split M) are implemented",
    ),
    (
        lambda: torch_npu.npu_grouped_matmul(
            [t(4, 3)],
            [t(3, 2), t(3, 2)],
            group_list=torch.tensor([1, 2, 4], device=NPU),
            group_list_type=1,
            split_item=3,
        ),
        "npu_grouped_matmul: group_list covers 7 rows but x has 4",
    ),
    (
        lambda: torch_npu.npu_grouped_matmul(
            [t(4, 3)], [t(3, 2), t(3, 2)], group_list=torch.tensor([1, 2, 4], device=NPU), split_item=3
        ),
        "npu_grouped_matmul: group_list has 3 groups for 2 weights",
    ),
    (lambda: torch_npu.npu_iou(t(2, 4), t(2, 4), mode=2), "npu_iou: mode must be 0 (iou) or 1 (iof), got 2"),
    (lambda: torch_npu.npu_iou(t(2, 5), t(2, 4)), "npu_iou: boxes must be [N, 4] and [M, 4]"),
    (
        lambda: torch_npu.npu_giou(t(4, 2), t(4, 3)),
        "npu_giou: with is_cross=False self and gtboxes must hold as many boxes (2 vs 3)",
    ),
    (lambda: torch_npu.npu_nms_v4(t(3, 5), t(3), 2, t(()), t(())), "npu_nms_v4: self must be [N, 4], got (3, 5)"),
    (lambda: torch_npu.npu_nms_v4(t(3, 4), t(2), 2, t(()), t(())), "npu_nms_v4: scores must be [N], got (2,)"),
    (
        lambda: torch_npu.npu_nms_with_mask(t(3, 4), 0.5),
        "npu_nms_with_mask: input must be [N, 5] (x1, y1, x2, y2, score), got (3, 4)",
    ),
    (
        lambda: torch_npu.npu_batch_nms(t(3, 4), t(1, 3, 2), 0.1, 0.5, 2, 2),
        "npu_batch_nms: self must be [B, A, q, 4] and scores [B, A, C], got (3, 4) and (1, 3, 2)",
    ),
    (
        lambda: torch_npu.npu_roi_align(t(1, 1, 4, 4), t(2, 4), 1.0, 1, 1, 1, 0),
        "npu_roi_align: rois must be [K, 5], got (2, 4)",
    ),
    (
        lambda: torch_npu.npu_bounding_box_encode(t(2, 4), t(3, 4), 0, 0, 0, 0, 1, 1, 1, 1),
        "npu_bounding_box_encode: anchor_box and ground_truth_box must both be [N, 4], got (2, 4) and (3, 4)",
    ),
    (
        lambda: torch_npu.npu_moe_gating_top_k_softmax(t(4), k=1),
        "npu_moe_gating_top_k_softmax: x must be 2-D or 3-D, got 1-D",
    ),
    (
        lambda: torch_npu.npu_moe_gating_top_k_softmax(t(2, 4), k=5),
        "npu_moe_gating_top_k_softmax: k=5 must be in [1, 4]",
    ),
    (lambda: torch_npu.npu_moe_gating_top_k(t(4), 1), "npu_moe_gating_top_k: x must be 2-D [tokens, experts], got 1-D"),
    (
        lambda: torch_npu.npu_moe_gating_top_k(t(2, 8), 1, norm_type=2),
        "npu_moe_gating_top_k: norm_type must be 0 (softmax) or 1 (sigmoid), got 2",
    ),
    (
        lambda: torch_npu.npu_moe_gating_top_k(t(2, 8), 1, group_count=2, k_group=3),
        "npu_moe_gating_top_k: k_group=3 must be in [1, group_count=2]",
    ),
    (
        lambda: torch_npu.npu_moe_init_routing(t(2, 4), t(2, 1).int(), t(2, 2).int(), 2),
        "npu_moe_init_routing: x [N, H], row_idx and expert_idx [N, k] expected, got (2, 4), (2, 1), (2, 2)",
    ),
    (
        lambda: torch_npu.npu_moe_init_routing_v2(t(2, 4), t(3, 2).int()),
        "npu_moe_init_routing_v2: x [N, H] and expert_idx [N, k] expected, got (2, 4) and (3, 2)",
    ),
    (
        lambda: torch_npu.npu_moe_init_routing_v2(t(2, 4), t(2, 2).int(), quant_mode=0),
        "npu_moe_init_routing_v2: quant_mode=0 (static) needs scale",
    ),
    (
        lambda: torch_npu.npu_moe_init_routing_v2(t(2, 4), t(2, 2).int(), quant_mode=2),
        "npu_moe_init_routing_v2: quant_mode must be -1 (none), 0 (static) or 1 (dynamic), got 2 (MX FP8 quantisation "
        "is not supported by vnpu)",
    ),
    (
        lambda: torch_npu.npu_moe_init_routing_v2(t(2, 4), t(2, 2).int(), drop_pad_mode=1, expert_num=4),
        "npu_moe_init_routing_v2: drop_pad_mode=1 needs expert_capacity > 0 and expert_num >= the experts in range (4), "
        "got expert_capacity=-1, expert_num=4",
    ),
    (
        lambda: torch_npu.npu_moe_finalize_routing(t(4, 2), None, None, t(2, 2), t(2, 2), t(4).int(), None),
        "npu_moe_finalize_routing: bias needs export_for_source_row",
    ),
    (
        lambda: torch_npu.npu_moe_finalize_routing(
            t(4, 2), None, None, None, t(2, 2), t(4).int(), None, drop_pad_mode=1
        ),
        "npu_moe_finalize_routing: drop_pad_mode must be 0 (the only value torch_npu documents for this operator), got 1",
    ),
    (
        lambda: torch_npu.npu_moe_token_permute(t(2, 2), t(2, 1).long(), padded_mode=True),
        "npu_moe_token_permute: padded_mode=True is not supported (CANN's MoeTokenPermute does not support it either)",
    ),
    (
        lambda: torch_npu.npu_moe_token_unpermute(t(2, 2), t(2).int(), padded_mode=True),
        "npu_moe_token_unpermute: padded_mode=True is not supported (CANN's MoeTokenPermute does not support it either)",
    ),
    (
        lambda: torch_npu.npu_apply_adam_w(0.9, 0.99, 0.1, 0.0, 0.9, 0.99, 1e-8, t(3), None, True, False),
        "npu_apply_adam_w: amsgrad=True needs max_grad_norm",
    ),
    (
        lambda: torch_npu.npu_apply_adam_w(
            0.9, 0.99, 0.1, 0.0, 0.9, 0.99, 1e-8, t(3), None, False, False, var=t(2), m=t(3), v=t(3)
        ),
        "npu_apply_adam_w: var, m, v and grad must have one shape, got (2,), (3,), (3,), (3,)",
    ),
    # attention
    (
        lambda: torch_npu.npu_fusion_attention(t(1, 2, 4, 8), t(1, 2, 4, 8), t(1, 2, 4, 8), 2, "BNSD", sparse_mode=1),
        "npu_fusion_attention: sparse_mode=1 needs atten_mask",
    ),
    (
        lambda: torch_npu.npu_fusion_attention(t(1, 2, 4, 8), t(1, 2, 4, 8), t(1, 2, 4, 8), 2, "BNSD", sparse_mode=9),
        "npu_fusion_attention: sparse_mode must be in 0..8, got 9",
    ),
    (
        lambda: torch_npu.npu_fusion_attention(t(1, 2, 4, 8), t(1, 2, 4, 4), t(1, 2, 4, 4), 2, "BNSD"),
        "npu_fusion_attention: query and key head sizes differ (8 vs 4)",
    ),
    (
        lambda: torch_npu.npu_fusion_attention(t(1, 2, 4, 8), t(2, 2, 4, 8), t(2, 2, 4, 8), 2, "BNSD"),
        "npu_fusion_attention: query and key batch sizes differ (1 vs 2)",
    ),
    (
        lambda: torch_npu.npu_fusion_attention(t(1, 3, 4, 8), t(1, 2, 4, 8), t(1, 2, 4, 8), 3, "BNSD"),
        "npu_fusion_attention: the query's 3 heads must be a multiple of the key/value heads (2)",
    ),
    (
        lambda: torch_npu.npu_fusion_attention(t(1, 2, 4, 8), t(1, 2, 4, 8), t(1, 2, 4, 8), 0, "BNSD"),
        "npu_fusion_attention: head_num must be positive, got 0",
    ),
    (
        lambda: torch_npu.npu_fusion_attention(
            t(1, 2, 4, 8), t(1, 2, 4, 8), t(1, 2, 4, 8), 2, "BNSD", atten_mask=t(3, 3) > 0
        ),
        "npu_fusion_attention: atten_mask must end in [S1, S2] = [4, 4], got (1, 1, 3, 3)",
    ),
    (
        lambda: torch_npu.npu_fusion_attention(t(5, 2, 8), t(5, 2, 8), t(5, 2, 8), 2, "TND"),
        "npu_fusion_attention: layout TND needs actual_seq_qlen (cumulative lengths)",
    ),
    (
        lambda: torch_npu.npu_fusion_attention(
            t(5, 2, 8), t(5, 2, 8), t(5, 2, 8), 2, "TND", actual_seq_qlen=[2, 5], actual_seq_kvlen=[5]
        ),
        "npu_fusion_attention: actual_seq_qlen and actual_seq_kvlen must list as many sequences",
    ),
    (
        lambda: torch_npu.npu_fusion_attention(
            t(5, 2, 8), t(5, 2, 8), t(5, 2, 8), 2, "TND", actual_seq_qlen=[2, 4], actual_seq_kvlen=[2, 4]
        ),
        "npu_fusion_attention: the sequence lengths cover 4 / 4 tokens, query/key hold 5 / 5",
    ),
    (
        lambda: torch_npu.npu_fusion_attention(
            t(5, 3, 8), t(5, 2, 8), t(5, 2, 8), 2, "TND", actual_seq_qlen=[5], actual_seq_kvlen=[5]
        ),
        "npu_fusion_attention: TND query must be [T, 2, D], got (5, 3, 8)",
    ),
    (
        lambda: torch_npu.npu_prompt_flash_attention(t(1, 2, 8), t(1, 2, 8), t(1, 2, 8), num_heads=0),
        "npu_prompt_flash_attention: num_heads must be positive, got 0",
    ),
    (
        lambda: torch_npu.npu_prompt_flash_attention(t(1, 2, 8), t(1, 2, 8), t(1, 2, 8), input_layout="XYZ"),
        "npu_prompt_flash_attention: input_layout 'XYZ' is not supported",
    ),
    (
        lambda: torch_npu.npu_prompt_flash_attention(
            t(1, 2, 8), t(1, 2, 8), t(1, 2, 8), num_heads=2, num_key_value_heads=3
        ),
        "npu_prompt_flash_attention: num_key_value_heads=3 must divide num_heads=2",
    ),
    (
        lambda: torch_npu.npu_incre_flash_attention(
            t(2, 1, 8), t(4, 2, 8), t(4, 2, 8), block_table=t(1, 2).int(), block_size=2
        ),
        "npu_incre_flash_attention: block_table must be [B=2, max_blocks], got (1, 2)",
    ),
    (
        lambda: torch_npu.npu_incre_flash_attention(
            t(2, 1, 8), t(4, 3, 8), t(4, 3, 8), block_table=t(2, 2).int(), block_size=2
        ),
        "npu_incre_flash_attention: paged key/value must be [blocks, block_size=2, ...], got (4, 3, 8)",
    ),
    (
        lambda: torch_npu.npu_fused_infer_attention_score(
            t(5, 2, 8), t(5, 2, 8), t(5, 2, 8), num_heads=2, input_layout="TND"
        ),
        "npu_fused_infer_attention_score: layout TND needs actual_seq_lengths and actual_seq_lengths_kv",
    ),
    (
        lambda: torch_npu.npu_fused_infer_attention_score(t(1, 2, 8), t(1, 2, 8), t(1, 2, 8), query_rope=t(1, 2, 4)),
        "npu_fused_infer_attention_score: query_rope needs key_rope",
    ),
    # quantised attention
    (
        lambda: torch_npu.npu_prompt_flash_attention(t(1, 2, 8), t(1, 2, 8), t(1, 2, 8), quant_offset2=t(1)),
        "npu_prompt_flash_attention: quant_offset2 needs quant_scale2",
    ),
    (
        lambda: torch_npu.npu_fused_infer_attention_score(
            t(2, 2, 8),
            t(2, 2, 8),
            t(2, 2, 8),
            num_heads=2,
            input_layout="TND",
            actual_seq_lengths=[2],
            actual_seq_lengths_kv=[2],
            dequant_scale1=t(1),
            quant_scale1=t(1),
            dequant_scale2=t(1),
        ),
        "npu_fused_infer_attention_score: int8 attention (dequant_scale1) with layout TND is not supported by vnpu",
    ),
    (
        lambda: torch_npu.npu_fused_infer_attention_score(
            t(1, 1, 8), t(1, 2, 8), t(1, 2, 8), key_antiquant_scale=t(8), value_antiquant_scale=t(8)
        ),
        "npu_fused_infer_attention_score: antiquant needs an int8 key, got torch.float32",
    ),
    (
        lambda: torch_npu.npu_fused_infer_attention_score(
            t(1, 1, 8),
            t(1, 2, 8).to(torch.int8),
            t(1, 2, 8).to(torch.int8),
            key_antiquant_scale=t(8),
            value_antiquant_scale=t(8),
            key_antiquant_mode=2,
        ),
        "npu_fused_infer_attention_score: key mode must be 0 (per channel) or 1 (per token), got 2",
    ),
    (
        lambda: torch_npu.npu_fused_infer_attention_score(
            t(1, 1, 8),
            t(1, 2, 8).to(torch.int8),
            t(1, 2, 8).to(torch.int8),
            key_antiquant_scale=t(5),
            value_antiquant_scale=t(8),
        ),
        "npu_fused_infer_attention_score: key antiquant scale must hold one value per channel (8), got 5",
    ),
    (
        lambda: torch_npu.npu_fused_infer_attention_score(
            t(1, 1, 8),
            t(1, 2, 8).to(torch.int8),
            t(1, 2, 8).to(torch.int8),
            key_antiquant_scale=t(3),
            value_antiquant_scale=t(8),
            key_antiquant_mode=1,
        ),
        "npu_fused_infer_attention_score: key antiquant scale per token must be [B=1, S=2], got (3,)",
    ),
    # grouped matmul and routing
    (
        lambda: torch_npu.npu_grouped_matmul([t(2, 3)], [t(3, 2)], scale=[t(2)], antiquant_scale=[t(2)]),
        "npu_grouped_matmul: scale (quantised) and antiquant_scale (weight antiquant) exclude each other",
    ),
    (
        lambda: torch_npu.npu_grouped_matmul([t(2, 3)], [t(3, 2)], act_type=3),
        "npu_grouped_matmul: act_type must be one of [0, 1, 2, 4, 5], got 3",
    ),
    (
        lambda: torch_npu.npu_grouped_matmul([t(2, 4)], [t(4, 2).to(torch.int8)], antiquant_scale=[t(3, 2)]),
        "npu_grouped_matmul: antiquant_scale[0] has 3 groups for k=4",
    ),
    (
        lambda: torch_npu.npu_moe_init_routing_v2(t(2, 4), t(2, 2).int(), expert_num=4, scale=t(3)),
        "npu_moe_init_routing_v2: scale must be [N=2] without quantisation, got (3,)",
    ),
    (
        lambda: torch_npu.npu_moe_init_routing_v2(t(2, 4), t(2, 2).int(), expert_num=4, quant_mode=0, scale=t(2)),
        "npu_moe_init_routing_v2: static quantisation takes scale and offset of shape [1]",
    ),
    (
        lambda: torch_npu.npu_moe_init_routing_v2(t(2, 4), t(2, 2).int(), expert_num=4, quant_mode=1, scale=t(2, 3)),
        "npu_moe_init_routing_v2: dynamic quantisation takes scale [1 or 4, H=4], got (2, 3)",
    ),
    (
        lambda: torch_npu.npu_moe_init_routing_v2(t(2, 4), t(2, 2).int(), active_expert_range=[3, 1]),
        "npu_moe_init_routing_v2: active_expert_range must be increasing, got [3, 1]",
    ),
    (
        lambda: torch_npu.npu_moe_init_routing_v2(t(2, 4), t(2, 2).int(), expert_num=4, row_idx_type=2),
        "npu_moe_init_routing_v2: row_idx_type must be 0 or 1, got 2",
    ),
    (lambda: torch_npu.npu_giou(t(4, 2), t(4, 2), mode=2), "npu_giou: mode must be 0 (iou) or 1 (iof), got 2"),
    (
        lambda: torch_npu.npu_fused_attention_score(t(2, 4), t(2, 4), t(2, 4), t(2, 2), 1.0, 1.0),
        "npu_fused_attention_score: query_layer must be [B, N, S, D], got (2, 4)",
    ),
    (
        lambda: torch_npu.npu_fused_attention_score(
            t(1, 1, 2, 4), t(1, 1, 2, 4), t(1, 1, 2, 4), t(1, 1, 2, 2), 1.0, 0.0
        ),
        "npu_fused_attention_score: keep_prob must be in (0, 1], got 0.0",
    ),
]


@pytest.mark.parametrize("call,message", OP_CASES, ids=[c[1][:56] for c in OP_CASES])
def test_exact_operator_error_message(call, message):
    with pytest.raises(RuntimeError) as info:
        call()
    lines = str(info.value).split("\n")
    assert lines[0] == message
    assert "ERR01001 OPS invalid parameter" in lines[-1]


def _ez1001(api, argument, got, supported):
    return (
        f"call {api} failed, detail:EZ1001: Tensor {argument} not implemented for {got}, should be in dtype "
        f"support list [{supported}]."
    )


_FLOATS = "DT_FLOAT16,DT_FLOAT,DT_BFLOAT16,"
I32 = torch.int32

# Inputs of a dtype the Ascend kernel does not take: refused before any work, in CANN's words.
DTYPE_CASES = [
    (
        lambda: torch_npu.npu_rms_norm(t(2, 4, dtype=I32), t(4, dtype=I32)),
        _ez1001("aclnnRmsNorm", "self", "DT_INT32", _FLOATS),
    ),
    (
        lambda: torch_npu.npu_rms_norm(t(2, 4), t(4, dtype=torch.float64)),
        _ez1001("aclnnRmsNorm", "gamma", "DT_DOUBLE", _FLOATS),
    ),
    (
        lambda: torch_npu.npu_add_rms_norm(t(2, 4), t(2, 4, dtype=torch.int64), t(4)),
        _ez1001("aclnnAddRmsNorm", "x2", "DT_INT64", _FLOATS),
    ),
    (
        lambda: torch_npu.npu_gemma_rms_norm(t(2, 4, dtype=torch.bool), t(4)),
        _ez1001("aclnnGemmaRmsNorm", "self", "DT_BOOL", _FLOATS),
    ),
    (
        lambda: torch_npu.npu_add_layer_norm(t(2, 4), t(2, 4), t(4, dtype=torch.int8), t(4)),
        _ez1001("aclnnAddLayerNorm", "gamma", "DT_INT8", _FLOATS),
    ),
    (lambda: torch_npu.npu_swiglu(t(2, 4, dtype=I32)), _ez1001("aclnnSwiGlu", "self", "DT_INT32", _FLOATS)),
    (lambda: torch_npu.npu_gelu(t(4, dtype=torch.int64)), _ez1001("aclnnGeluV2", "self", "DT_INT64", _FLOATS)),
    (lambda: torch_npu.npu_mish(t(4, dtype=torch.float64)), _ez1001("aclnnMish", "self", "DT_DOUBLE", _FLOATS)),
    (
        lambda: torch_npu.npu_scaled_masked_softmax(t(1, 1, 2, 2), t(1, 1, 2, 2)),
        _ez1001("aclnnScaledMaskedSoftmax", "mask", "DT_FLOAT", "DT_BOOL,"),
    ),
    (
        lambda: torch_npu.npu_rotary_mul(t(1, 2, 1, 4, dtype=I32), t(1, 2, 1, 4), t(1, 2, 1, 4)),
        _ez1001("aclnnRotaryPositionEmbedding", "self", "DT_INT32", _FLOATS),
    ),
    (
        lambda: torch_npu.npu_one_hot(t(3), depth=4),
        _ez1001("aclnnOneHot", "self", "DT_FLOAT", "DT_UINT8,DT_INT32,DT_INT64,"),
    ),
    (
        lambda: torch_npu.npu_convert_weight_to_int4pack(t(2, 8)),
        _ez1001("aclnnConvertWeightToINT4Pack", "weight", "DT_FLOAT", "DT_INT32,"),
    ),
    (
        lambda: torch_npu.npu_moe_compute_expert_tokens(t(4, dtype=torch.int64), 2),
        _ez1001("aclnnMoeComputeExpertTokens", "sorted_expert_for_source_row", "DT_INT64", "DT_INT32,"),
    ),
    (
        lambda: torch_npu.npu_moe_gating_top_k_softmax(t(2, 4, dtype=I32), k=1),
        _ez1001("aclnnMoeGatingTopKSoftmax", "x", "DT_INT32", _FLOATS),
    ),
    (
        lambda: torch_npu.npu_linear(t(2, 4, dtype=I32), t(3, 4, dtype=I32)),
        _ez1001("aclnnMatmul", "input", "DT_INT32", _FLOATS),
    ),
    (
        lambda: torch_npu.npu_giou(t(4, 2, dtype=torch.int64), t(4, 2)),
        _ez1001("aclnnGIoU", "self", "DT_INT64", _FLOATS),
    ),
    (
        lambda: torch_npu.npu_scatter_nd_update(t(4), t(1, 1), t(1)),
        _ez1001("aclnnScatterNdUpdate", "indices", "DT_FLOAT", "DT_INT32,DT_INT64,"),
    ),
]


@pytest.mark.parametrize("call,message", DTYPE_CASES, ids=[c[1][5:60] for c in DTYPE_CASES])
def test_unsupported_dtype_is_refused_in_canns_words(call, message):
    with pytest.raises(RuntimeError) as info:
        call()
    lines = str(info.value).split("\n")
    assert lines[0] == message
    assert "ERR01100 OPS call acl api failed" in lines[-1]


def _affinity_mode_error(monkeypatch):
    monkeypatch.setenv("CPU_AFFINITY_CONF", "1")
    return lambda: torch_npu.utils.set_thread_affinity([10**6, 10**6])


def test_exact_environment_and_utility_messages(monkeypatch, tmp_path):
    from torch_npu.testing.testcase import TestCase
    from torch_npu.utils._env import check_environment
    from torch_npu.utils._logging import parse_spec
    from torch_npu.utils._vnpu_extensions import apply_extension_environment

    cases = [
        (
            lambda: check_environment({"TASK_QUEUE_ENABLE": "3"}),
            ValueError,
            "Invalid value '3' of environment variable TASK_QUEUE_ENABLE: expected one of 0, 1, 2",
        ),
        (
            lambda: check_environment({"HCCL_EVENT_TIMEOUT": "-5"}),
            ValueError,
            "Invalid value '-5' of environment variable HCCL_EVENT_TIMEOUT: expected an integer >= 0",
        ),
        (
            lambda: check_environment({"ACL_DEVICE_SYNC_TIMEOUT": "0"}),
            ValueError,
            "Invalid value '0' of environment variable ACL_DEVICE_SYNC_TIMEOUT: expected an integer in [1, 2147483]",
        ),
        (
            lambda: check_environment({"NPU_ASD_UPPER_THRESH": "1"}),
            ValueError,
            "Invalid value '1' of environment variable NPU_ASD_UPPER_THRESH: expected '<int>,<int>'",
        ),
        (
            lambda: apply_extension_environment({"NPU_FORCE_FP16": "yes"}),
            ValueError,
            "Invalid value 'yes' of environment variable NPU_FORCE_FP16: expected one of 0, 1",
        ),
        (
            lambda: parse_spec("memory,+gpu"),
            ValueError,
            "TORCH_NPU_LOGS: unknown module 'gpu'; known modules: memory, dispatch, dispatch_time, silent, recovery, "
            "op_plugin, shmem, env, acl, aclgraph, all",
        ),
        (lambda: TestCase("run").assertObjectIn(object(), [1]), AssertionError, "object not found in iterable"),
    ]
    link = tmp_path / "link"
    link.symlink_to(tmp_path)
    cases.append(
        (
            lambda: torch_npu.utils.collect_env.check_directory_path_readable(str(link)),
            RuntimeError,
            f"Invalid path is a soft chain: {link}",
        )
    )
    for call, kind, message in cases:
        with pytest.raises(kind) as info:
            call()
        assert _first_line(info.value) == message
    monkeypatch.setenv("CPU_AFFINITY_CONF", "7")
    with pytest.raises(ValueError) as info:
        torch_npu.utils.set_thread_affinity([0, 0])
    assert _first_line(info.value) == "CPU_AFFINITY_CONF mode must be 0, 1 or 2, but got '7'"
    monkeypatch.setenv("CPU_AFFINITY_CONF", "1")
    with pytest.raises(ValueError) as info:
        torch_npu.utils.set_thread_affinity([4096, 4097])
    assert _first_line(info.value).startswith("None of the cores [4096, 4097] is available to this process (allowed: [")
