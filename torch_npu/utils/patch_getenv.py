"""Logging of the environment a program reads. As torch_npu does, `import torch_npu` replaces os.getenv and
os.environ.get (the patch registry installs them); with the torch_npu.env logger at INFO (TORCH_NPU_LOGS=env,
TORCH_LOGS) every variable read through them is logged once as "get env NAME = value" (empty values are not
logged). Otherwise a read is the plain lookup."""

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
    if value != "" and key not in _seen and _logger.isEnabledFor(logging.INFO):
        _seen.add(key)
        _logger.info("get env %s = %s", key, value)
    return value


def _patched_getenv(key, default=None):
    return _read(key, default)


def _patched_environ_get(key, default=None):
    return _read(key, default)


def install():
    """Patch os.getenv and os.environ.get; True when this call patched them."""
    if os.getenv is _patched_getenv:
        return False
    os.getenv = _patched_getenv
    os.environ.get = _patched_environ_get
    return True
