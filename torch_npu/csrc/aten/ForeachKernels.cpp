// The tensor-list (_foreach_*) operators of the optimizers (Adam, AdamW, SGD with momentum) and zero_grad on the
// npu tensors themselves. The CPU computes them with a loop that calls the one-tensor operator on each element
// (foreach_tensor_*_slow); that loop is device-generic, so it runs here as it runs on the CPU and each one-tensor
// operator takes its own npu path (StructuredKernels.cpp: on the npu tensors, no CPU alias). The redirect would
// alias every element of every list first: ~0.2 us a tensor, 4 us for an addcdiv_ over 6 parameters.
//
// A call takes this path when nothing observes the operator (hooks, dumps, the profiler's kernels see one list
// operator, as on the card), its tensors share the current device and one dtype, and the lists hold tensors of
// one shape at each position: then no element can fail where the first did not, so an error (the CPU's) is raised
// before anything was written. Other calls take the typed redirect, as _foreach_mul_.Scalar always does (the CPU's
// mul_(Scalar) rounds the number to a float16 tensor's dtype first, which only its own kernel does).
#include "aten/DirectAdmission.h"
#include "aten/UnboxedRedirect.h"

#include <ATen/ops/_foreach_add_native.h>
#include <ATen/ops/_foreach_addcdiv_native.h>
#include <ATen/ops/_foreach_addcmul_native.h>
#include <ATen/ops/_foreach_div_native.h>
#include <ATen/ops/_foreach_lerp_native.h>
#include <ATen/ops/_foreach_mul_native.h>
#include <ATen/ops/_foreach_sqrt_native.h>
#include <ATen/ops/_foreach_sub_native.h>
#include <ATen/ops/_foreach_zero_native.h>

#include <torch/library.h>

namespace vnpu {
namespace {

// The lists of a call have the length and, position by position, the shapes of its first list.
struct SameShapesAcrossLists {
  template <class... Args>
  static bool admits(at::ScalarType /*dtype*/, const Args&... args) {
    const at::TensorList* first = nullptr;
    bool same = true;
    auto compare = [&](const auto& value) {
      if constexpr (std::is_same_v<std::decay_t<decltype(value)>, at::TensorList>) {
        if (first == nullptr) {
          first = &value;
          return;
        }
        same = same && value.size() == first->size();
        for (size_t i = 0; same && i < value.size(); ++i) {
          same = value[i].sizes() == (*first)[i].sizes();
        }
      }
    };
    (compare(args), ...);
    return same;
  }
};

// The CPU's loop; a dtype the CPU has no kernel for is met at the first element (one dtype), before any write, and
// the redirect raises it with the npu kernel's name; other errors are the CPU's, raised where the CPU raises them.
template <class Op, auto Loop>
using Foreach = Composite<Op, Loop, SameShapesAcrossLists, c10::NotImplementedError>;

}  // namespace
}  // namespace vnpu

TORCH_LIBRARY_IMPL(aten, PrivateUse1, m) {
  namespace native = at::native;
#define VNPU_FOREACH(name, op, loop) m.impl(name, TORCH_FN((&vnpu::Foreach<at::_ops::op, &native::loop>::call)));
  VNPU_FOREACH("_foreach_add_.Scalar", _foreach_add__Scalar, foreach_tensor_add_scalar_kernel_slow_)
  VNPU_FOREACH("_foreach_add_.List", _foreach_add__List, foreach_tensor_add_list_kernel_slow_)
  VNPU_FOREACH("_foreach_add_.Tensor", _foreach_add__Tensor, foreach_tensor_add_tensor_kernel_slow_)
  VNPU_FOREACH("_foreach_sub_.Scalar", _foreach_sub__Scalar, foreach_tensor_sub_scalar_kernel_slow_)
  VNPU_FOREACH("_foreach_mul_.Tensor", _foreach_mul__Tensor, foreach_tensor_mul_tensor_kernel_slow_)
  VNPU_FOREACH("_foreach_div_.Scalar", _foreach_div__Scalar, foreach_tensor_div_scalar_kernel_slow_)
  VNPU_FOREACH("_foreach_div_.ScalarList", _foreach_div__ScalarList, foreach_tensor_div_scalarlist_kernel_slow_)
  VNPU_FOREACH("_foreach_lerp_.Scalar", _foreach_lerp__Scalar, foreach_tensor_lerp_list_kernel_slow_)
  VNPU_FOREACH("_foreach_addcmul_.Scalar", _foreach_addcmul__Scalar, foreach_tensor_addcmul_scalar_slow_)
  VNPU_FOREACH("_foreach_addcdiv_.Scalar", _foreach_addcdiv__Scalar, foreach_tensor_addcdiv_scalar_slow_)
  VNPU_FOREACH("_foreach_addcdiv_.ScalarList", _foreach_addcdiv__ScalarList, foreach_tensor_addcdiv_scalarlist_slow_)
  VNPU_FOREACH("_foreach_sqrt", _foreach_sqrt, foreach_tensor_sqrt_slow)
  VNPU_FOREACH("_foreach_zero_", _foreach_zero_, foreach_tensor_zero_slow_)
#undef VNPU_FOREACH
}
