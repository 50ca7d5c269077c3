"""ParallelStore: torch_npu's key-value store for rendezvous (torch_npu._C._distributed_c10d.ParallelStore).

On Ascend it is a TCPStore whose server serves many clients in parallel and, with `enable_tiered`, puts a proxy
on every node between its workers and the server. On vnpu it is a TCPStore with torch_npu's constructor: every
client connects to the server directly (`agent_run`, `agent_pid` and `enable_tiered` are kept for code that
reads them back; the store behaves the same either way).
"""

import datetime

import torch.distributed as dist

__all__ = ["ParallelStore"]


class ParallelStore(dist.Store):
    """A Store over a TCPStore (composition: a failed connection leaves a valid, empty object, never a half-built
    native one)."""

    def __init__(
        self,
        host,
        port,
        world_size=None,
        agent_run=False,
        agent_pid=-1,
        is_master=False,
        enable_tiered=False,
        timeout=datetime.timedelta(seconds=300),
        multi_tenant=False,
    ):
        super().__init__()
        self._store = None
        if not 0 <= int(port) < 2**16:
            raise ValueError(f"port must have value from 0 to 65535 but was {port}.")
        self.agent_run, self.agent_pid, self.enable_tiered = agent_run, agent_pid, enable_tiered
        self._store = dist.TCPStore(host, int(port), world_size, is_master, timeout, multi_tenant=multi_tenant)

    host = property(lambda self: self._store.host)
    port = property(lambda self: self._store.port)
    libuvBackend = property(lambda self: self._store.libuvBackend)  # noqa: N815 (TCPStore's name)

    def __getattr__(self, name):  # the rest of TCPStore's interface
        if name.startswith("__") or self.__dict__.get("_store") is None:
            raise AttributeError(name)
        return getattr(self._store, name)

    def set(self, key, value):
        self._store.set(key, value)

    def get(self, key):
        return self._store.get(key)

    def add(self, key, amount):
        return self._store.add(key, amount)

    def compare_set(self, key, expected, desired):
        return self._store.compare_set(key, expected, desired)

    def delete_key(self, key):
        return self._store.delete_key(key)

    def num_keys(self):
        return self._store.num_keys()

    def set_timeout(self, timeout):
        self._store.set_timeout(timeout)

    @property
    def timeout(self):
        return self._store.timeout

    def wait(self, keys, timeout=None):
        if timeout is None:
            self._store.wait(keys)
        else:
            self._store.wait(keys, timeout)

    def check(self, keys):
        return self._store.check(keys)

    def append(self, key, value):
        self._store.append(key, value)

    def multi_get(self, keys):
        return self._store.multi_get(keys)

    def multi_set(self, keys, values):
        self._store.multi_set(keys, values)

    def has_extended_api(self):
        return True

    def clone(self):
        return self._store.clone()


def _publish():
    """torch_npu's import paths: torch_npu._C._distributed_c10d.ParallelStore (and torch_npu.ParallelStore)."""
    from torch_npu import _C

    _C._distributed_c10d.ParallelStore = ParallelStore


_publish()
