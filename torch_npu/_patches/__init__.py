"""Every change vnpu makes to another library, declared in one place with its reason.

A patch names its target, says why it exists and when it applies, and points at the function that
applies it. `apply_patches()` (called once by ``import torch_npu``) applies the patches whose
libraries are already imported and arranges for the others to be applied the moment their library
is imported, so nothing is imported early and nothing is patched silently.
"""

from torch_npu._patches.compile_declarations import COMPILE_PATCHES
from torch_npu._patches.registry import Patch, applied_patches, apply_patches, set_runtime_patch

PATCHES = (
    Patch(
        target="torchvision.extension._has_ops",
        module="torchvision.extension",
        why=(
            "PyPI's x86_64 torchvision wheels are CUDA builds: beside the CPU build of torch their C++ "
            "operators cannot load and `import torchvision` fails ('operator torchvision::nms does not "
            "exist'). vnpu then defines torchvision's operators with its own CPU kernels (npu tensors "
            "reach them through the redirect) and tells torchvision its operators are available."
        ),
        when="on import of torchvision, only if torchvision's own extension did not load",
        apply="torch_npu._patches.torchvision_ops:provide_operators",
    ),
)

PATCHES += (
    Patch(
        target="torch.utils._foreach_utils._get_foreach_kernels_supported_devices as imported by "
        "torch.optim.optimizer and torch.optim.swa_utils",
        module="torch.optim.swa_utils",
        why="PyTorch defaults optimizers (and swa_utils' AveragedModel) to foreach kernels on every "
        "PrivateUse1 backend and to the per-parameter loop on the CPU; the two round differently (ASGD a few "
        "ulps apart after 3 steps). npu computes with the CPU's kernels and must give the CPU's numbers, so "
        "its defaults are the CPU's; foreach=True still selects the foreach kernels. The list itself is left "
        "whole: clip_grad_norm_ / clip_grad_value_ take foreach kernels on the CPU too, and with npu removed "
        "from it they refused foreach=True on npu.",
        when="at import of torch_npu (torch.optim is imported with torch)",
        apply="torch_npu._patches.cpu_defaults:foreach_defaults_of_the_cpu",
        changes=(
            "torch.optim.optimizer._get_foreach_kernels_supported_devices",
            "torch.optim.swa_utils._get_foreach_kernels_supported_devices",
        ),
    ),
)

PATCHES += (
    Patch(
        target="torch.distributed.tensor sharding strategies of npu.npu_rms_norm / npu.npu_rotary_mul",
        module="torch.distributed.tensor",
        why="DTensor runs an operator only with a sharding strategy; torch_npu registers its operators' through "
        "PyTorch's extension point (register_sharding), so tensor-parallel models call them on DTensors.",
        when="on import of torch.distributed.tensor",
        apply="torch_npu.distributed.tensor._sharding_strategies:register_sharding_strategies",
    ),
    Patch(
        target="torch.distributed.tensor.DTensor._op_dispatcher._custom_op_handlers: npu.npu_fusion_attention(_grad) "
        "and their _v3 forms",
        module="torch.distributed.tensor",
        why="torch_npu runs its attention operator on DTensors sharded over the batch or the heads (data and tensor "
        "parallel attention) through DTensor's custom handler table: the call on each shard needs head_num set to "
        "the heads the shard holds, which a sharding rule cannot express.",
        when="on import of torch.distributed.tensor",
        apply="torch_npu.distributed.tensor._attention_sharding:install_attention_handlers",
    ),
    Patch(
        target="torch.distributed.fsdp.sharded_grad_scaler.ShardedGradScaler",
        module="torch.distributed.fsdp.sharded_grad_scaler",
        why="torch_npu installs its _ShardedGradScaler there: FSDP code that builds ShardedGradScaler() gets one "
        "whose default device is npu (torch's defaults to cuda) and whose found-inf flags are all-reduced.",
        when="on import of torch.distributed.fsdp.sharded_grad_scaler",
        apply="torch_npu._patches.device_defaults:sharded_grad_scaler_is_npus",
        changes=("torch.distributed.fsdp.sharded_grad_scaler.ShardedGradScaler",),
    ),
    Patch(
        target="torch.UntypedStorage.__deepcopy__",
        module="torch.storage",
        why="copy.deepcopy of an npu tensor copies its storage; torch_npu keeps the storage's private format "
        "(NZ, NC1HWC0 ...) on the copy, so a deep-copied model keeps its weights' formats and physical sizes.",
        when="at import of torch_npu",
        apply="torch_npu._patches.storage_formats:deepcopy_keeps_the_format",
        changes=("torch.UntypedStorage.__deepcopy__",),
    ),
    Patch(
        target="torch._tensor_str._tensor_str",
        module="torch._tensor_str",
        why="torch_npu prints an npu tensor from a host copy; PyTorch's formatter converts the values to float64 "
        "on the device, which the card cannot do (the conversion is cast to float32 with a warning).",
        when="at import of torch_npu",
        apply="torch_npu._patches.tensor_printing:npu_tensors_print_from_the_host",
        changes=("torch._tensor_str._tensor_str",),
    ),
    Patch(
        target="torch.serialization._legacy_save",
        module="torch.serialization",
        why="torch.save(..., _use_new_zipfile_serialization=False) writes the legacy format, which torch_npu does not "
        "recommend for npu tensors; it prints its warning once per process and saves.",
        when="at import of torch_npu",
        apply="torch_npu._patches.legacy_serialization:legacy_save_warns_once",
        changes=("torch.serialization._legacy_save",),
    ),
    Patch(
        target="torch.utils.checkpoint.DefaultDeviceType",
        module="torch.utils.checkpoint",
        why="activation checkpointing saves and restores the RNG state of one device type; torch_npu makes it npu, "
        "so dropout inside a checkpointed npu region replays the same mask in the recomputation.",
        when="at import of torch_npu",
        apply="torch_npu._patches.device_defaults:checkpoint_device_type",
        changes=("torch.utils.checkpoint.DefaultDeviceType._default_device_type",),
    ),
    Patch(
        target="torch.nn.parameter.UninitializedTensorMixin._allowed_methods",
        module="torch.nn.parameter",
        why="lazy modules refuse most methods on uninitialized parameters but allow Tensor.cuda; Tensor.npu is "
        "allowed the same way, so `LazyLinear(...).npu()` works as `.cuda()` does.",
        when="at import of torch_npu",
        apply="torch_npu._patches.device_defaults:lazy_modules_allow_npu",
        changes=("torch.nn.parameter.UninitializedTensorMixin._allowed_methods",),
    ),
    Patch(
        target="torch.autograd.set_multithreading_enabled (the importing thread)",
        module="torch.autograd",
        why="the autograd engine hands a non-CPU device's backward to a worker thread; npu kernels run on the "
        "host, so the hop only costs time. Off for the importing thread only (the setting is thread-local).",
        when="at import of torch_npu",
        apply="torch_npu._patches.device_defaults:backward_on_the_importing_thread",
    ),
    Patch(
        target="torch.<operator> (one per torch_npu operator torch does not have)",
        module="torch",
        why="torch_npu's operators once lived in the torch namespace; torch_npu keeps torch.<name> aliases that "
        "raise its deprecation error pointing at torch_npu.<name>, and code written for it expects that error.",
        when="at import of torch_npu, after its operators are defined",
        apply="torch_npu._patches.torch_namespace:deprecated_operator_aliases",
        changes=(
            "torch.npu_*",
            "torch._npu_*",
            "torch.fast_gelu",
            "torch.one_",
            "torch.print_npugraph_tensor",
            "torch.save_npugraph_tensor",
            "torch.scatter_update",
            "torch.scatter_update_",
            "torch.batch_norm_reduce",
            "torch.slow_conv_dilated2d_backward",
            "torch.slow_conv_transpose2d_backward",
            "torch.kl_div_backward",
            "torch.kl_div_target_backward",
            "torch.l1_loss_backward",
            "torch.repeat_interleave_backward_int",
            "torch.repeat_interleave_backward_tensor",
            "torch.fft_r2c_backward",
            "torch.fft_c2r_backward",
            "torch.stft_backward",
            "torch.matmul_double_backward",
            "torch._amp_foreach_non_finite_check",
            "torch._conv_depthwise2d_backward",
            "torch._quantize_per_tensor_impl",
            "torch._quantize_per_channel_impl",
            "torch.copy_memory_",
            "torch.empty_with_swapped_memory",
            "torch.empty_with_format",
            "torch.get_npu_format",
            "torch.ffn_worker_scheduler*",
            "torch.attention_worker_scheduler*",
            "torch.obfuscation_*",
            "torch.reverse",
            "torch.batch_norm_gather_stats_update",
            "torch.decode_jpeg",
            "torch.img_to_tensor",
            "torch.image_normalize",
            "torch.image_normalize_",
            "torch.crop_and_resize",
            "torch.dropout_with_byte_mask",
            "torch._dropout_with_byte_mask",
            "torch._dropout_with_byte_mask_backward",
            "torch._lstm_npu*",
            "torch._gru_npu*",
        ),
    ),
    Patch(
        target="torch.Tensor.npu_format_cast / torch.Tensor.npu_format_cast_",
        module="torch",
        why="torch_npu gives tensors npu_format_cast(acl_format, customize_dtype=None) and npu_format_cast_(src, "
        "customize_dtype=None) methods; code calls them as methods.",
        when="at import of torch_npu",
        apply="torch_npu._patches.torch_namespace:tensor_format_cast_methods",
        changes=("torch.Tensor.npu_format_cast", "torch.Tensor.npu_format_cast_"),
    ),
    Patch(
        target="torch.Tensor.copy_memory_",
        module="torch",
        why="torch_npu gives tensors a copy_memory_(src, non_blocking=False) method (an npu-to-npu memory copy); "
        "code calls it as a method.",
        when="at import of torch_npu, after its operators are defined",
        apply="torch_npu._patches.torch_namespace:tensor_copy_memory_method",
        changes=("torch.Tensor.copy_memory_",),
    ),
    Patch(
        target="torch.compiler.npugraph_mark_step_begin",
        module="torch",
        why="torch_npu's public step marker for NPU graph trees (torch.compiler.cudagraph_mark_step_begin's "
        "counterpart): training loops call it before each model invocation so the next run may overwrite the "
        "graphs' outputs.",
        when="at import of torch_npu",
        apply="torch_npu._patches.torch_namespace:npugraph_mark_step_begin",
        changes=("torch.compiler.npugraph_mark_step_begin",),
    ),
    Patch(
        target="torch.nn.DropoutWithByteMask / torch.nn.functional.dropout_with_byte_mask",
        module="torch",
        why="torch_npu once put its byte-mask dropout layer and function in torch.nn; it keeps both names, each "
        "call warning that it is deprecated in favour of torch_npu.contrib, and its documented examples "
        "(fuse_add_softmax_dropout's) still build the layer through torch.nn.",
        when="at import of torch_npu",
        apply="torch_npu._patches.torch_namespace:byte_mask_dropout_in_torch_nn",
        changes=("torch.nn.DropoutWithByteMask", "torch.nn.functional.dropout_with_byte_mask"),
    ),
    Patch(
        target="torch.distributed.is_hccl_available / torch.distributed.init_process_group",
        module="torch.distributed",
        why="torch_npu adds is_hccl_available to torch.distributed; init_process_group('hccl') without timeout= "
        "is bounded by HCCL_CONNECT_TIMEOUT during the rendezvous, as torch_npu's link setup is (a rank that "
        "never arrives fails the others with torch_npu's DIST timeout code). Other backends are untouched.",
        when="at import of torch_npu (torch.distributed is imported with torch)",
        apply="torch_npu._patches.torch_namespace:hccl_in_torch_distributed",
        changes=("torch.distributed.is_hccl_available", "torch.distributed.init_process_group"),
    ),
)

# torch_npu.contrib.transfer_to_npu (or TORCH_TRANSFER_TO_NPU=1): CUDA code runs on npu unchanged. Applied only
# when that module is imported; the functions live beside the rewriting helpers they share.
_TRANSFER = "torch_npu.contrib.transfer_to_npu"
_TRANSFER_WHEN = "on import of torch_npu.contrib.transfer_to_npu (transfer_to_npu only)"
PATCHES += (
    Patch(
        target="torch.cuda.* (torch.npu's names), torch.cuda.amp / random / memory, CUDAGraph, DoubleTensor, "
        "torch._C._host_emptyCache",
        module=_TRANSFER,
        why="CUDA code calls torch.cuda; torch_npu's transfer_to_npu gives torch.cuda every name of torch.npu, "
        "device arguments rewritten, and counts the calls (`vnpu run` reports them as what a migration must "
        "address).",
        when=_TRANSFER_WHEN,
        apply=f"{_TRANSFER}:alias_cuda_module",
        changes=("torch.cuda.*", "torch._C._host_emptyCache"),
    ),
    Patch(
        target="torch factories, Tensor.new_*/to/pin_memory/cuda/is_cuda, Module.to/to_empty/cuda, UntypedStorage, "
        "torch.device context, autocast, GradScaler, torch.fft.*freq",
        module=_TRANSFER,
        why="device='cuda' / 'cuda:N' / torch.device('cuda') / map_location in CUDA code mean the npu: only whole "
        "device strings are rewritten, never file names or other strings that contain 'cuda'.",
        when=_TRANSFER_WHEN,
        apply=f"{_TRANSFER}:device_arguments_of_tensors_and_modules",
        changes=(
            "torch.*",
            "torch.Tensor.*",
            "torch.nn.Module.*",
            "torch.UntypedStorage.*",
            "torch.TypedStorage.*",
            "torch.fft.*",
            "torch._utils._get_available_device_type",
            "torch.nn.parameter.UninitializedTensorMixin._allowed_methods",
        ),
    ),
    Patch(
        target="torch.Generator / torch.Event",
        module=_TRANSFER,
        why="torch.Generator(device='cuda') and torch.Event(device='cuda') must make npu ones; the stand-in classes "
        "keep isinstance checks true for real generators and events.",
        when=_TRANSFER_WHEN,
        apply=f"{_TRANSFER}:device_classes",
        changes=("torch.Generator", "torch.Event"),
    ),
    Patch(
        target="torch.distributed: nccl -> hccl, ProcessGroupNCCL, DDP/FSDP/DeviceMesh/PipelineStage devices",
        module=_TRANSFER,
        why="init_process_group('nccl') and the device arguments of the parallel wrappers in CUDA code mean hccl "
        "and npu; only the backend argument is rewritten.",
        when=_TRANSFER_WHEN,
        apply=f"{_TRANSFER}:nccl_means_hccl",
        changes=("torch.distributed.*",),
    ),
    Patch(
        target="torch.profiler.profile.__init__",
        module=_TRANSFER,
        why="ProfilerActivity.CUDA in CUDA code's profiler setup profiles the npu (PrivateUse1).",
        when=_TRANSFER_WHEN,
        apply=f"{_TRANSFER}:cuda_activity_means_npu",
        changes=("torch.profiler.profile.__init__",),
    ),
    Patch(
        target="torch.autograd.profiler_util.Kernel, torch.utils.cpp_extension.include_paths",
        module=_TRANSFER,
        why="Profiler kernels CUDA code records on device 'cuda' are npu kernels, and an extension CUDA code "
        "builds with include_paths('cuda') is built for npu: PyTorch's and torch_npu's headers, not CUDA's.",
        when=_TRANSFER_WHEN,
        apply=f"{_TRANSFER}:cuda_kernels_and_extensions_mean_npu",
        changes=("torch.autograd.profiler_util.Kernel", "torch.utils.cpp_extension.include_paths"),
    ),
)

PATCHES += COMPILE_PATCHES

_LIGHTNING_ACCELERATOR_WHY = (
    "Lightning has no npu accelerator: Trainer(accelerator='npu') is refused. vnpu registers "
    "torch_npu.contrib.lightning's NPUAccelerator under 'npu' in Lightning's accelerator registry, "
    "the way Lightning documents for new hardware."
)
_LIGHTNING_CONNECTOR_WHY = (
    "Lightning's Trainer gives one device of an accelerator it does not know a CPU single-device "
    "strategy, and runs '16-mixed'/'bf16-mixed' autocast on cuda for it; with accelerator='npu' the "
    "strategy gets the npu device and the precision plugin is NPUMixedPrecision (autocast on npu, "
    "torch_npu's GradScaler). Other accelerators keep Lightning's own choices."
)
for _package in ("lightning.pytorch", "pytorch_lightning"):
    PATCHES += (
        Patch(
            target=f"{_package}.accelerators.AcceleratorRegistry['npu']",
            module=f"{_package}.accelerators",
            why=_LIGHTNING_ACCELERATOR_WHY,
            when=f"on import of {_package}",
            apply=f"torch_npu._patches.lightning_npu:register_accelerator:{_package}.accelerators",
        ),
        Patch(
            target=f"{_package}.trainer.connectors.accelerator_connector._AcceleratorConnector."
            "_choose_strategy / _check_and_init_precision",
            module=f"{_package}.trainer.connectors.accelerator_connector",
            why=_LIGHTNING_CONNECTOR_WHY,
            when=f"on import of {_package}, for accelerator='npu' only",
            apply=f"torch_npu._patches.lightning_npu:choose_npu_strategy_and_precision:"
            f"{_package}.trainer.connectors.accelerator_connector",
        ),
        Patch(
            target=f"{_package}.strategies.ddp.DDPStrategy._setup_model",
            module=f"{_package}.strategies.ddp",
            why="Lightning wraps the model in DistributedDataParallel inside torch.cuda.stream(torch.cuda.Stream()) "
            "for every non-CPU device; on npu the side stream is torch.npu's, as on cuda it is cuda's.",
            when=f"on import of {_package}, for models on npu only",
            apply=f"torch_npu._patches.lightning_npu:wrap_ddp_on_an_npu_stream:{_package}.strategies.ddp",
        ),
    )

__all__ = [
    "PATCHES",
    "RUNTIME_PATCHES",
    "FLOPS_COUNTING",
    "Patch",
    "apply_patches",
    "applied_patches",
    "set_runtime_patch",
]

PATCHES += (
    Patch(
        target="msprobe.core.dump.hook_manager.BaseHookManager._should_execute_hook",
        module="msprobe.core.dump.hook_manager",
        why="On a card an npu_* operator's backward is one kernel; vnpu may run it as a Python composition, "
        "whose Tensor.pow / Tensor.mean / torch.rsqrt calls msprobe's API hooks would dump as operators a "
        "card's dump never has. While an npu operator's backward runs, its inner calls are not API calls.",
        when="on import of msprobe's hook manager (msprobe PrecisionDebugger)",
        apply="torch_npu._patches.msprobe_hooks:operator_backward_is_one_api",
    ),
)

PATCHES += (
    Patch(
        target="os.getenv / os.environ.get",
        module="os",
        why="torch_npu replaces both at import and logs every environment variable a program reads through them "
        "(once each, INFO on torch_npu.env) when that log is on, so a run's configuration can be read back from "
        "its log; code checks `os.getenv is torch_npu.utils.patch_getenv._patched_getenv`.",
        when="at import of torch_npu",
        apply="torch_npu.utils.patch_getenv:install",
    ),
)

PATCHES += (
    Patch(
        target="torch.profiler.profiler._KinetoProfile.add_metadata / add_metadata_json",
        module="torch.profiler.profiler",
        why="kineto's trace writer turns every backslash of the trace into '/', so a quote (escaped by add_metadata) "
        "or a backslash in a metadata key or value ends its JSON string early and the whole trace file no longer "
        "parses; torch_npu replaces those characters before the call and warns that the metadata was altered.",
        when="at import of torch_npu (torch.profiler is imported with torch)",
        apply="torch_npu.profiler._add_metadata_sanitizer_patch:_apply_metadata_sanitizer_patch",
        changes=(
            "torch.profiler.profiler._KinetoProfile.add_metadata",
            "torch.profiler.profiler._KinetoProfile.add_metadata_json",
        ),
    ),
)

PATCHES += (
    Patch(
        target="torch._C._distributed_c10d.ProcessGroup._get_sequence_number_for_group",
        module="torch.distributed",
        why="c10d refuses sequence numbers for custom backends ('ProcessGroup custom does not yet support "
        "sequence numbers'); torch_npu answers for hccl groups with the hccl backend's count of collectives.",
        when="at import of torch_npu (torch.distributed is imported with torch)",
        apply="torch_npu._patches.distributed_c10d:sequence_numbers_of_hccl_groups",
    ),
    Patch(
        target="torch.distributed.distributed_c10d._add_ephemeral_timeout_for_all_pgs",
        module="torch.distributed",
        why="torch extends only NCCL groups' timeouts; torch_npu's version extends hccl groups too (the extension "
        "lasts until the first collective issued after the call has finished).",
        when="at import of torch_npu (torch.distributed is imported with torch)",
        apply="torch_npu._patches.distributed_c10d:ephemeral_timeouts_of_hccl_groups",
        changes=("torch.distributed.distributed_c10d._add_ephemeral_timeout_for_all_pgs",),
    ),
    Patch(
        target="torch.distributed.batch_isend_irecv / torch.distributed.distributed_c10d.batch_isend_irecv",
        module="torch.distributed",
        why="torch_npu returns one work for a batch of npu sends and receives (HCCL runs the batch as one task) "
        "and refuses a batch that mixes npu tensors with others.",
        when="at import of torch_npu (torch.distributed is imported with torch)",
        apply="torch_npu._patches.distributed_c10d:one_work_per_npu_p2p_batch",
        changes=("torch.distributed.batch_isend_irecv",),
    ),
    Patch(
        target="torch.distributed.gather / torch.distributed.distributed_c10d.gather",
        module="torch.distributed",
        why="HCCL has no gather: torch_npu runs dist.gather of npu tensors on hccl groups as an all-gather "
        "(warning the destination rank) unless torch.npu.use_compatible_impl(True) asks for the backend's gather.",
        when="at import of torch_npu (torch.distributed is imported with torch)",
        apply="torch_npu._patches.distributed_c10d:gather_through_allgather",
        changes=("torch.distributed.gather",),
    ),
    Patch(
        target="torch.nn.parallel.distributed._verify_param_shape_across_processes",
        module="torch.nn.parallel.distributed",
        why="DistributedDataParallel's constructor checks that every rank has the same parameter shapes by "
        "exchanging their sizes and reading them back; in planning mode tensors have no values (and "
        "collectives move none), so the check cannot run. Every rank of a planned job runs the same program.",
        when="on import of torch.nn.parallel.distributed, in planning mode (VNPU_PLAN=1) only",
        apply="torch_npu._patches.distributed_c10d:no_parameter_check_in_planning_mode",
    ),
    Patch(
        target="torch.distributed.reinit_process_group",
        module="torch.distributed",
        why="torch_npu adds reinit_process_group to torch.distributed: fault-tolerant training rebuilds (or resumes) "
        "a group's hccl link after a device fault without recreating the group.",
        when="at import of torch_npu (torch.distributed is imported with torch)",
        apply="torch_npu._patches.distributed_c10d:reinit_process_group_in_torch_distributed",
        changes=("torch.distributed.reinit_process_group",),
    ),
    Patch(
        target="torch.distributed.nn.functional._AllGatherBase.backward",
        module="torch.distributed.nn.functional",
        why="PyTorch's backward of the autograd all-gather raises 'Backend not supported!' on any group but "
        "NCCL/XCCL; torch_npu's reduce-scatters the gradient on hccl groups as well.",
        when="on import of torch.distributed.nn.functional",
        apply="torch_npu.distributed.nn.functional:install",
    ),
)

PATCHES += (
    Patch(
        target="torch.distributed.rpc.BackendType (NPU_TENSORPIPE)",
        module="torch.distributed.rpc",
        why="torch_npu registers the NPU_TENSORPIPE RPC backend (NPUTensorPipeRpcBackendOptions with npu device "
        "maps) through torch.distributed.rpc's backend registry; BackendType is rebuilt by the registry and "
        "re-exported, as torch_npu does.",
        when="at import of torch_npu (torch.distributed.rpc is imported with torch)",
        apply="torch_npu._patches.distributed_rpc:npu_tensorpipe_backend",
        changes=("torch.distributed.rpc.BackendType", "torch.distributed.rpc.backend_registry.BackendType"),
    ),
    Patch(
        target="torch.distributed.rpc: the RPC pickler's tensor reducer, api._invoke_rpc, remote, PyRRef.to_here",
        module="torch.distributed.rpc",
        why="under NPU_TENSORPIPE an npu tensor in a request arrives on the callee's device the caller's device "
        "map names, and one in a reply on the caller's device mapped to it, failing with TensorPipe's message "
        "without a mapping. PyTorch's agent carries the bytes as host tensors; the reducer tags each npu tensor "
        "with its device, and rpc_sync / rpc_async / remote name the destination while their message is "
        "serialized (builtin operators with npu arguments take the Python-call path, whose tensors the reducer "
        "sees; RRef.to_here fetches through a Python call for the same reason). Other backends and CPU tensors "
        "are untouched.",
        when="at import of torch_npu (torch.distributed.rpc is imported with torch)",
        apply="torch_npu._patches.distributed_rpc:npu_tensors_in_rpc_messages",
        changes=(
            "torch.distributed.rpc.remote",
            "torch.distributed.rpc.api.remote",
            "torch.distributed.rpc.api._invoke_rpc",
            "torch.distributed.rpc.PyRRef.to_here",
        ),
    ),
)

PATCHES += (
    Patch(
        target="torch.distributed.tensor.experimental._context_parallel._attention: _enable_cp_dtensor_dispatcher / "
        "_disable_cp_dtensor_dispatcher",
        module="torch.distributed.tensor.experimental._context_parallel._attention",
        why="context_parallel hands attention on sequence-sharded DTensors to ring-attention handlers, which PyTorch "
        "has for CUDA's SDPA operators only; torch_npu adds the handlers of its attention operator when the "
        "dispatcher is enabled. On vnpu SDPA of npu tensors takes the CPU's fused kernel, so the handlers cover "
        "it (and npu_fusion_attention_v3 as on the card); they are removed when the dispatcher is disabled.",
        when="on import of its module (torch.distributed.tensor.experimental imports it)",
        apply="torch_npu._patches.context_parallel:npu_attention_in_context_parallel",
        changes=(
            "torch.distributed.tensor.experimental._context_parallel._attention._enable_cp_dtensor_dispatcher",
            "torch.distributed.tensor.experimental._context_parallel._attention._disable_cp_dtensor_dispatcher",
        ),
    ),
)

PATCHES += (
    Patch(
        target="torch.UntypedStorage / torch.TypedStorage: _share_npu_, _new_shared_npu, _release_ipc_counter_npu",
        module="torch.storage",
        why="torch_npu gives storages these methods (its reductions and its tests call them): _share_npu_ moves an "
        "npu storage into memory another process can map and returns its handle, _new_shared_npu maps a handle "
        "received from another process; there is no IPC reference counter to release.",
        when="at import of torch_npu",
        apply="torch_npu.multiprocessing.reductions:_add_storage_methods",
        changes=(
            "torch.UntypedStorage._share_npu_",
            "torch.UntypedStorage._new_shared_npu",
            "torch.UntypedStorage._release_ipc_counter_npu",
            "torch.TypedStorage._share_npu_",
            "torch.TypedStorage._new_shared_npu",
            "torch.TypedStorage._release_ipc_counter_npu",
        ),
    ),
    Patch(
        target="torch.multiprocessing.reductions.reduce_tensor / reduce_storage / reduce_event",
        module="torch.multiprocessing.reductions",
        why="torch_npu's reductions: an npu tensor put on a torch.multiprocessing queue (or passed to a spawned "
        "process) shares its storage with the receiver, as IPC memory handles do on the card (PyTorch's own "
        "reduction refuses non-CPU storages: '_share_fd_: only available on CPU'); npu events travel as IPC "
        "handles; pickling a bare npu storage is refused with torch_npu's message.",
        when="at import of torch_npu (torch.multiprocessing is imported with torch)",
        apply="torch_npu.multiprocessing.reductions:_add_reductions_methods",
        changes=(
            "torch.multiprocessing.reductions.reduce_tensor",
            "torch.multiprocessing.reductions.reduce_storage",
            "torch.multiprocessing.reductions.reduce_event",
        ),
    ),
)

PATCHES += (
    Patch(
        target="torch.nn.functional.layer_norm / torch.nn.functional.embedding",
        module="torch.nn.functional",
        why="with NPU_ASD_ENABLE set, torch_npu checks the gradients of layer-norm inputs and embedding weights for "
        "silent data corruption: both functions register the detector's gradient hook before computing.",
        when="at import of torch_npu, only when NPU_ASD_ENABLE is set and not 0",
        apply="torch_npu.asd.asd:check_layer_norm_and_embedding",
    ),
)

PATCHES += (
    Patch(
        target="importlib.metadata: a distribution named torch_npu (sys.meta_path gains a distribution finder)",
        module="importlib.metadata",
        why="vnpu is installed as the distribution vnpu, so importlib.metadata.version('torch_npu') raised "
        "PackageNotFoundError and programs that detect torch_npu by its distribution (diffusers) took their "
        "non-Ascend paths on npu; the finder, last on sys.meta_path, answers for torch_npu with vnpu's version.",
        when="at import of torch_npu (importlib.metadata is imported with torch)",
        apply="torch_npu._patches.distribution_metadata:provide_distribution",
    ),
)

# Patches that hold only while something runs (applied and removed by set_runtime_patch, never at an import).
FLOPS_COUNTING = Patch(
    target="the functions of the FLOPs registry (torch.mm, torch.bmm, torch.matmul, torch.addmm, "
    "torch.nn.functional.linear, torch_npu.npu_fusion_attention and the other npu_* operators with a formula)",
    module="torch_npu.profiler._flops_hook",
    why="_ExperimentalConfig(record_flops=True): torch_npu counts each call's floating-point operations from its real "
    "arguments and runs the call inside an mstx range '<flops>-<op>' of the mfu_flops domain, from which "
    "msprof-analyze's operator_mfu computes the kernels' MFU; the functions (and other modules' references to them) "
    "are wrapped for the recording only.",
    when="while a torch_npu profiler with _ExperimentalConfig(record_flops=True) records",
    apply="torch_npu.profiler._flops_hook:install_flops_hooks",
    remove="torch_npu.profiler._flops_hook:remove_flops_hooks",
    changes=("torch.mm", "torch.bmm", "torch.matmul", "torch.addmm", "torch.nn.functional.linear"),
)
RUNTIME_PATCHES = (FLOPS_COUNTING,)
