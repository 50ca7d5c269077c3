// torch_npu's tensor-memory helpers: a tensor that refers to another's memory without keeping it
// alive (_weak_ref_tensor), pointing a tensor's storage into another's (npu_change_data_ptr), and an npu
// tensor whose memory is host memory outside the device's caching allocator (empty_with_swapped_memory), and
// compiled code's dispatcher-free allocation (_empty_strided_npu); the storage descriptor torch_npu keeps per npu
// storage (private format, physical size, base sizes and dtype) and the tensor it describes
// (_tensor_construct_from_storage).
#include "python/Bindings.h"

#include "aten/EmptyStrided.h"
#include "runtime/CachingAllocator.h"
#include "runtime/Device.h"
#include "runtime/ErrorCode.h"

#include <ATen/ATen.h>
#include <c10/core/CPUAllocator.h>
#include <c10/util/strides.h>
#include <torch/csrc/DynamicTypes.h>
#include <torch/csrc/utils/pybind.h>

namespace vnpu::python {
namespace py = pybind11;
namespace {

constexpr c10::DeviceType kNpuType = c10::DeviceType::PrivateUse1;

at::Tensor weak_ref_tensor(const at::Tensor& t) {
  TORCH_CHECK(t.device().type() == kNpuType, "_weak_ref_tensor expects an npu tensor, got one on ", t.device(),
              ops_param_error());
  // The whole of t's storage borrowed (its format read through), with t's sizes, strides and offset; dropping it
  // frees nothing, so the memory lives as long as t's storage does (the caller keeps it alive, as with torch_npu).
  const c10::Storage& owner = t.storage();
  c10::Storage storage(c10::Storage::use_byte_size_t(), owner.nbytes(), borrowed_data_ptr(owner.data_ptr()),
                       /*allocator=*/nullptr, /*resizable=*/false);
  auto weak = at::detail::make_tensor<c10::TensorImpl>(std::move(storage),
                                                       c10::DispatchKeySet(c10::DispatchKey::PrivateUse1), t.dtype());
  weak.unsafeGetTensorImpl()->set_sizes_and_strides(t.sizes(), t.strides(), t.storage_offset());
  return weak;
}

int64_t change_data_ptr(const at::Tensor& dst, const at::Tensor& src, int64_t offset) {
  TORCH_CHECK(dst.device().type() == kNpuType && src.device().type() == kNpuType,
              "npu_change_data_ptr expects npu tensors, got ", dst.device(), " and ", src.device(), ops_param_error());
  TORCH_CHECK(dst.scalar_type() == src.scalar_type(), "npu_change_data_ptr: dst is ", dst.scalar_type(), " but src is ",
              src.scalar_type(), ops_param_error());
  TORCH_CHECK(offset >= 0, "npu_change_data_ptr: index must be non-negative, got ", offset, ops_param_error());
  const int64_t available =
      static_cast<int64_t>(src.storage().nbytes() / src.element_size()) - src.storage_offset() - offset;
  TORCH_CHECK(dst.numel() <= available, "npu_change_data_ptr: dst needs ", dst.numel(), " elements but src has ",
              available, " from index ", offset, ops_param_error());
  char* target = static_cast<char*>(src.data_ptr()) + offset * src.element_size();
  // The storage now borrows src's memory (freeing its own block); src's storage must outlive it.
  dst.storage().set_data_ptr_noswap(c10::DataPtr(target, dst.device()));
  dst.unsafeGetTensorImpl()->set_storage_offset(0);
  return 0;
}

// The card maps host memory into the device's address space; here the bytes come from the host allocator
// rather than the npu caching allocator, so they count against neither the device's capacity nor its
// memory statistics, as swapped memory does not on the card.
at::Tensor empty_with_swapped_memory(const std::vector<int64_t>& sizes, c10::ScalarType dtype, int64_t device) {
  for (const auto size : sizes) {
    TORCH_CHECK(size >= 0, "empty_with_swapped_memory: sizes must be non-negative, got ", c10::IntArrayRef(sizes),
                ops_param_error());
  }
  vnpu::check_device_index(static_cast<c10::DeviceIndex>(device));
  const auto numel = c10::multiply_integers(sizes);
  auto host = std::make_shared<c10::DataPtr>(c10::GetCPUAllocator()->allocate(numel * c10::elementSize(dtype)));
  const c10::Device target(kNpuType, static_cast<c10::DeviceIndex>(device));
  // the device is given, not looked up from the (host) pointer, so any npu device can hold it
  return at::for_blob(host->get(), sizes)
      .deleter([host](void*) mutable { host.reset(); })
      .target_device(target)
      .options(at::TensorOptions().dtype(dtype).device(target))
      .make_tensor();
}

// torch_npu._C._empty_strided_npu(sizes, strides, dtype): compiled code's allocation fast path (as PyTorch's
// _empty_strided_cuda), an npu tensor of the current device made as aten::empty_strided makes it.
at::Tensor empty_strided_npu(const std::vector<int64_t>& sizes, const std::vector<int64_t>& strides,
                             c10::ScalarType dtype) {
  TORCH_CHECK(sizes.size() == strides.size(), "_empty_strided_npu: ", sizes.size(), " sizes but ", strides.size(),
              " strides", ops_param_error());
  return vnpu::empty_strided_npu(sizes, strides, dtype);
}

// torch_npu._C._tensor_construct_from_storage(storage): the tensor an npu storage describes, over all of it
// from offset 0: its base sizes and dtype where the storage keeps them (a private format was given, as torch_npu
// keeps them for every storage); otherwise the storage's elements as one dimension, typed as a TypedStorage
// is, bytes (uint8) for an UntypedStorage.
at::Tensor tensor_from_storage(const py::handle& source) {
  TORCH_CHECK_TYPE(torch::isStorage(source.ptr()), "_tensor_construct_from_storage(): argument 'source' must be ",
                   "Storage, not ", Py_TYPE(source.ptr())->tp_name);
  auto [storage, typed_dtype, is_typed] = torch::createStorageGetType(source.ptr());
  TORCH_CHECK(storage.device_type() == kNpuType, "_tensor_construct_from_storage expects an npu storage, got one on ",
              storage.device(), ops_param_error());
  auto base = storage_base(storage.data_ptr());
  // a storage made on its own has the one-dimension-of-bytes descriptor; a TypedStorage over it reads its dtype
  const bool raw = base && base->dtype == c10::ScalarType::Byte && base->sizes.size() == 1 &&
                   base->sizes[0] == static_cast<int64_t>(storage.nbytes());
  if (raw && is_typed) {
    base.reset();
  }
  const c10::ScalarType dtype = base ? base->dtype : (is_typed ? typed_dtype : c10::ScalarType::Byte);
  const int64_t elements = static_cast<int64_t>(storage.nbytes() / c10::elementSize(dtype));
  const std::vector<int64_t> sizes = base ? base->sizes : std::vector<int64_t>{elements};
  at::Tensor t = at::empty({0}, at::TensorOptions().dtype(dtype).device(storage.device()));
  t.set_(storage, 0, sizes, c10::contiguous_strides(sizes));
  return t;
}

}  // namespace

void bind_tensors(py::module& m) {
  m.def("_tensor_construct_from_storage", &tensor_from_storage);
  // Records the private format of t's storage (torch_npu.Format, -1 for the rank's default) and its physical
  // element count; t's sizes and dtype become the storage's base unless base_sizes / base_dtype are given.
  m.def(
      "_set_storage_format",
      [](const at::Tensor& t, int format, int64_t storage_numel, std::optional<std::vector<int64_t>> base_sizes,
         std::optional<c10::ScalarType> base_dtype) {
        return set_storage_format(
            t.storage().data_ptr(), format, storage_numel,
            StorageBase{base_sizes.value_or(t.sizes().vec()), base_dtype.value_or(t.scalar_type())});
      },
      py::arg("t"), py::arg("format"), py::arg("storage_numel"), py::arg("base_sizes") = py::none(),
      py::arg("base_dtype") = py::none());
  m.def("_storage_format", [](const at::Tensor& t) { return storage_format(t.storage().data_ptr()); });
  // (base sizes, base dtype) of t's storage, None when none was recorded
  m.def("_storage_base", [](const at::Tensor& t) -> py::object {
    const auto base = storage_base(t.storage().data_ptr());
    return base ? py::object(py::make_tuple(base->sizes, base->dtype)) : py::object(py::none());
  });
  m.def("_weak_ref_tensor", &weak_ref_tensor);
  m.def("_change_data_ptr", &change_data_ptr);
  m.def("_empty_with_swapped_memory", &empty_with_swapped_memory);
  m.def("_empty_strided_npu", &empty_strided_npu);
}

}  // namespace vnpu::python
