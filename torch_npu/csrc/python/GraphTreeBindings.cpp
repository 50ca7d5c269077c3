// Python bindings that PyTorch's CUDA graph trees take from torch._C's CUDA module, for npu
// (torch_npu.npu._graph_tree): pool checkpoints, storages whose memory the tree manages (built without a
// deleter, given the pool's deleter back, or freed and poisoned), and tensors rebuilt from recorded metadata.
#include "python/Bindings.h"

#include "aten/DispatchKeys.h"
#include "runtime/CachingAllocatorInternal.h"
#include "runtime/Device.h"
#include "runtime/MemoryHistory.h"
#include "runtime/PoolCheckpoint.h"

#include <ATen/ATen.h>
#include <ATen/CachedTensorUtils.h>
#include <c10/core/StorageImpl.h>
#include <pybind11/stl.h>
#include <torch/csrc/Dtype.h>
#include <torch/csrc/Storage.h>
#include <torch/csrc/utils/pybind.h>

#include <unordered_map>
#include <unordered_set>

namespace py = pybind11;

namespace vnpu::python {
namespace {

using PoolHandle = std::tuple<uint64_t, uint64_t>;

c10::StorageImpl* storage_impl(size_t cdata) {
  return reinterpret_cast<c10::StorageImpl*>(cdata);
}

c10::DeviceIndex device_index(int device) {
  const auto index = static_cast<c10::DeviceIndex>(device);
  check_device_index(index);
  return index;
}

// Restores the pool to `state`; storages whose memory it freed lose their deleter (`stale`), live storages
// built without one over a block it allocated again get the pool's deleter (`live`). Blocks allocated again
// with no live storage stay allocated, for raw_delete.
void set_checkpoint_pool_state(int device, const std::shared_ptr<PoolCheckpoint>& state,
                               const std::vector<size_t>& stale, const std::vector<size_t>& live) {
  TORCH_CHECK(state != nullptr && state->device == device_index(device),
              "the checkpoint belongs to another npu device");
  for (size_t cdata : live) {  // checked before the pool changes: a refused call changes nothing
    TORCH_CHECK(storage_impl(cdata)->data_ptr().get_context() == nullptr,
                "a live storage of the npu graph tree already has a deleter");
  }
  CheckpointDelta delta = restore_pool_checkpoint(*state);
  const std::unordered_set<void*> freed(delta.ptrs_freed.begin(), delta.ptrs_freed.end());
  for (size_t cdata : stale) {
    auto& data_ptr = storage_impl(cdata)->mutable_data_ptr();
    if (freed.count(data_ptr.get()) != 0) {
      data_ptr.release_context();
    }
  }
  std::unordered_map<void*, c10::StorageImpl*> live_by_ptr;
  for (size_t cdata : live) {
    live_by_ptr[storage_impl(cdata)->data_ptr().get()] = storage_impl(cdata);
  }
  for (Block* block : delta.blocks_allocated) {
    auto found = live_by_ptr.find(block->ptr);
    if (found == live_by_ptr.end()) {
      continue;
    }
    found->second->set_data_ptr_noswap(c10::DataPtr(block->ptr, block, &free_block, c10::Device(kNpu, block->device)));
  }
}

at::Tensor tensor_from_storage_and_metadata(const py::dict& metadata, const py::object& storage) {
  const c10::Storage& s = THPStorage_Unpack(storage.ptr());
  const auto dtype = reinterpret_cast<THPDtype*>(metadata["dtype"].ptr())->scalar_type;
  at::Tensor tensor =
      at::detail::make_tensor_base<c10::TensorImpl>(c10::Storage(s), kNpuKeys, c10::scalarTypeToTypeMeta(dtype));
  tensor.unsafeGetTensorImpl()->set_sizes_and_strides(metadata["size"].cast<std::vector<int64_t>>(),
                                                      metadata["stride"].cast<std::vector<int64_t>>());
  tensor.unsafeGetTensorImpl()->set_storage_offset(metadata["storage_offset"].cast<int64_t>());
  return tensor;
}

bool data_ptrs_at_indices_equal(const py::list& tensors, const py::list& data_ptrs, const py::list& indices) {
  for (const auto& index : indices) {
    const auto i = index.cast<size_t>();
    const auto tensor = tensors[i].cast<at::Tensor>();
    if (reinterpret_cast<intptr_t>(tensor.data_ptr()) != data_ptrs[i].cast<intptr_t>()) {
      return false;
    }
  }
  return true;
}

}  // namespace

void bind_graph_tree(py::module& m) {
  py::class_<PoolCheckpoint, std::shared_ptr<PoolCheckpoint>>(m, "_npu_NPUAllocator_AllocatorState");
  m.def("_npu_getCheckpointState",
        [](int device, const PoolHandle& pool) { return pool_checkpoint(device_index(device), std::get<1>(pool)); });
  m.def("_npu_setCheckpointPoolState", &set_checkpoint_pool_state);
  m.def("_npu_checkPoolLiveAllocations",
        [](int device, const PoolHandle& pool, const std::unordered_set<uintptr_t>& ptrs) {
          return pool_allocations_are(device_index(device), std::get<1>(pool), ptrs);
        });
  // Memory from the current device's pool outside any tensor, until raw_delete gives it back (the stream
  // argument is the raw stream the caller will use it on; vnpu's pool does not keep blocks per stream).
  m.def("_npu_npuCachingAllocator_raw_alloc",
        [](size_t size, uintptr_t /*stream*/) { return reinterpret_cast<uintptr_t>(allocate_raw_block(size)); });
  m.def("_npu_npuCachingAllocator_raw_delete", [](uintptr_t ptr) { free_block_at(reinterpret_cast<void*>(ptr)); });
  m.def("_npu_isHistoryEnabled", &memory_history_enabled);
  m.def("_construct_NPU_Tensor_From_Storage_And_Metadata", &tensor_from_storage_and_metadata);
  m.def("_has_Standard_Deleter",
        [](size_t cdata) { return storage_impl(cdata)->data_ptr().get_deleter() == &free_block; });
  m.def("_free_And_Remove_DeleterFn", [](size_t cdata) {
    auto& data_ptr = storage_impl(cdata)->mutable_data_ptr();
    void* block = data_ptr.get_context();
    TORCH_CHECK(data_ptr.compare_exchange_deleter(&free_block, &c10::detail::deleteNothing),
                "Expected the standard deleter of npu memory");
    free_block(block);
  });
  m.def("_set_storage_access_error_msg", [](const at::Tensor& t, std::string message) {
    t.unsafeGetTensorImpl()->release_storage_and_set_meta_custom_data_ptr_error_msg_(std::move(message));
  });
  m.def("_set_storage_data_ptr_access_error_msg", [](size_t cdata, std::string message) {
    storage_impl(cdata)->release_data_and_set_meta_custom_data_ptr_error_msg_(std::move(message));
  });
  m.def("_tensors_data_ptrs_at_indices_equal", &data_ptrs_at_indices_equal);
  // the graph tree's outputs, whose references it does not count as the user's (torch._C's, for npu tensors)
  m.def("_add_cached_tensor", [](const at::Tensor& t) { at::caching::add_cached_tensor(t); });
}

}  // namespace vnpu::python
