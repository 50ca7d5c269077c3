// Mapping tensors between npu and the CPU kernels that compute for it, without copying bytes.
#pragma once

#include <ATen/core/Tensor.h>
#include <c10/util/MaybeOwned.h>
#include <c10/util/SmallVector.h>

#include <cstdint>
#include <string>
#include <unordered_map>
#include <utility>
#include <vector>

namespace vnpu {

// CPU tensor over an npu tensor's bytes. A non-owning alias is only valid while the npu tensor
// lives (the redirect's case), and may be one the thread kept from an earlier redirected call; an owning
// alias keeps the npu storage alive.
at::Tensor make_cpu_alias(const at::Tensor& npu, bool owning);

// Non-owning CPU aliases built afresh on the calling thread (none was kept to reuse), for tests and reports.
int64_t redirect_aliases_built();

// Raises unless every element of the npu tensor lies inside its storage (a view whose storage was
// resized or freed under it would otherwise send a kernel to memory it does not own).
void check_in_bounds_strided(const at::Tensor& npu);
inline void check_in_bounds(const at::Tensor& npu) {
  // Every operand of every npu operator passes here: a contiguous tensor needs no walk over its strides.
  const auto* impl = npu.unsafeGetTensorImpl();
  if (C10_LIKELY(impl->is_contiguous())) {
    const int64_t numel = impl->numel();
    if (numel == 0) {
      return;  // no elements, no bytes to touch
    }
    const auto end = (impl->storage_offset() + numel) * static_cast<int64_t>(impl->itemsize());
    if (C10_LIKELY(end <= static_cast<int64_t>(impl->storage().nbytes()))) {
      return;
    }
  }
  check_in_bounds_strided(npu);
}

// Gives `to` the sizes, strides, storage offset and conj/neg bits of `from`.
void copy_geometry(const at::Tensor& from, const at::Tensor& to);
// An npu tensor over `storage` with the geometry (sizes, strides, offset, conj/neg bits) of `like`.
at::Tensor npu_tensor_over(c10::Storage storage, const at::Tensor& like);
// An npu view over `base`'s storage with the geometry of `view` (a kernel's view of base's alias).
at::Tensor npu_view(const at::Tensor& base, const at::Tensor& view);

// npu tensor over the memory of a CPU tensor that stays in use (host-compiled code's buffers and aliases, handed
// to an operator that only takes npu tensors); it keeps the CPU storage alive.
at::Tensor npu_alias_of_host(const at::Tensor& cpu, c10::DeviceIndex device);

// npu tensor that takes over the memory of a CPU tensor a kernel produced (no copy).
at::Tensor adopt_cpu_result(const at::Tensor& cpu, c10::DeviceIndex device);

// The Python name of a layout ("torch.sparse_coo"), for error messages.
std::string layout_name(c10::Layout layout);

// ZeroTensors carry no memory; they are recreated on the other side.
at::Tensor make_zero_tensor(c10::IntArrayRef size, c10::ScalarType dtype, c10::Device device);

// The tensors of one redirected call.
struct CallMapping {
  struct Alias {
    c10::MaybeOwned<at::Tensor> npu;  // borrowed when the caller's argument outlives the call
    at::Tensor cpu;
    c10::StorageImpl* cpu_storage;        // the alias storage handed to the kernel
    const c10::StorageImpl* npu_storage;  // the storage it aliases
    int arg;
    bool recyclable;  // its own TensorImpl and StorageImpl (not a sibling's storage, not a ZeroTensor)
  };
  // Above this many arguments (tensor lists), aliases are found by storage through a hash map.
  static constexpr size_t kIndexedAliases = 16;

  c10::DeviceIndex device = -1;  // where results go
  bool explicit_device = false;  // set by a device= argument
  bool keep_cpu = false;         // device="cpu" argument: results stay on the CPU
  // The npu arguments outlive the call (an unboxed kernel's are the caller's references), so the
  // aliases borrow them. A copy would cost more than the rest of the mapping: raising the count of
  // a tensor only its Python object holds takes the GIL to keep that object alive. The boxed
  // redirect replaces its stack slots with the aliases, so there the aliases own the npu tensors.
  bool borrow_inputs = false;
  c10::SmallVector<Alias, 6> aliases;
  c10::SmallVector<c10::TensorImpl*, 4> cpu_inputs;
  c10::SmallVector<std::pair<c10::StorageImpl*, c10::Storage>, 2> adopted;
  std::unordered_map<const c10::StorageImpl*, size_t> by_storage;
  size_t indexed = 0;  // aliases entered in by_storage

  CallMapping() = default;
  CallMapping(const CallMapping&) = delete;
  CallMapping& operator=(const CallMapping&) = delete;
  // Aliases nothing else holds any more are kept for the calling thread's next arguments.
  ~CallMapping();

  // The first alias over an npu storage, if an earlier argument of this call has one.
  const Alias* alias_of_storage(const c10::StorageImpl* npu_storage);

  at::Tensor alias_input(const at::Tensor& npu, int arg);
  // After the kernel: resizes, reallocations and set_ on written arguments reach the npu tensors.
  void sync_written(const std::vector<uint8_t>& written);
  // A kernel result as the npu operator's result.
  at::Tensor to_npu(const at::Tensor& result);
};

}  // namespace vnpu
