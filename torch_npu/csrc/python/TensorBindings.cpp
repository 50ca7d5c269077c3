// torch_npu's tensor-memory helpers: a tensor that refers to another's memory without keeping it
// alive (_weak_ref_tensor), pointing a tensor's storage into another's (npu_change_data_ptr), and an npu
// tensor whose memory is host memory outside the device's caching allocator (empty_with_swapped_memory), and
// compiled code's dispatcher-free allocation (_empty_strided_npu).
#include "python/Bindings.h"

#include "aten/EmptyStrided.h"
#include "runtime/ErrorCode.h"

#include <ATen/ATen.h>
#include <c10/core/CPUAllocator.h>
#include <torch/csrc/utils/pybind.h>

namespace vnpu::python {
namespace py = pybind11;
namespace {

constexpr c10::DeviceType kNpuType = c10::DeviceType::PrivateUse1;

at::Tensor weak_ref_tensor(const at::Tensor& t) {
  TORCH_CHECK(t.device().type() == kNpuType, "_weak_ref_tensor expects an npu tensor, got one on ", t.device(),
              ops_param_error());
  // Same memory, sizes and strides; the storage's deleter does nothing, so the memory lives as long
  // as `t`'s storage does (the caller keeps it alive, as with torch_npu).
  return at::from_blob(t.data_ptr(), t.sizes(), t.strides(), [](void*) {}, t.options());
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
  const auto numel = c10::multiply_integers(sizes);
  auto host = std::make_shared<c10::DataPtr>(c10::GetCPUAllocator()->allocate(numel * c10::elementSize(dtype)));
  auto options = at::TensorOptions().dtype(dtype).device(c10::Device(kNpuType, static_cast<c10::DeviceIndex>(device)));
  return at::from_blob(host->get(), sizes, [host](void*) mutable { host.reset(); }, options);
}

// torch_npu._C._empty_strided_npu(sizes, strides, dtype): compiled code's allocation fast path (as PyTorch's
// _empty_strided_cuda), an npu tensor of the current device made as aten::empty_strided makes it.
at::Tensor empty_strided_npu(const std::vector<int64_t>& sizes, const std::vector<int64_t>& strides,
                             c10::ScalarType dtype) {
  TORCH_CHECK(sizes.size() == strides.size(), "_empty_strided_npu: ", sizes.size(), " sizes but ", strides.size(),
              " strides", ops_param_error());
  return vnpu::empty_strided_npu(sizes, strides, dtype);
}

}  // namespace

void bind_tensors(py::module& m) {
  m.def("_weak_ref_tensor", &weak_ref_tensor);
  m.def("_change_data_ptr", &change_data_ptr);
  m.def("_empty_with_swapped_memory", &empty_with_swapped_memory);
  m.def("_empty_strided_npu", &empty_strided_npu);
}

}  // namespace vnpu::python
