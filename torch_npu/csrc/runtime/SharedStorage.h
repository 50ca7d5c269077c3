// npu storages shared between processes (torch.multiprocessing): the memory of a shared storage is a
// memfd mapping that every process holding the storage maps, so writes are seen by all of them, as the
// card's IPC memory handles make them.
#pragma once

#include <ATen/core/Tensor.h>

#include <tuple>

namespace vnpu {

// Moves `t`'s storage into a shared mapping (once: its bytes are copied there and the storage points at the
// mapping from then on; every tensor on that storage follows). Returns (fd, nbytes); the fd stays owned by
// the storage.
std::tuple<int64_t, int64_t> share_npu_storage(const at::Tensor& t);

// A uint8 npu tensor of `nbytes` over the mapping of `fd` (another process's shared storage) on npu:`device`.
// Takes ownership of `fd`.
at::Tensor open_shared_npu_storage(int64_t fd, int64_t nbytes, int64_t device);

}  // namespace vnpu
