#include "aten/TensorMapping.h"
#include "aten/DispatchKeys.h"

#include "runtime/CachingAllocator.h"
#include "runtime/Device.h"

#include <ATen/EmptyTensor.h>
#include <c10/core/CPUAllocator.h>
#include <c10/core/InferenceMode.h>
#include <c10/core/TensorImpl.h>

#include <algorithm>
#include <array>

namespace vnpu {
namespace {

void copy_bits(const at::Tensor& from, const at::Tensor& to) {
  if (from.is_conj()) {
    to._set_conj(true);
  }
  if (from.is_neg()) {
    to._set_neg(true);
  }
}

void release_storage_holder(void* ctx) {
  delete static_cast<c10::Storage*>(ctx);
}

// ZeroTensors have no memory: a null allocation tagged with their device.
struct ZeroAllocator final : at::Allocator {
  c10::Device device = c10::Device(c10::kCPU);
  c10::DataPtr allocate(size_t /*n*/) override {
    return c10::DataPtr(nullptr, device);
  }
  c10::DeleterFnPtr raw_deleter() const override {
    return nullptr;
  }
  void copy_data(void* /*dest*/, const void* /*src*/, std::size_t /*count*/) const override {}
};

ZeroAllocator* zero_allocator(c10::Device device) {
  static std::array<ZeroAllocator, kMaxDevices + 1> allocators = [] {
    std::array<ZeroAllocator, kMaxDevices + 1> a;
    for (int i = 0; i < kMaxDevices; ++i) {
      a[static_cast<size_t>(i)].device = c10::Device(kNpu, static_cast<c10::DeviceIndex>(i));
    }
    return a;
  }();
  return device.is_cpu() ? &allocators[kMaxDevices] : &allocators[static_cast<size_t>(device.index())];
}

// An npu storage owning the memory of a CPU storage a kernel produced.
c10::Storage npu_storage_from(const c10::Storage& cpu, c10::DeviceIndex device) {
  const auto& data_ptr = cpu.data_ptr();
  c10::DataPtr npu_data;
  if (cpu.nbytes() == 0 || data_ptr.get() == nullptr) {
    npu_data = c10::DataPtr(nullptr, c10::Device(kNpu, device));
  } else if (is_pool_block(data_ptr)) {
    // Already npu memory (counted when allocated); keep the CPU storage alive until released.
    npu_data = c10::DataPtr(data_ptr.get(), new c10::Storage(cpu), &release_storage_holder, c10::Device(kNpu, device));
  } else {
    npu_data = adopt_foreign_storage(cpu, device);
  }
  return c10::Storage(c10::make_intrusive<c10::StorageImpl>(c10::StorageImpl::use_byte_size_t(), cpu.nbytes(),
                                                            std::move(npu_data), npu_allocator(),
                                                            /*resizable=*/true));
}

void check_strided(const at::Tensor& cpu) {
  TORCH_CHECK_NOT_IMPLEMENTED(cpu.layout() == c10::kStrided && !cpu.is_quantized(), "This npu operator would return a ",
                              cpu.is_quantized() ? "quantized" : "",
                              cpu.is_quantized() ? "" : layout_name(cpu.layout()),
                              " tensor: sparse, quantized and nested tensors are not supported on npu (only "
                              "strided, dense tensors are)");
}

// The redirect's CPU aliases are recycled per thread. A fresh alias is two heap objects (TensorImpl,
// StorageImpl) built and freed again around every call, about a third of the redirect's instructions for
// a small operator; an alias that nothing references after its call (no kernel kept it, no Python object,
// no weak reference, its storage not shared) is emptied and re-pointed at a later argument instead.
// One thread-local object, reached once per call site (each access to thread-local storage of a shared
// library is a function call).
struct SpareAliases {
  static constexpr size_t kKept = 8;
  c10::SmallVector<at::Tensor, kKept> tensors;
  int64_t built = 0;  // aliases made afresh
};
thread_local SpareAliases tl_spare_aliases;

bool unreferenced(const at::Tensor& cpu) {
  const c10::TensorImpl* impl = cpu.unsafeGetTensorImpl();
  if (cpu.use_count() != 1 || cpu.weak_use_count() != 1 || !impl->has_storage()) {
    return false;
  }
  const c10::Storage& storage = impl->unsafe_storage();
  const c10::StorageImpl* storage_impl = storage.unsafeGetStorageImpl();
  // weak_use_count counts the strong owners as one, and the probe itself.
  return storage.use_count() == 1 && storage.getWeakStorageImpl().weak_use_count() == 2 && storage.resizable() &&
         impl->pyobj_slot()->load_pyobj() == nullptr && storage_impl->pyobj_slot()->load_pyobj() == nullptr &&
         !impl->is_conj() && !impl->is_neg() && !impl->is_wrapped_number() && impl->allow_tensor_metadata_change();
}

void keep_spare(SpareAliases& spare, at::Tensor& cpu) {
  if (spare.tensors.size() < SpareAliases::kKept && unreferenced(cpu)) {
    // Releases memory a kernel may have grown the alias into (sync_written moved any it kept).
    c10::StorageImpl* storage = cpu.unsafeGetTensorImpl()->unsafe_storage().unsafeGetStorageImpl();
    storage->set_data_ptr_noswap(c10::DataPtr());
    storage->set_nbytes(0);
    spare.tensors.push_back(std::move(cpu));
  }
  cpu.reset();
}

// Re-points a kept alias at the memory and geometry of `npu`, or returns an undefined tensor when none is
// kept for the current inference-mode state (aliases made inside and outside it differ in their keys and
// version counter).
at::Tensor reuse_spare(const at::Tensor& npu, void* data, size_t nbytes) {
  SpareAliases& spare = tl_spare_aliases;
  if (spare.tensors.empty() || spare.tensors.back().is_inference() != c10::InferenceMode::is_enabled()) {
    ++spare.built;
    return at::Tensor();
  }
  at::Tensor cpu = std::move(spare.tensors.back());
  spare.tensors.pop_back();
  c10::TensorImpl* impl = cpu.unsafeGetTensorImpl();
  c10::StorageImpl* storage = impl->unsafe_storage().unsafeGetStorageImpl();
  storage->set_data_ptr_noswap(c10::DataPtr(data, c10::Device(c10::kCPU)));
  storage->set_nbytes(nbytes);
  if (impl->dtype() != npu.dtype()) {
    impl->set_storage_and_dtype(impl->storage(), npu.dtype());
  }
  if (npu.dim() == 0) {
    // A 0-dim tensor keeps a fresh TensorImpl's first size and stride (0 and 1) in its inline storage, and
    // kernels read them: linalg_vector_norm(dim=0) tests sizes()[0] == 1 on scalars. Not a previous size.
    static constexpr int64_t kFreshSize[] = {0};
    static constexpr int64_t kFreshStride[] = {1};
    impl->set_sizes_and_strides(c10::IntArrayRef(kFreshSize), c10::IntArrayRef(kFreshStride));
  }
  copy_geometry(npu, cpu);
  return cpu;
}

}  // namespace

int64_t redirect_aliases_built() {
  return tl_spare_aliases.built;
}

void copy_geometry(const at::Tensor& from, const at::Tensor& to) {
  to.unsafeGetTensorImpl()->set_sizes_and_strides(from.sizes(), from.strides(), from.storage_offset());
  copy_bits(from, to);
}

at::Tensor npu_tensor_over(c10::Storage storage, const at::Tensor& like) {
  auto out = at::detail::make_tensor<c10::TensorImpl>(std::move(storage), kNpuKeys, like.dtype());
  copy_geometry(like, out);
  return out;
}

// An npu view over `base`'s storage with the geometry of the CPU view the kernel returned.
at::Tensor npu_view(const at::Tensor& base, const at::Tensor& cpu_view) {
  // The VIEW constructor takes the key set verbatim: reuse the base's (autograd and inference
  // state included) without its conj/neg bits, which come from the view itself.
  const auto keys = base.key_set().remove(c10::DispatchKey::Conjugate).remove(c10::DispatchKey::Negative);
  auto out = at::detail::make_tensor<c10::TensorImpl>(c10::TensorImpl::VIEW, c10::Storage(base.storage()), keys,
                                                      cpu_view.dtype());
  copy_geometry(cpu_view, out);
  return out;
}

std::string layout_name(c10::Layout layout) {
  switch (layout) {
    case c10::kStrided: return "torch.strided";
    case c10::kSparse: return "torch.sparse_coo";
    case c10::kSparseCsr: return "torch.sparse_csr";
    case c10::kSparseCsc: return "torch.sparse_csc";
    case c10::kSparseBsr: return "torch.sparse_bsr";
    case c10::kSparseBsc: return "torch.sparse_bsc";
    case c10::kJagged: return "torch.jagged";
    default: return c10::str(layout);
  }
}

at::Tensor make_zero_tensor(c10::IntArrayRef size, c10::ScalarType dtype, c10::Device device) {
  const auto keys = c10::DispatchKeySet(device.is_cpu() ? c10::DispatchKey::CPU : c10::DispatchKey::PrivateUse1) |
                    c10::DispatchKeySet(c10::DispatchKey::ZeroTensor);
  return at::detail::empty_generic(size, zero_allocator(device), keys, dtype, std::nullopt);
}

void check_in_bounds_strided(const at::Tensor& npu) {
  const auto* impl = npu.unsafeGetTensorImpl();
  const auto sizes = impl->sizes();
  const auto strides = impl->strides();
  int64_t last = impl->storage_offset();
  for (size_t i = 0; i < sizes.size(); ++i) {
    if (C10_UNLIKELY(sizes[i] == 0)) {
      return;  // no elements, no bytes to touch
    }
    last += (sizes[i] - 1) * strides[i];
  }
  const auto itemsize = static_cast<int64_t>(impl->itemsize());
  // storage(), not unsafe_storage(): a tensor whose storage was taken away (a graph tree's dead output) raises
  // the error it was given instead of reading a null storage
  const auto nbytes = static_cast<int64_t>(impl->storage().nbytes());
  if (C10_UNLIKELY((last + 1) * itemsize > nbytes)) {
    TORCH_CHECK(false, "npu tensor with sizes ", sizes, ", strides ", strides, ", storage offset ",
                impl->storage_offset(), ", and itemsize ", itemsize, " requiring a storage size of ",
                (last + 1) * itemsize, " is out of bounds for storage of size ", nbytes,
                " (its storage was resized or freed under it)");
  }
}

at::Tensor make_cpu_alias(const at::Tensor& npu, bool owning) {
  if (C10_UNLIKELY(npu._is_zerotensor())) {
    return make_zero_tensor(npu.sizes(), npu.scalar_type(), c10::Device(c10::kCPU));
  }
  check_in_bounds(npu);
  const auto& storage = npu.storage();
  void* data = const_cast<void*>(storage.data());
  if (!owning) {
    at::Tensor kept = reuse_spare(npu, data, storage.nbytes());
    if (kept.defined()) {
      return kept;
    }
  }
  c10::DataPtr data_ptr =
      owning ? c10::DataPtr(data, new c10::Storage(storage), &release_storage_holder, c10::Device(c10::kCPU))
             : c10::DataPtr(data, c10::Device(c10::kCPU));
  // Resizable, with the CPU allocator: a kernel that grows an out= argument allocates through the
  // bridge, i.e. from the npu pools (sync_written moves that memory to the npu tensor).
  c10::Storage cpu_storage(c10::make_intrusive<c10::StorageImpl>(c10::StorageImpl::use_byte_size_t(), storage.nbytes(),
                                                                 std::move(data_ptr), c10::GetCPUAllocator(),
                                                                 /*resizable=*/!owning));
  auto out = at::detail::make_tensor<c10::TensorImpl>(std::move(cpu_storage), kCpuKeys, npu.dtype());
  copy_geometry(npu, out);
  return out;
}

at::Tensor adopt_cpu_result(const at::Tensor& cpu, c10::DeviceIndex device) {
  if (C10_UNLIKELY(cpu._is_zerotensor())) {
    return make_zero_tensor(cpu.sizes(), cpu.scalar_type(), c10::Device(kNpu, device));
  }
  if (C10_UNLIKELY(cpu.layout() == c10::kSparse)) {
    // As torch_npu's CPU fallback does: the sparse COO result is copied to npu, members and all.
    return cpu.to(c10::Device(kNpu, device));
  }
  check_strided(cpu);
  auto* impl = cpu.unsafeGetTensorImpl();
  const auto& storage = cpu.storage();
  auto* storage_impl = storage.unsafeGetStorageImpl();
  // Fast path: a fresh result nobody else references, in a block of this device's pool, becomes
  // the npu tensor itself (same TensorImpl and storage, re-tagged).
  if (cpu.use_count() == 1 && cpu.weak_use_count() == 1 && storage.use_count() == 1 && !impl->is_wrapped_number() &&
      impl->allow_tensor_metadata_change() && claim_pool_block(storage_impl->_mutable_data_ptr_no_checks(), device)) {
    storage_impl->set_allocator(npu_allocator());
    impl->set_storage_keep_dtype(c10::Storage(storage));
    impl->_change_backend_component_keys(c10::Device(kNpu, device));
    return cpu;
  }
  return npu_tensor_over(npu_storage_from(storage, device), cpu);
}

at::Tensor npu_alias_of_host(const at::Tensor& cpu, c10::DeviceIndex device) {
  TORCH_CHECK(cpu.device().is_cpu(), "expected a CPU tensor, got one on ", cpu.device());
  check_strided(cpu);
  return npu_tensor_over(npu_storage_from(cpu.storage(), device), cpu);
}

const CallMapping::Alias* CallMapping::alias_of_storage(const c10::StorageImpl* npu_storage) {
  if (aliases.size() < kIndexedAliases) {
    for (const auto& a : aliases) {
      if (a.npu_storage == npu_storage) {
        return &a;
      }
    }
    return nullptr;
  }
  for (; indexed < aliases.size(); ++indexed) {
    by_storage.emplace(aliases[indexed].npu_storage, indexed);  // keeps the first alias of each storage
  }
  const auto found = by_storage.find(npu_storage);
  return found == by_storage.end() ? nullptr : &aliases[found->second];
}

at::Tensor CallMapping::alias_input(const at::Tensor& npu, int arg) {
  const c10::StorageImpl* npu_storage = npu.has_storage() ? npu.storage().unsafeGetStorageImpl() : nullptr;
  // Arguments over one npu storage share one CPU storage, so the kernel sees them alias each other:
  // PyTorch's overlap checks (copy_, in-place and out= operators) then raise as on the CPU.
  const Alias* sibling = npu_storage != nullptr && !npu._is_zerotensor() ? alias_of_storage(npu_storage) : nullptr;
  at::Tensor cpu;
  const bool own = sibling == nullptr || sibling->cpu_storage == nullptr;
  if (!own) {
    check_in_bounds(npu);
    cpu = at::detail::make_tensor<c10::TensorImpl>(c10::Storage(sibling->cpu.storage()), kCpuKeys, npu.dtype());
    copy_geometry(npu, cpu);
  } else {
    cpu = make_cpu_alias(npu, /*owning=*/false);
  }
  c10::StorageImpl* storage = cpu.has_storage() ? cpu.storage().unsafeGetStorageImpl() : nullptr;
  aliases.push_back({borrow_inputs ? c10::MaybeOwned<at::Tensor>::borrowed(npu)
                                   : c10::MaybeOwned<at::Tensor>::owned(std::in_place, npu),
                     cpu, storage, npu_storage, arg, own && storage != nullptr && !npu._is_zerotensor()});
  return cpu;
}

CallMapping::~CallMapping() {
  if (aliases.empty()) {
    return;
  }
  SpareAliases& spare = tl_spare_aliases;
  // Last alias first: a sibling sharing an earlier alias's storage goes before that alias is considered.
  for (auto it = aliases.rbegin(); it != aliases.rend(); ++it) {
    if (it->recyclable) {
      keep_spare(spare, it->cpu);
    } else {
      it->cpu.reset();
    }
  }
}

void CallMapping::sync_written(const std::vector<uint8_t>& written) {
  c10::SmallVector<const c10::StorageImpl*, 2> synced;  // npu storages already given the kernel's memory
  for (auto& a : aliases) {
    if (!written[static_cast<size_t>(a.arg)] || !a.cpu.has_storage() || a.npu->_is_zerotensor()) {
      continue;
    }
    auto* cpu_impl = a.cpu.unsafeGetTensorImpl();
    auto* npu_impl = a.npu->unsafeGetTensorImpl();
    const auto npu_device = a.npu->device().index();
    c10::StorageImpl* now = a.cpu.storage().unsafeGetStorageImpl();
    if (std::find(synced.begin(), synced.end(), a.npu_storage) != synced.end()) {
      // Another argument over the same storage already moved the memory across.
    } else if (now != a.cpu_storage) {
      // The kernel pointed the argument at other memory (set_): another argument's, or its own.
      c10::Storage target;
      for (const auto& other : aliases) {
        if (other.cpu_storage == now) {
          target = other.npu->storage();
          break;
        }
      }
      if (!target) {
        target = npu_storage_from(a.cpu.storage(), npu_device);
        adopted.emplace_back(now, target);
      }
      npu_impl->set_storage_keep_dtype(std::move(target));
    } else if (now->data() != a.npu->storage().data() || now->nbytes() != a.npu->storage().nbytes()) {
      // The kernel resized the argument: its new memory becomes the npu storage's memory, so
      // every npu view of that storage follows, as on the CPU.
      auto* npu_storage = a.npu->storage().unsafeGetStorageImpl();
      if (claim_pool_block(now->_mutable_data_ptr_no_checks(), npu_device)) {
        npu_storage->set_data_ptr_noswap(now->set_data_ptr(c10::DataPtr()));
      } else {
        npu_storage->set_data_ptr_noswap(
            adopt_foreign_storage(c10::Storage(c10::intrusive_ptr<c10::StorageImpl>::reclaim_copy(now)), npu_device));
      }
      npu_storage->set_nbytes(now->nbytes());
      // Later outputs that share the kernel's storage map to the npu storage.
      adopted.emplace_back(now, a.npu->storage());
      synced.push_back(a.npu_storage);
    }
    if (cpu_impl->sizes() != npu_impl->sizes() || cpu_impl->strides() != npu_impl->strides() ||
        cpu_impl->storage_offset() != npu_impl->storage_offset()) {
      npu_impl->set_sizes_and_strides(cpu_impl->sizes(), cpu_impl->strides(), cpu_impl->storage_offset());
    }
  }
}

at::Tensor CallMapping::to_npu(const at::Tensor& result) {
  if (!result.defined() || result.device().type() != c10::kCPU) {
    return result;
  }
  auto* impl = result.unsafeGetTensorImpl();
  for (const auto& a : aliases) {
    if (a.cpu.unsafeGetTensorImpl() == impl) {
      return *a.npu;  // returned an argument (in-place and out= operators)
    }
  }
  for (auto* input : cpu_inputs) {
    if (input == impl) {
      return result;  // returned a CPU argument (copy_ into a CPU tensor)
    }
  }
  if (keep_cpu) {
    return result;
  }
  if (C10_UNLIKELY(result._is_zerotensor())) {
    return make_zero_tensor(result.sizes(), result.scalar_type(), c10::Device(kNpu, device));
  }
  if (result.has_storage()) {
    auto* storage = result.storage().unsafeGetStorageImpl();
    for (const auto& a : aliases) {
      if (a.cpu_storage == storage) {
        return npu_view(*a.npu, result);  // a view of an argument
      }
    }
    for (const auto& [cpu_storage, npu_storage] : adopted) {
      if (cpu_storage == storage) {
        check_strided(result);
        return npu_tensor_over(npu_storage, result);
      }
    }
  }
  at::Tensor npu = adopt_cpu_result(result, device);
  if (npu.unsafeGetTensorImpl() != impl && npu.has_storage()) {
    adopted.emplace_back(result.storage().unsafeGetStorageImpl(), npu.storage());
  }
  return npu;
}

}  // namespace vnpu
