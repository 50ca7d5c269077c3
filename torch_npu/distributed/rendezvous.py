"""The `parallel` rendezvous of torch_npu: `init_process_group(init_method="parallel://host:port?rank=R&world_size=N")`
and torch_npu_run's agents (`--rdzv_backend parallel`, the default of torch_npu_run) meet in a ParallelStore
hosted by rank 0 (node rank 0 for agents). Registered in PyTorch's rendezvous registries (its extension points)
by `register()`."""

import datetime
import logging
import os
from urllib.parse import urlparse

from torch.distributed import PrefixStore

from torch_npu.distributed.parallel_store import ParallelStore

__all__ = []

log = logging.getLogger(__name__)
_DEFAULT_TIMEOUT_SECONDS = 600


def _error(message):
    return ValueError("Error initializing torch_npu.distributed using parallel:// rendezvous: " + message)


def _parallel_rendezvous_handler(url, timeout=datetime.timedelta(minutes=30), **kwargs):
    parsed = urlparse(url)
    if not parsed.port:
        raise _error("port number missing")
    query = dict(pair.split("=", 1) for pair in filter(None, parsed.query.split("&")))
    if "rank" not in query:
        raise _error("rank parameter missing")
    if "world_size" not in query:
        raise _error("world size parameter missing")
    rank, world_size = int(query["rank"]), int(query["world_size"])
    enable_tiered = os.environ.get("ENABLE_TIERED_PARALLEL_TCPSTORE", "").lower() == "true"
    store = ParallelStore(
        parsed.hostname, parsed.port, world_size, False, -1, rank == 0, enable_tiered, timeout, multi_tenant=True
    )
    yield (store, rank, world_size)
    raise RuntimeError("Unable to perform re-rendezvous using parallel:// method")


def _elastic_handler(params):
    """torch.distributed.elastic's handler for rdzv_backend 'parallel' (torch_npu_run's agents)."""
    from torch.distributed.elastic.rendezvous.api import RendezvousHandler, RendezvousInfo, RendezvousStoreInfo
    from torch.distributed.elastic.rendezvous.utils import parse_rendezvous_endpoint

    class ParallelRendezvous(RendezvousHandler):
        def __init__(self, host, port, rank, world_size, run_id, enable_tiered, timeout):
            self.host, self.port, self.rank, self.world_size = host, port, rank, world_size
            self.run_id, self.enable_tiered, self.timeout = run_id, enable_tiered, timeout
            self._store = None

        def get_backend(self):
            return "parallel"

        def next_rendezvous(self):
            if self._store is None:
                log.info("Creating ParallelStore as the c10d::Store implementation")
                self._store = ParallelStore(
                    self.host, self.port, self.world_size, True, os.getpid(), self.rank == 0, self.enable_tiered,
                    self.timeout, multi_tenant=True,
                )  # fmt: skip
            store = PrefixStore(self.run_id, self._store)
            # the workers' own store (env://) goes on a free port of node 0, published through this one
            bootstrap = RendezvousStoreInfo.build(self.rank, store, local_addr=None)
            return RendezvousInfo(store, self.rank, self.world_size, bootstrap)

        def is_closed(self):
            return False

        def set_closed(self):
            pass

        def num_nodes_waiting(self):
            return 0

        def get_run_id(self):
            return self.run_id

        def shutdown(self):
            return True

    host, port = parse_rendezvous_endpoint(params.endpoint, -1)
    if port == -1:
        raise ValueError(f"Port is absent in endpoint: {params.endpoint}. Try launching with --master_port")
    if "rank" not in params.config:
        raise ValueError("rank is absent in RendezvousParameters. Try add --node_rank to the cmd request")
    timeout = datetime.timedelta(seconds=int(params.config.get("timeout", _DEFAULT_TIMEOUT_SECONDS)))
    enable_tiered = str(params.config.get("enable_tiered", "false")).lower() == "true"
    return ParallelRendezvous(
        host, port, int(params.config["rank"]), params.max_nodes, params.run_id, enable_tiered, timeout
    )


def register():
    """Register the parallel:// handler (init_process_group) once; the elastic one is registered by torch_npu_run."""
    import importlib

    rendezvous = importlib.import_module("torch.distributed.rendezvous")  # the module (dist.rendezvous is a function)
    if "parallel" in rendezvous._rendezvous_handlers:
        return False
    rendezvous.register_rendezvous_handler("parallel", _parallel_rendezvous_handler)
    return True


def register_elastic():
    from torch.distributed.elastic.rendezvous.api import rendezvous_handler_registry

    if "parallel" in rendezvous_handler_registry._registry:
        return False
    rendezvous_handler_registry.register("parallel", _elastic_handler)
    return True
