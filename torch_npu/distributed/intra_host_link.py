"""Choosing an hccl group's link by topology, as HCCL picks HCCS / PCIe inside a server and RoCE between them.

When every rank of a group runs on this host, rank 0 creates a shared-memory segment (csrc/distributed/
IntraHostLink.h), the others open it, and allreduce, reduce, broadcast, allgather and allgather_into_tensor travel through it;
otherwise, or when any rank cannot map it, the whole group keeps the gloo transport. HCCL_INTRA_ROCE_ENABLE=1
(with HCCL_INTRA_PCIE_ENABLE unset or 0) keeps one host's ranks on the network transport, as on a server.
"""

import os
import socket
import uuid

from torch_npu.utils._error_code import ErrCode, dist_error

__all__ = ["connect_intra_host"]

_PREFIX = "vnpu_intra_host"


def _flag(name):
    value = os.environ.get(name)
    if value is None:
        return None
    if value not in ("0", "1"):
        raise ValueError(
            f"Invalid value {value!r} of environment variable {name}: expected 0 or 1" + dist_error(ErrCode.VALUE)
        )
    return value == "1"


def _network_inside_host():
    pcie, roce = _flag("HCCL_INTRA_PCIE_ENABLE"), _flag("HCCL_INTRA_ROCE_ENABLE")
    if pcie and roce:
        raise ValueError(
            "HCCL_INTRA_PCIE_ENABLE and HCCL_INTRA_ROCE_ENABLE cannot both be 1" + dist_error(ErrCode.NOT_SUPPORT)
        )
    return bool(roce)


def _host_identity():
    try:
        with open("/proc/sys/kernel/random/boot_id") as f:
            boot = f.read().strip()
    except OSError:
        boot = ""
    return f"{socket.gethostname()}/{boot}"


def _everyone(store, what, rank, size, mine):
    store.set(f"{_PREFIX}/{what}/{rank}", "1" if mine else "0")
    return all(store.get(f"{_PREFIX}/{what}/{r}") == b"1" for r in range(size))


def _open(backend, name, create):
    try:
        backend._open_intra_host_link(name, create)
    except RuntimeError:  # no usable shared memory here: the group stays on the transport
        return False
    return True


def connect_intra_host(backend, store, rank, size):
    """Give `backend` the intra-host link when the whole group shares this host (every rank calls it)."""
    if size < 2 or _network_inside_host():
        return
    store.set(f"{_PREFIX}/host/{rank}", _host_identity())
    if any(store.get(f"{_PREFIX}/host/{r}").decode() != _host_identity() for r in range(size)):
        return
    if rank == 0:
        name = f"/vnpu_hccl_{os.getpid()}_{uuid.uuid4().hex[:16]}"
        opened = _open(backend, name, create=True)
        store.set(f"{_PREFIX}/name", name if opened else "")
    else:
        name = store.get(f"{_PREFIX}/name").decode()
        opened = bool(name) and _open(backend, name, create=False)
    if not _everyone(store, "opened", rank, size, opened):
        backend._close_intra_host_link()
        return
    backend._unlink_intra_host_link()
