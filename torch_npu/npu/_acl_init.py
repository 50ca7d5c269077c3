"""What torch_npu checks as it initialises ACL (at the first set_device or lazy initialisation):
ACL_OP_INIT_MODE and the user JSON that TORCH_ACL_INIT_CONFIG_PATH names."""

import json
import os
import warnings

from torch_npu.utils._error_code import ErrCode, pta_error

_ACL_OP_INIT_MODES = ("0", "1", "2")
_DEFAULT_ACL_OP_INIT_MODE = "0"
# From this CANN release on, set_device initialises lazily and the user's aclInit JSON must name device 0.
_LAZY_SET_DEVICE_CANN = "8.3.RC1"


def acl_op_init_mode() -> int:
    """ACL_OP_INIT_MODE (0, 1 or 2); any other value warns and means the default, 0."""
    value = os.environ.get("ACL_OP_INIT_MODE")
    if value is None:
        return int(_DEFAULT_ACL_OP_INIT_MODE)
    if value.strip() not in _ACL_OP_INIT_MODES:
        warnings.warn(
            "Get env ACL_OP_INIT_MODE not in [0, 1, 2], so reset it to the default value "
            f"{_DEFAULT_ACL_OP_INIT_MODE}."
        )
        return int(_DEFAULT_ACL_OP_INIT_MODE)
    return int(value)


def check_acl_init_config() -> None:
    """Validate the JSON TORCH_ACL_INIT_CONFIG_PATH names, as aclInit would read it."""
    path = os.environ.get("TORCH_ACL_INIT_CONFIG_PATH")
    if not path:
        return
    if not os.path.isfile(path) or os.path.islink(path):
        raise RuntimeError(f"TORCH_ACL_INIT_CONFIG_PATH={path} is invalid." + pta_error(ErrCode.PARAM))
    try:
        with open(path, encoding="utf-8") as f:
            config = json.load(f)
    except OSError as e:
        raise RuntimeError(f"Failed to open user acl json {path}: {e}" + pta_error(ErrCode.PARAM)) from None
    except (ValueError, UnicodeDecodeError) as e:
        raise RuntimeError(f"Failed to parse user acl json {path}: {e}" + pta_error(ErrCode.PARAM)) from None
    if not isinstance(config, dict):
        raise RuntimeError(f"Failed to parse user acl json {path}: not a JSON object" + pta_error(ErrCode.PARAM))
    from torch_npu.npu.utils import _is_gte_cann_version

    default = config.get("defaultDevice")
    if _is_gte_cann_version(_LAZY_SET_DEVICE_CANN):
        if not isinstance(default, dict) or "default_device" not in default:
            raise RuntimeError(
                f"The user acl json {path} lacks 'defaultDevice': with lazy set_device (CANN >= "
                f'{_LAZY_SET_DEVICE_CANN}) it needs "defaultDevice": {{"default_device": "0"}}.'
                + pta_error(ErrCode.PARAM)
            )
        if str(default["default_device"]) != "0":
            raise RuntimeError(
                f"The user acl json {path}: lazy set_device requires defaultDevice.default_device to be \"0\", "
                f"got {default['default_device']!r}." + pta_error(ErrCode.PARAM)
            )
    elif default is not None:
        raise RuntimeError(
            f"The user acl json {path} contains 'defaultDevice', which set_device before CANN "
            f"{_LAZY_SET_DEVICE_CANN} does not accept." + pta_error(ErrCode.PARAM)
        )
