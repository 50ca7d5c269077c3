"""The ``hccl`` (and ``lccl``) process-group backend for npu tensors.

``torch_npu._C._distributed_c10d.ProcessGroupHCCL`` (C++, csrc/distributed/ProcessGroupHCCL.h) is a c10d
Backend registered for the npu device: each collective hands PyTorch's gloo backend (TCP, multi-node,
tested upstream) zero-copy CPU aliases of the npu tensors, so results land in npu memory without a copy;
AVG, PREMUL_SUM and bool reductions are composed around gloo. Groups whose ranks share one host carry
allreduce, reduce, broadcast and the allgathers over shared memory instead (intra_host_link.py). `dist.init_process_group("hccl")`,
`dist.get_backend() == "hccl"`, DDP's C++ reducer and functional collectives all reach it.

Timeouts, as on Ascend: HCCL_CONNECT_TIMEOUT (seconds) bounds link setup, HCCL_EXEC_TIMEOUT (seconds)
each collective (``ProcessGroupHCCL.Options().op_timeout`` passed as ``pg_options`` takes precedence);
the ``timeout=`` of init_process_group / new_group is used where they are unset.
"""

import datetime
import functools
import os
import sys

import torch.distributed as dist

from torch_npu import _C
from torch_npu.distributed.intra_host_link import connect_intra_host
from torch_npu.utils._error_code import ErrCode, dist_error

__all__ = ["ProcessGroupHCCL", "is_hccl_available", "register_backends", "get_hccl_comm_name"]

ProcessGroupHCCL = _C._distributed_c10d.ProcessGroupHCCL
sys.modules.setdefault("torch_npu._C._distributed_c10d", _C._distributed_c10d)


def _option(name, doc):
    """A read-write field of Options, visible on the class as torch_npu's bound fields are (code probes
    `hasattr(ProcessGroupHCCL.Options, "hccl_config")` before using one)."""

    def get(self):
        return self.__dict__[name]

    def put(self, value):
        self.__dict__[name] = value

    return property(get, put, doc=doc)


class Options:
    """ProcessGroupHCCL.Options: torch_npu's fields; vnpu honours _timeout / op_timeout and keeps the rest
    (hccl_config: hccl_buffer_size, group_name, qos_service_level, qos_traffic_class,
    hccl_op_expansion_mode) for code that reads them back."""

    is_high_priority_stream = _option("is_high_priority_stream", "use a high-priority stream")
    global_ranks_in_group = _option("global_ranks_in_group", "the world ranks of the group's members")
    hccl_config = _option("hccl_config", "HCCL communicator settings (a dict)")
    group_id = _option("group_id", "the group's identifier")
    op_timeout = _option("op_timeout", "per-collective timeout (seconds or a timedelta)")
    _timeout = _option("_timeout", "the group's timeout")

    def __init__(self, is_high_priority_stream=False):
        self.is_high_priority_stream = is_high_priority_stream
        self.global_ranks_in_group = []
        self.hccl_config = {}
        self.group_id = ""
        self.op_timeout = None
        self._timeout = datetime.timedelta(minutes=30)


ProcessGroupHCCL.Options = Options


def _seconds_from_env(name):
    value = os.environ.get(name)
    if value is None:
        return None
    if not value.strip().isdigit() or int(value) <= 0:
        raise ValueError(
            f"Invalid value {value!r} of environment variable {name}: expected a positive integer "
            f"number of seconds" + dist_error(ErrCode.VALUE)
        )
    return datetime.timedelta(seconds=int(value))


_DEFAULT_TIMEOUT = datetime.timedelta(minutes=30)
_rendezvous = {"bounded_by_connect_timeout": False}


def _timeouts(timeout, options):
    """(link setup, per collective) timeouts."""
    connect = _seconds_from_env("HCCL_CONNECT_TIMEOUT") or timeout
    implicit = _rendezvous["bounded_by_connect_timeout"]  # `timeout` is HCCL_CONNECT_TIMEOUT, not the user's
    execute = _seconds_from_env("HCCL_EXEC_TIMEOUT") or (_DEFAULT_TIMEOUT if implicit else timeout)
    op_timeout = getattr(options, "op_timeout", None)
    if op_timeout is not None:
        execute = (
            op_timeout if isinstance(op_timeout, datetime.timedelta) else datetime.timedelta(seconds=float(op_timeout))
        )
    return connect, execute


def _creator(name):
    def create(backend_opts, options):
        store, rank, size = backend_opts.store, backend_opts.group_rank, backend_opts.group_size
        connect, execute = _timeouts(backend_opts.timeout, options)
        backend = ProcessGroupHCCL(_connect(store, rank, size, connect, execute), rank, size, name)
        backend._set_link(store, connect.total_seconds(), execute.total_seconds())
        if not _C._plan_mode():
            connect_intra_host(backend, store, rank, size)
        return backend

    return create


def _connect(store, rank, size, connect, execute):
    if _C._plan_mode():  # planning mode: collectives are counted and timed, and move nothing
        from torch._C._distributed_c10d import FakeProcessGroup

        return FakeProcessGroup._create_internal(rank, size)
    transport = dist.ProcessGroupGloo(store, rank, size, connect)
    if execute != connect:
        transport._set_default_timeout(execute)
    return transport


def rebuild_link(backend):
    """Connect the group's ranks anew (every rank of the group calls it) and use that link from now on."""
    store, connect, execute, generation = backend._next_link()
    seconds = datetime.timedelta(seconds=connect), datetime.timedelta(seconds=execute)
    prefixed = dist.PrefixStore(f"vnpu_link_{generation}", store)
    backend._replace_transport(_connect(prefixed, backend.rank(), backend.size(), *seconds))


def is_hccl_available():
    return dist.is_available() and dist.is_gloo_available()


def get_hccl_comm_name(group=None, rank=None):
    """A stable communicator name per group ('hcom' of torch_npu's fused MC2 operators), as
    `group._get_backend(torch.device("npu")).get_hccl_comm_name(rank)` gives it."""
    import torch

    group = group or dist.group.WORLD
    return group._get_backend(torch.device("npu")).get_hccl_comm_name(dist.get_rank(group) if rank is None else rank)


def _is_hccl(backend):
    return isinstance(backend, str) and backend.lower() in ("hccl", "lccl")


def _connect_timeout_bounds_rendezvous(init):
    """init_process_group("hccl") without timeout=: HCCL_CONNECT_TIMEOUT also bounds the rendezvous (a rank
    that never arrives fails the others within it, with torch_npu's DIST timeout code)."""
    if getattr(init, "__vnpu_hccl__", False):
        return init

    @functools.wraps(init)
    def init_process_group(backend=None, *args, **kwargs):
        connect = _seconds_from_env("HCCL_CONNECT_TIMEOUT")
        if connect is None or not _is_hccl(backend) or "timeout" in kwargs:
            return init(backend, *args, **kwargs)
        _rendezvous["bounded_by_connect_timeout"] = True
        try:
            return init(backend, *args, timeout=connect, **kwargs)
        except Exception as err:  # noqa: BLE001 (re-raised with the setting that bounded it)
            if "timed out" not in str(err).lower() and "timeout" not in str(err).lower():
                raise
            raise RuntimeError(
                f"hccl link setup did not complete within HCCL_CONNECT_TIMEOUT="
                f"{int(connect.total_seconds())} s: {err}" + dist_error(ErrCode.TIMEOUT)
            ) from err
        finally:
            _rendezvous["bounded_by_connect_timeout"] = False

    init_process_group.__vnpu_hccl__ = True
    return init_process_group


def register_backends():
    """Register hccl and lccl for the npu device (once)."""
    if not is_hccl_available():
        return
    for name in ("hccl", "lccl"):
        if name.upper() not in dist.Backend._plugins:
            dist.Backend.register_backend(name, _creator(name), extended_api=True, devices=["npu"])
