"""NPU configuration: torch_npu's option store (set_option), compile mode, dumps, core limits, and
the precision knobs (torch.npu.matmul / torch.npu.conv / torch.npu.config).

The precision knobs change numerics (see torch_npu/csrc/precision/PrecisionEmulation.h): vnpu computes
float32 matmul and convolution in full precision, bit-identical to the CPU, until a program sets
one of these knobs or VNPU_PRECISION_EMULATION=1; from then on they act as on Ascend.
"""

import enum
import os
import warnings

import torch

import torch_npu
from torch_npu import _C
from torch_npu.utils._error_code import ErrCode, pta_error

__all__ = [
    "set_option",
    "set_aoe",
    "set_compile_mode",
    "is_jit_compile_false",
    "set_mm_bmm_format_nd",
    "get_mm_bmm_format_nd",
    "init_dump",
    "set_dump",
    "finalize_dump",
    "set_device_limit",
    "get_device_limit",
    "set_stream_limit",
    "get_stream_limit",
    "reset_stream_limit",
    "CubeMathType",
    "use_compatible_impl",
    "are_compatible_impl_enabled",
]

_OPTION_VALUES = {
    "ACL_PRECISION_MODE": ["allow_fp32_to_fp16", "must_keep_origin_dtype"],
    "ACL_OP_SELECT_IMPL_MODE": ["high_performance", "high_precision"],
    "ACL_AICORE_NUM": lambda v: v.isdigit() and 1 <= int(v) <= 32,
    "ACL_OPTYPELIST_FOR_IMPLMODE": None,
    "ACL_OP_DEBUG_LEVEL": ["0", "1", "2", "3", "4"],
    "ACL_DEBUG_DIR": None,
    "ACL_OP_COMPILER_CACHE_MODE": ["disable", "enable", "force"],
    "ACL_OP_COMPILER_CACHE_DIR": None,
    "ACL_OP_DEBUG_OPTION": None,
    "MM_BMM_ND_ENABLE": ["enable", "disable"],
}
_DEPRECATED_OPTIONS = {"ACL_OP_SELECT_IMPL_MODE", "ACL_OPTYPELIST_FOR_IMPLMODE"}
# Other names torch_npu's option registry knows (set by its own APIs, accepted by set_option too).
_REGISTERED_OPTIONS = {
    "jitCompile",
    "ALLOW_INTERNAL_FORMAT",
    "ALLOW_MATMUL_HF32",
    "ALLOW_CONV_HF32",
    "MATMUL_CUBE_MATH_TYPE",
    "autotune",
    "autotunegraphdumppath",
    "mdldumpswitch",
    "mdldumpconfigpath",
    "ACL_AUTO_TUNE_MODE",
    "NPU_FUZZY_COMPILE_BLACKLIST",
    "TORCH_NPU_USE_COMPATIBLE_IMPL",
    "ACL_OP_COMPILER_CACHE_DIR",
    "FORCE_ACLNN_OP_LIST",
}


def _option_allowed(name, value):
    rule = _OPTION_VALUES.get(name)
    if rule is None:
        return True
    if callable(rule):
        return rule(value)
    return value in rule


def set_option(option: dict) -> None:
    """Set compile/runtime options, validated like torch_npu (ACL_PRECISION_MODE, ACL_AICORE_NUM...)."""
    if not isinstance(option, dict):
        raise TypeError("npu option must be a dict." + pta_error(ErrCode.TYPE))
    values = {}
    for name, value in option.items():
        if name not in _OPTION_VALUES and name not in _REGISTERED_OPTIONS:
            raise RuntimeError(f"invalid npu option name:{name}" + pta_error(ErrCode.PARAM))
        text = str(value)
        if not _option_allowed(name, text):
            rule = _OPTION_VALUES[name]
            allowed = "1..32" if callable(rule) else rule
            raise ValueError(f"value of {name} should be in {allowed} but got {value}" + pta_error(ErrCode.VALUE))
        if name in _DEPRECATED_OPTIONS:
            warnings.warn(f"{name} is deprecated in torch_npu and has no effect.")
        values[name] = text
    if values.get("MM_BMM_ND_ENABLE") is not None:
        set_mm_bmm_format_nd(values["MM_BMM_ND_ENABLE"] == "enable")
    if "ACL_PRECISION_MODE" in values:
        _announce_precision_emulation("ACL_PRECISION_MODE=" + values["ACL_PRECISION_MODE"])
    _C._npu_setOption(values)


def set_compile_mode(jit_compile: bool = False) -> None:
    """Choose online compilation (jit) or binary kernels; vnpu records the choice."""
    _C._npu_setOption({"jitCompile": "enable" if jit_compile else "disable"})


def is_jit_compile_false() -> bool:
    torch_npu.npu._lazy_init()
    value = _C._npu_getOption("jitCompile")
    # Atlas A2/A3 default to binary kernels (jit_compile=False), 910A/310P to online compilation.
    if value is None:
        return _C._soc_profile()["version"] >= 220
    return value.decode() == "disable"


def set_aoe(dump_path: str) -> None:
    """Enable AOE tuning dumps into dump_path (created if needed)."""
    if not os.path.exists(dump_path):
        try:
            os.makedirs(dump_path)
        except OSError as e:
            raise ValueError(f"the path of '{dump_path}' is invaild." + pta_error(ErrCode.VALUE)) from e
    _C._npu_setOption({"autotune": "enable", "autotunegraphdumppath": os.path.abspath(dump_path)})


_MM_BMM_ND_ENABLE = True


def set_mm_bmm_format_nd(is_nd: bool = True) -> None:
    """Whether mm/bmm keep ND format (default True); records torch_npu's flag."""
    global _MM_BMM_ND_ENABLE
    _MM_BMM_ND_ENABLE = bool(is_nd)


def get_mm_bmm_format_nd() -> bool:
    return _MM_BMM_ND_ENABLE


def init_dump() -> None:
    """Start dumping operator inputs and outputs (needs set_dump's config file)."""
    from torch_npu.npu import _dump

    _dump.enable()


def set_dump(cfg_file: str) -> None:
    """Read an ACL dump config (JSON: {"dump": {"dump_path": ..., "dump_mode": "all|input|output",
    "dump_list": [...]}}) and dump every npu operator accordingly while dumping is enabled."""
    from torch_npu.npu import _dump

    if not os.path.exists(cfg_file):
        raise AssertionError(f"cfg_file {cfg_file} path does not exists." + pta_error(ErrCode.NOT_FOUND))
    _dump.configure(os.path.abspath(cfg_file))


def finalize_dump() -> None:
    """Stop dumping and flush the dump files."""
    from torch_npu.npu import _dump

    _dump.disable()


_device_limits = {}
_stream_limits = {}


def _core_counts():
    soc = _C._soc_profile()
    return soc["cube_core_num"], soc["vector_core_num"]


def set_device_limit(*args, **kwargs) -> None:
    """set_device_limit(device, cube_num=-1, vector_num=-1): cores this process may use on a device
    (torch_npu allows it once per device)."""
    names = ["device", "cube_num", "vector_num"]
    values = dict(zip(names, args))
    values.update(kwargs)
    unknown = set(values) - set(names)
    if unknown or "device" not in values:
        raise TypeError("set_device_limit(device, cube_num=-1, vector_num=-1)" + pta_error(ErrCode.PARAM))
    index = torch_npu.npu.utils._valid_index(_int_device(values["device"]))
    if index in _device_limits:
        raise RuntimeError(f"set_device_limit can only be called once for npu:{index}" + pta_error(ErrCode.PARAM))
    cube_max, vector_max = _core_counts()
    _device_limits[index] = (
        _core_count("cube_num", values.get("cube_num", -1), cube_max),
        _core_count("vector_num", values.get("vector_num", -1), vector_max),
    )


def _core_count(name, value, limit, unlimited_ok=True):
    """The cores a limit grants: `value` checked against the hardware's `limit` (-1: all of them, where allowed)."""
    if unlimited_ok and value == -1 and not isinstance(value, bool):
        return limit
    if not isinstance(value, int) or isinstance(value, bool) or not 1 <= value <= limit:
        allowed = f"-1 (no limit) or in [1, {limit}]" if unlimited_ok else f"in [1, {limit}]"
        raise ValueError(f"{name} must be {allowed}, but got {value}" + pta_error(ErrCode.VALUE))
    return value


def _int_device(device):
    if not isinstance(device, int) or isinstance(device, bool):
        raise TypeError(f"device must be an int, but got {type(device)}" + pta_error(ErrCode.TYPE))
    return device


def get_device_limit(device: int) -> dict:
    index = torch_npu.npu.utils._valid_index(_int_device(device))
    cube, vector = _device_limits.get(index, _core_counts())
    return {"cube_core_num": cube, "vector_core_num": vector}


# The runtime's resource-limit entry points (torch_npu._C._npu_{set,get,reset}_{device,stream}_res_limit) name
# the kind of core by aclrtDevResLimitType: 0 cube cores, 1 vector cores, one kind per call.
_RES_LIMIT_KINDS = ("cube_num", "vector_num")


def _res_limit_kind(kind):
    if kind not in (0, 1) or isinstance(kind, bool):
        raise ValueError(
            f"resource limit type must be 0 (cube cores) or 1 (vector cores), but got {kind!r}"
            + pta_error(ErrCode.VALUE)
        )
    return kind


def _with_res_limit(limits, maxima, kind, value):
    count = _core_count(_RES_LIMIT_KINDS[_res_limit_kind(kind)], value, maxima[kind], unlimited_ok=False)
    return tuple(count if i == kind else v for i, v in enumerate(limits))


def _set_device_res_limit(device, kind, value) -> None:
    index = torch_npu.npu.utils._valid_index(_int_device(device))
    maxima = _core_counts()
    _device_limits[index] = _with_res_limit(_device_limits.get(index, maxima), maxima, kind, value)


def _get_device_res_limit(device, kind) -> int:
    index = torch_npu.npu.utils._valid_index(_int_device(device))
    return _device_limits.get(index, _core_counts())[_res_limit_kind(kind)]


def _reset_device_res_limit(device) -> None:
    _device_limits.pop(torch_npu.npu.utils._valid_index(_int_device(device)), None)


def _stream_of(stream_id, device_index, device_type):
    return torch_npu.npu.Stream(stream_id=stream_id, device_index=device_index, device_type=device_type)


def _set_stream_res_limit(stream_id, device_index, device_type, type, value) -> None:
    stream = _stream_of(stream_id, device_index, device_type)
    maxima = tuple(get_device_limit(stream.device_index).values())
    current = tuple(get_stream_limit(stream).values())
    _stream_limits[_stream_key(stream)] = _with_res_limit(current, maxima, type, value)


def _get_stream_res_limit(stream_id, device_index, device_type, type) -> int:
    return tuple(get_stream_limit(_stream_of(stream_id, device_index, device_type)).values())[_res_limit_kind(type)]


def _reset_stream_res_limit(stream_id, device_index, device_type) -> None:
    reset_stream_limit(_stream_of(stream_id, device_index, device_type))


def _stream_key(stream):
    if not isinstance(stream, torch.Stream):
        raise TypeError(f"expected a torch_npu.npu.Stream, got {type(stream).__name__}" + pta_error(ErrCode.TYPE))
    return stream.stream_id, stream.device_index


def set_stream_limit(stream: torch.Stream, cube_num: int = -1, vector_num: int = -1) -> None:
    key = _stream_key(stream)
    limits = get_device_limit(stream.device_index)
    _stream_limits[key] = (
        _core_count("cube_num", cube_num, limits["cube_core_num"]),
        _core_count("vector_num", vector_num, limits["vector_core_num"]),
    )


def get_stream_limit(stream: torch.Stream) -> dict:
    key = _stream_key(stream)
    if key in _stream_limits:
        cube, vector = _stream_limits[key]
        return {"cube_core_num": cube, "vector_core_num": vector}
    return get_device_limit(stream.device_index)


def reset_stream_limit(stream: torch.Stream) -> None:
    _stream_limits.pop(_stream_key(stream), None)


class _CubeMathType(enum.IntEnum):
    """How matmul computes float32 on the cube unit (torch.npu.matmul.cube_math_type; torch_npu.npu.CubeMathType).
    torch_npu names the class _CubeMathType, so its members print as `_CubeMathType.USE_HF32`."""

    KEEP_DTYPE = 0
    ALLOW_FP32_DOWN_PRECISION = 1
    USE_FP16 = 2
    USE_HF32 = 3
    USE_FP32_ADD = 4
    FORCE_GRP_ACC_FOR_FP32 = 4


CubeMathType = _CubeMathType

_announced = False


def _announce_precision_emulation(what):
    global _announced
    if not _announced and os.environ.get("VNPU_PRECISION_EMULATION") != "1":
        _announced = True
        warnings.warn(
            f"vnpu: {what} turns on Ascend precision emulation: float32 matmul and convolution "
            "operands are now rounded as the NPU's cube unit rounds them (convolutions to HF32 unless "
            "torch.npu.conv.allow_hf32 = False), so results differ from the CPU's."
        )


def _check_bool(name, value):
    if not isinstance(value, bool):
        raise TypeError(f"{name} must be a bool, but got {type(value)}" + pta_error(ErrCode.TYPE))


class _MatmulConfig:
    """torch.npu.matmul: allow_hf32 (default False) and cube_math_type."""

    @property
    def allow_hf32(self):
        return self.cube_math_type in (CubeMathType.ALLOW_FP32_DOWN_PRECISION, CubeMathType.USE_HF32)  # None: False

    @allow_hf32.setter
    def allow_hf32(self, value):
        _check_bool("allow_hf32", value)
        _announce_precision_emulation(f"torch.npu.matmul.allow_hf32 = {value}")
        _C._npu_setOption(
            {
                "ALLOW_MATMUL_HF32": "enable" if value else "disable",
                "MATMUL_CUBE_MATH_TYPE": str(
                    int(CubeMathType.ALLOW_FP32_DOWN_PRECISION if value else CubeMathType.KEEP_DTYPE)
                ),
            }
        )

    @property
    def cube_math_type(self):
        """None until it or allow_hf32 is set (matmul then keeps float32), as torch_npu reports it."""
        value = _C._npu_getOption("MATMUL_CUBE_MATH_TYPE")
        return CubeMathType(int(value.decode())) if value else None

    @cube_math_type.setter
    def cube_math_type(self, value):
        try:
            value = CubeMathType(value)
        except ValueError as e:
            raise ValueError(
                f"cube_math_type must be one of {[m.name for m in CubeMathType]}, but got {value}"
                + pta_error(ErrCode.VALUE)
            ) from e
        _announce_precision_emulation(f"torch.npu.matmul.cube_math_type = {value.name}")
        _C._npu_setOption({"MATMUL_CUBE_MATH_TYPE": str(int(value))})


def _get_conv_hf32():
    value = _C._npu_getOption("ALLOW_CONV_HF32")
    return value is None or value.decode() in ("", "enable")


def _set_conv_hf32(value):
    _check_bool("allow_hf32", value)
    _announce_precision_emulation(f"torch.npu.conv.allow_hf32 = {value}")
    _C._npu_setOption({"ALLOW_CONV_HF32": "enable" if value else "disable"})


class _ConvConfig:
    """torch.npu.conv: allow_hf32 (default True, as on Atlas A2/A3)."""

    allow_hf32 = property(lambda self: _get_conv_hf32(), lambda self, value: _set_conv_hf32(value))


class _NpuConfig:
    """torch.npu.config: allow_internal_format (default False on Atlas A2/A3)."""

    @property
    def allow_internal_format(self):
        value = _C._npu_getOption("ALLOW_INTERNAL_FORMAT")
        if value is None:
            return _C._soc_profile()["version"] < 220  # 910A/310P create internal formats by default
        return value.decode() == "enable"

    @allow_internal_format.setter
    def allow_internal_format(self, value):
        _C._npu_setOption({"ALLOW_INTERNAL_FORMAT": "enable" if value else "disable"})

    def __setattr__(self, name, value):
        if name == "allow_internal_format":
            object.__setattr__(self, name, value)
            return
        from torch_npu.utils._vnpu_extensions import accept_unknown_config

        accept_unknown_config(name, value)
        object.__setattr__(self, name, value)


matmul = _MatmulConfig()
conv = _ConvConfig()
config = _NpuConfig()
_C._update_precision_from_options()  # VNPU_PRECISION_EMULATION=1 applies torch_npu's defaults


def use_compatible_impl(is_enable: bool) -> None:
    """Use kernels whose semantics match upstream PyTorch exactly (TORCH_NPU_USE_COMPATIBLE_IMPL).
    vnpu always runs PyTorch's own kernels, so both settings compute the same; the switch is kept."""
    if not isinstance(is_enable, bool):
        raise TypeError(f"is_enable must be a bool, but got {type(is_enable)}" + pta_error(ErrCode.TYPE))
    _C._npu_setOption({"TORCH_NPU_USE_COMPATIBLE_IMPL": "1" if is_enable else "0"})


def are_compatible_impl_enabled() -> bool:
    value = _C._npu_getOption("TORCH_NPU_USE_COMPATIBLE_IMPL")
    if value is None:
        return os.environ.get("TORCH_NPU_USE_COMPATIBLE_IMPL", "0") == "1"
    return value.decode() == "1"
