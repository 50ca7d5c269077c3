"""PMCC model obfuscation (torch_npu.npu.obfuscation_*).

These APIs talk to the PMCC confidential-computing engine (a TEE service installed next to the
driver). Without it, torch_npu returns error 507018; vnpu has no PMCC engine, so it validates the
arguments and raises the same way.
"""

import torch

from torch_npu.utils._error_code import ErrCode, pta_error

_NOT_DEPLOYED = (
    "the PMCC model-obfuscation engine is not deployed on this machine (ACL error 507018); "
    "vnpu provides no PMCC service"
)


def obfuscation_initialize(
    hidden_size: int,
    tp_rank: int,
    cmd: int,
    *,
    data_type: torch.dtype | None = None,
    model_obf_seed_id: int = 0,
    data_obf_seed_id: int = 0,
    thread_num: int = 4,
    obf_coefficient: float = 1.0,
) -> int:
    if cmd in (1, 2) and not (isinstance(hidden_size, int) and 1 <= hidden_size <= 10000):
        raise ValueError(
            f"hidden_size must be in [1, 10000] when cmd is {cmd}, but got {hidden_size}" + pta_error(ErrCode.VALUE)
        )
    if not 0.0 < float(obf_coefficient) <= 1.0:
        raise ValueError(f"obf_coefficient must be in (0.0, 1.0], but got {obf_coefficient}" + pta_error(ErrCode.VALUE))
    if data_type is not None and data_type not in (torch.float16, torch.float32, torch.bfloat16, torch.int8):
        raise TypeError(
            f"data_type must be float16, float32, bfloat16 or int8, but got {data_type}" + pta_error(ErrCode.TYPE)
        )
    raise RuntimeError("obfuscation_initialize: " + _NOT_DEPLOYED + pta_error(ErrCode.ACL))


def obfuscation_calculate(fd: int, x: torch.Tensor, param: object, *, obf_coefficient: float = 1.0) -> torch.Tensor:
    raise RuntimeError("obfuscation_calculate: " + _NOT_DEPLOYED + pta_error(ErrCode.ACL))


def obfuscation_finalize(fd_to_close: int) -> None:
    raise RuntimeError("obfuscation_finalize: " + _NOT_DEPLOYED + pta_error(ErrCode.ACL))
