"""Logging of the environment a program reads: with torch_npu's logs on (TORCH_NPU_LOGS, TORCH_LOGS), every
variable read through os.getenv or os.environ.get is logged once, at INFO on the torch_npu.env logger, as
"get env NAME = value" (empty values are not logged). Installed by the patch registry at import."""

import logging
import os

__all__ = []

_logger = logging.getLogger("torch_npu.env")
_seen = set()
_original = {"getenv": os.getenv, "environ.get": os.environ.get}


def _read(key, default):
    # os.environ[key] is not patched, so a read costs one lookup and cannot re-enter the patch.
    try:
        value = os.environ[key]
    except KeyError:
        return default
    if value != "" and key not in _seen:
        _seen.add(key)
        _logger.info("get env %s = %s", key, value)
    return value


def _patched_getenv(key, default=None):
    return _read(key, default)


def _patched_environ_get(key, default=None):
    return _read(key, default)


def _logs_requested():
    return (
        os.environ.get("TORCH_NPU_LOGS") is not None
        or os.environ.get("TORCH_LOGS") is not None
        or _logger.isEnabledFor(logging.INFO)
    )


def install():
    """Patch os.getenv and os.environ.get when the log is observable; True when patched."""
    if not _logs_requested() or os.getenv is _patched_getenv:
        return False
    os.getenv = _patched_getenv
    os.environ.get = _patched_environ_get
    return True
