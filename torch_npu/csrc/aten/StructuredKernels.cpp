// Operators that run on the npu tensors themselves, without CPU aliases.
//
// The redirect (Redirect.cpp, UnboxedRedirect.h) runs an operator's CPU kernel on CPU aliases of its
// npu arguments and adopts what the kernel allocated. ATen's structured operators (a meta function that
// sizes the output -- the element-wise ones by building a TensorIterator -- and an impl that calls a
// DispatchStub or BLAS) have a shorter way, the one CUDA's generated kernels take: their structured class
// is built on the npu tensors, the output comes straight from the npu pool, and the npu entry of each
// DispatchStub is the CPU's kernel (npu memory is host memory). No alias is built and no result adopted.
// Operators whose CPU code is device-generic code around other operators (relu, fill_, zero_, the *_like
// factories) run it. Copies and conversions between npu tensors are in DirectCopy.cpp.
//
// The CPU and the npu run the same code and the same kernels: results are bit-identical. What differs
// is where that code branches on the device, so this path takes only calls where it does not:
// TensorIterator converts operands of another dtype through temporaries only on the CPU (the npu tensors
// of a call must share one dtype; a CPU scalar beside them is converted as the CPU does); the CPU's
// matmul and reductions take oneDNN or float32-buffer paths for 16-bit floats (mm, addmm and sum run here
// in float32 / float64 only); its matmul copies operands BLAS cannot read as they are, its softmax and
// nll_loss non-contiguous operands (copies that would be npu tensors counted in the pool's peaks); nll_loss's
// class indices are the one operand of another dtype taken (int64 or uint8). Operators whose CPU kernel makes
// scratch tensors on its input's device (layer_norm's backward sums per thread) stay on the redirect, where such
// scratch is the kernel's memory and counts as the card's workspace does. Every other call -- mixed dtypes or
// devices, CPU tensors, observed operators (hooks, precision emulation), a stopped device, a forked child -- and every
// call that fails takes the redirect, which runs it or raises the error with torch_npu's text.
#include "aten/DirectAdmission.h"
#include "aten/DispatchStubBuild.h"

#include <ATen/EmptyTensor.h>
#include <ATen/native/Activation.h>
#include <ATen/native/BinaryOps.h>
#include <ATen/native/Copy.h>
#include <ATen/native/Fill.h>
#include <ATen/native/Lerp.h>
#include <ATen/native/PointwiseOps.h>
#include <ATen/native/Pow.h>
#include <ATen/native/ReduceOps.h>
#include <ATen/native/TensorCompare.h>
#include <ATen/native/UnaryOps.h>
#include <ATen/ops/_log_softmax_backward_data_native.h>
#include <ATen/ops/_log_softmax_native.h>
#include <ATen/ops/_softmax_backward_data_native.h>
#include <ATen/ops/_softmax_native.h>
#include <ATen/ops/_unsafe_view_native.h>
#include <ATen/ops/add_native.h>
#include <ATen/ops/addcdiv_native.h>
#include <ATen/ops/addcmul_native.h>
#include <ATen/ops/addmm_native.h>
#include <ATen/ops/cat_native.h>
#include <ATen/ops/clamp_min_native.h>
#include <ATen/ops/cos_native.h>
#include <ATen/ops/div_native.h>
#include <ATen/ops/empty_like_native.h>
#include <ATen/ops/exp_native.h>
#include <ATen/ops/fill_native.h>
#include <ATen/ops/lerp_native.h>
#include <ATen/ops/log_native.h>
#include <ATen/ops/mm_native.h>
#include <ATen/ops/mul_native.h>
#include <ATen/ops/native_layer_norm_native.h>
#include <ATen/ops/neg_native.h>
#include <ATen/ops/nll_loss_backward_native.h>
#include <ATen/ops/nll_loss_forward_native.h>
#include <ATen/ops/ones_like_native.h>
#include <ATen/ops/pow_native.h>
#include <ATen/ops/reciprocal_native.h>
#include <ATen/ops/relu_native.h>
#include <ATen/ops/rsqrt_native.h>
#include <ATen/ops/sigmoid_backward_native.h>
#include <ATen/ops/sigmoid_native.h>
#include <ATen/ops/silu_backward_native.h>
#include <ATen/ops/silu_native.h>
#include <ATen/ops/sin_native.h>
#include <ATen/ops/sqrt_native.h>
#include <ATen/ops/sub_native.h>
#include <ATen/ops/sum.h>
#include <ATen/ops/sum_native.h>
#include <ATen/ops/tanh_backward_native.h>
#include <ATen/ops/tanh_native.h>
#include <ATen/ops/threshold_backward_native.h>
#include <ATen/ops/zero_native.h>
#include <ATen/ops/zeros_like_native.h>
#include <torch/library.h>

#include <algorithm>
#include <array>
#include <optional>
#include <tuple>
#include <type_traits>
#include <utility>

namespace vnpu {
namespace {

// The npu entry of a DispatchStub: the CPU's kernel.
template <auto& Stub, class Fn = typename std::remove_reference_t<decltype(Stub)>::FnPtr>
struct HostKernel;
template <auto& Stub, class R, class... A>
struct HostKernel<Stub, R (*)(A...)> {
  static R run(A... args) {
    return Stub(c10::DeviceType::CPU, std::forward<A>(args)...);
  }
};

// An operator's structured class, built on npu tensors.
template <class Structured>
struct NpuStructured : Structured {
  // A TensorIterator records each output it is given; other structured classes only read it back.
  void record_output(int64_t i, at::IntArrayRef sizes, at::IntArrayRef strides, at::TensorOptions options) {
    if constexpr (std::is_base_of_v<at::TensorIteratorBase, Structured>) {
      Structured::set_output_raw_strided(i, sizes, strides, options);
    }
  }

  // True when the CPU kernel will see every operand in the call's dtype, as on the CPU.
  //
  // For a TensorIterator: its CPU-only step, which it skips on other devices -- a CPU scalar of another
  // dtype becomes a temporary of the common dtype, the original kept (the reduced-float kernels of mul
  // and div read the number from it at full precision) -- then every operand must have the call's dtype.
  // For other structured classes (matmuls, reductions): the output has the inputs' dtype.
  bool settle_operands(at::ScalarType dtype) {
    if constexpr (std::is_base_of_v<at::TensorIteratorBase, Structured>) {
      if (this->maybe_common_dtype() != dtype) {
        return false;
      }
      for (auto& op : this->operands_) {
        if (op.current_dtype == dtype) {
          continue;
        }
        if (op.is_output || !op.tensor_base().is_cpu()) {
          return false;
        }
        op.exchange_tensor(c10::MaybeOwned<at::TensorBase>::owned(op.tensor().to(dtype)));
        op.current_dtype = op.target_dtype = dtype;
        op.data = op.tensor_base().mutable_data_ptr();
      }
      return true;
    } else {
      return this->maybe_get_output(0).scalar_type() == dtype;
    }
  }
};

// The structured class of an operator with its outputs allocated from the npu pool.
template <class Structured, size_t Outputs = 1>
struct NpuFunctional final : NpuStructured<Structured> {
  void set_output_raw_strided(int64_t i, at::IntArrayRef sizes, at::IntArrayRef strides,
                              at::TensorOptions options) override {
    const auto dtype = options.dtype().toScalarType();
    outputs[i] = strides.empty()
                     ? at::detail::empty_generic(sizes, npu_allocator(), kNpuKeys, dtype, options.memory_format_opt())
                     : at::detail::empty_strided_generic(sizes, strides, npu_allocator(), kNpuKeys, dtype);
    this->record_output(i, sizes, strides, options);
  }
  const at::Tensor& maybe_get_output(int64_t i) override {
    return outputs[i];
  }
  std::array<at::Tensor, Outputs> outputs;
};

// The structured class of an in-place operator: its output is its first argument.
template <class Structured>
struct NpuInPlace final : NpuStructured<Structured> {
  explicit NpuInPlace(at::Tensor& self) : self(self) {}
  void set_output_raw_strided(int64_t i, at::IntArrayRef sizes, at::IntArrayRef strides,
                              at::TensorOptions options) override {
    // TensorIterator has checked both; a failure here sends the call to the redirect, which raises.
    TORCH_CHECK(options.dtype() == self.dtype() && sizes == self.sizes(), "in-place output differs from self");
    this->record_output(i, sizes, strides, options);
  }
  const at::Tensor& maybe_get_output(int64_t /*i*/) override {
    return self;
  }
  at::Tensor& self;
};

// The calls an operator takes this path with, beyond the admission (DirectAdmission.h): any dtype, or only
// float32 / float64 where the CPU's implementation branches on the device for the others (oneDNN bf16 / fp16
// matmuls read CPU tensors only; CPU reductions of bf16 / fp16 accumulate in a float32 buffer).
struct FullPrecisionFloat {
  template <class... Args>
  static bool admits(at::ScalarType dtype, const Args&... /*args*/) {
    return dtype == at::kFloat || dtype == at::kDouble;
  }
};

// Matmul operands BLAS reads as they are (row- or column-major): others are first copied by the CPU's
// matmul, whose copy on the CPU is scratch that never shows in the npu pool's peaks, and on npu
// tensors would be an npu tensor that does; those calls take the redirect.
bool blas_reads_as_is(const at::Tensor& m) {
  const auto sizes = m.sizes();
  const auto strides = m.strides();
  return (strides[1] == 1 && strides[0] >= std::max<int64_t>(1, sizes[1])) ||
         (strides[0] == 1 && strides[1] >= std::max<int64_t>(1, sizes[0]));
}
bool blas_reads_both(const at::Tensor& mat1, const at::Tensor& mat2) {
  return mat1.dim() == 2 && mat2.dim() == 2 && blas_reads_as_is(mat1) && blas_reads_as_is(mat2);
}
struct FullPrecisionMatmul {
  static bool admits(at::ScalarType dtype, const at::Tensor& self, const at::Tensor& mat2) {
    return FullPrecisionFloat::admits(dtype) && blas_reads_both(self, mat2);
  }
};
struct FullPrecisionAddmm {
  template <class... Rest>
  static bool admits(at::ScalarType dtype, const at::Tensor& /*self*/, const at::Tensor& mat1, const at::Tensor& mat2,
                     const Rest&... /*scalars*/) {
    return FullPrecisionFloat::admits(dtype) && blas_reads_both(mat1, mat2);
  }
};

// Softmax and loss kernels read contiguous operands: the CPU's impl makes a contiguous copy of any other, which here
// would be an npu tensor counted in the pool's peaks; those calls take the redirect.
struct ContiguousOperands {
  template <class... Args>
  static bool admits(at::ScalarType /*dtype*/, const Args&... args) {
    return (contiguous_if_tensor(args) && ...);
  }
  template <class T>
  static bool contiguous_if_tensor(const T& value) {
    if constexpr (std::is_same_v<T, at::Tensor>) {
      return value.is_contiguous();
    } else if constexpr (std::is_same_v<T, std::optional<at::Tensor>>) {
      return !value.has_value() || !value->defined() || value->is_contiguous();
    } else {
      return true;
    }
  }
};

// A call's run on its npu tensors: `attempt` returns the result, or nothing (an empty optional, false) when an operand
// cannot take this path. An error of the CPU's code is left to the redirect, which raises it with torch_npu's text;
// running out of npu memory is the call's own error.
template <class Attempt>
auto on_the_npu_tensors(Attempt&& attempt) -> decltype(attempt()) {
  try {
    return attempt();
  } catch (const c10::OutOfMemoryError&) {
    throw;
  } catch (const c10::Error&) {
    return {};
  }
}

template <class Op, class Structured, class Admits = AnyDtype, class Sig = typename Op::schema>
struct Direct;

template <class Op, class Structured, class Admits, class... Args>
struct Direct<Op, Structured, Admits, at::Tensor(Args...)> {
  static at::Tensor call(Args... args) {
    Admission admission;
    if (admitted<Op, Admits>(admission, args...)) {
      auto result = on_the_npu_tensors([&]() -> std::optional<at::Tensor> {
        NpuFunctional<Structured> op;
        op.meta(args...);
        if (!op.settle_operands(admission.dtype())) {
          return std::nullopt;
        }
        DevicePoolScope scope(admission.device());  // scratch from the npu pool; the device is busy
        op.impl(args..., op.outputs[0]);
        return std::move(op.outputs[0]);
      });
      if (result.has_value()) {
        return std::move(*result);
      }
    }
    return Unboxed<Op>::call(args...);
  }
};

template <class Op, class Structured, class Admits, class... Args>
struct Direct<Op, Structured, Admits, at::Tensor&(at::Tensor&, Args...)> {
  static at::Tensor& call(at::Tensor& self, Args... args) {
    Admission admission;
    if (admitted<Op, Admits>(admission, self, args...) && on_the_npu_tensors([&] {
          NpuInPlace<Structured> op(self);
          op.meta(self, args...);
          if (!op.settle_operands(admission.dtype())) {
            return false;
          }
          DevicePoolScope scope(admission.device());  // scratch from the npu pool; the device is busy
          op.impl(self, args..., self);
          return true;
        })) {
      return self;
    }
    return Unboxed<Op>::call(self, args...);
  }
};

// CPU implementations taking concrete sizes where the operator's schema has symbolic ones (eager npu
// tensors always have concrete sizes).
std::tuple<at::Tensor, at::Tensor, at::Tensor> layer_norm(const at::Tensor& input, c10::SymIntArrayRef shape,
                                                          const std::optional<at::Tensor>& weight,
                                                          const std::optional<at::Tensor>& bias, double eps) {
  return at::native::layer_norm_cpu(input, C10_AS_INTARRAYREF_SLOW(shape), weight, bias, eps);
}
at::Tensor unsafe_view(const at::Tensor& self, c10::SymIntArrayRef size) {
  return at::native::_unsafe_view(self, C10_AS_INTARRAYREF_SLOW(size));
}

// nll_loss: its target holds class indices (int64, or uint8 as the CPU also takes) beside the call's
// floating-point tensors, which the admission takes as for any operator.
bool class_indices(const at::Tensor& target, const Admission& admission) {
  if (!target.defined() || target.device().type() != kNpu || target.device().index() != admission.device() ||
      (target.scalar_type() != at::kLong && target.scalar_type() != at::kByte) || !target.is_contiguous() ||
      target._is_zerotensor()) {
    return false;
  }
  check_in_bounds(target);
  return true;
}

at::OptionalTensorRef optional_ref(const std::optional<at::Tensor>& t) {
  return t.has_value() && t->defined() ? at::OptionalTensorRef(*t) : at::OptionalTensorRef();
}

struct NllLossForward {
  static std::tuple<at::Tensor, at::Tensor> call(const at::Tensor& self, const at::Tensor& target,
                                                 const std::optional<at::Tensor>& weight, int64_t reduction,
                                                 c10::SymInt ignore_index) {
    Admission admission;
    if (admitted<at::_ops::nll_loss_forward, ContiguousOperands>(admission, self, weight) &&
        class_indices(target, admission)) {
      auto result = on_the_npu_tensors([&]() -> std::optional<std::tuple<at::Tensor, at::Tensor>> {
        const int64_t ignored = ignore_index.expect_int();
        NpuFunctional<at::native::structured_nll_loss_forward_out_cpu, 2> op;
        op.meta(self, target, optional_ref(weight), reduction, ignored);
        if (!op.settle_operands(admission.dtype())) {
          return std::nullopt;
        }
        DevicePoolScope scope(admission.device());  // scratch from the npu pool; the device is busy
        op.impl(self, target, optional_ref(weight), reduction, ignored, op.outputs[0], op.outputs[1]);
        return std::make_tuple(std::move(op.outputs[0]), std::move(op.outputs[1]));
      });
      if (result.has_value()) {
        return std::move(*result);
      }
    }
    return Unboxed<at::_ops::nll_loss_forward>::call(self, target, weight, reduction, std::move(ignore_index));
  }
};

struct NllLossBackward {
  static at::Tensor call(const at::Tensor& grad_output, const at::Tensor& self, const at::Tensor& target,
                         const std::optional<at::Tensor>& weight, int64_t reduction, c10::SymInt ignore_index,
                         const at::Tensor& total_weight) {
    Admission admission;
    if (admitted<at::_ops::nll_loss_backward, ContiguousOperands>(admission, grad_output, self, weight, total_weight) &&
        class_indices(target, admission)) {
      auto result = on_the_npu_tensors([&]() -> std::optional<at::Tensor> {
        const int64_t ignored = ignore_index.expect_int();
        NpuFunctional<at::native::structured_nll_loss_backward_out_cpu> op;
        op.meta(grad_output, self, target, optional_ref(weight), reduction, ignored, total_weight);
        if (!op.settle_operands(admission.dtype())) {
          return std::nullopt;
        }
        DevicePoolScope scope(admission.device());  // scratch from the npu pool; the device is busy
        op.impl(grad_output, self, target, optional_ref(weight), reduction, ignored, total_weight, op.outputs[0]);
        return std::move(op.outputs[0]);
      });
      if (result.has_value()) {
        return std::move(*result);
      }
    }
    return Unboxed<at::_ops::nll_loss_backward>::call(grad_output, self, target, weight, reduction,
                                                      std::move(ignore_index), total_weight);
  }
};

// cat: its structured class precomputes the layout its impl reads; the impl copies with memcpy, the CPU's cat kernel
// or copy_stub (whose npu entry is the CPU's kernel), as on the CPU. stack is cat of its tensors.
struct Cat {
  static at::Tensor call(const at::ITensorListRef& tensors, int64_t dim) {
    Admission admission;
    if (admitted<at::_ops::cat, AnyDtype>(admission, tensors, dim)) {
      auto result = on_the_npu_tensors([&]() -> std::optional<at::Tensor> {
        NpuFunctional<at::native::structured_cat_out_cpu> op;
        const auto layout = op.meta(tensors, dim);
        if (!op.settle_operands(admission.dtype())) {
          return std::nullopt;
        }
        DevicePoolScope scope(admission.device());  // the device is busy
        op.impl(tensors, layout.dim, layout.valid, layout.all_contiguous, layout.all_same_dtype,
                layout.all_same_sizes_and_stride, layout.memory_format, op.outputs[0]);
        return std::move(op.outputs[0]);
      });
      if (result.has_value()) {
        return std::move(*result);
      }
    }
    return Unboxed<at::_ops::cat>::call(tensors, dim);
  }
};

// mean: the CPU's mean is its sum divided by the count of the reduced elements (ATen's mean_out branches on the
// device there: other devices take mean_stub), so in float32 / float64 it runs as that sum and division.
struct FullPrecisionMean {
  static bool admits(at::ScalarType dtype, const at::Tensor& /*self*/, at::OptionalIntArrayRef /*dim*/,
                     bool /*keepdim*/, std::optional<at::ScalarType> result_dtype) {
    return FullPrecisionFloat::admits(dtype) && FullPrecisionFloat::admits(result_dtype.value_or(dtype));
  }
};
at::Tensor mean_as_on_the_cpu(const at::Tensor& self, at::OptionalIntArrayRef dim, bool keepdim,
                              std::optional<at::ScalarType> dtype) {
  int64_t count = 1;
  if (!dim.has_value() || dim->empty() || self.dim() == 0) {
    count = self.numel();
  } else {
    for (const int64_t d : *dim) {
      count *= self.size(d);
    }
  }
  return at::sum(self, dim, keepdim, dtype).div_(count);
}

}  // namespace
}  // namespace vnpu

// The element-wise operators training and decoding steps call most (the benchmarks' steps in bench/bench_overhead.py,
// a Llama-style step's activations): (operator, its aten::_ops struct, the structured CPU class).
#define VNPU_STRUCTURED_OPS(_)                                                   \
  _("add.Tensor", add_Tensor, structured_ufunc_add_CPU)                          \
  _("add_.Tensor", add__Tensor, structured_ufunc_add_CPU)                        \
  _("sub.Tensor", sub_Tensor, structured_sub_out)                                \
  _("sub_.Tensor", sub__Tensor, structured_sub_out)                              \
  _("mul.Tensor", mul_Tensor, structured_mul_out)                                \
  _("mul_.Tensor", mul__Tensor, structured_mul_out)                              \
  _("div.Tensor", div_Tensor, structured_div_out)                                \
  _("div_.Tensor", div__Tensor, structured_div_out)                              \
  _("neg", neg, structured_neg_out)                                              \
  _("neg_", neg_, structured_neg_out)                                            \
  _("exp", exp, structured_exp_out)                                              \
  _("exp_", exp_, structured_exp_out)                                            \
  _("sqrt", sqrt, structured_sqrt_out)                                           \
  _("sqrt_", sqrt_, structured_sqrt_out)                                         \
  _("rsqrt", rsqrt, structured_rsqrt_out)                                        \
  _("rsqrt_", rsqrt_, structured_rsqrt_out)                                      \
  _("sigmoid", sigmoid, structured_sigmoid_out)                                  \
  _("sigmoid_", sigmoid_, structured_sigmoid_out)                                \
  _("tanh", tanh, structured_tanh_out)                                           \
  _("tanh_", tanh_, structured_tanh_out)                                         \
  _("lerp_.Scalar", lerp__Scalar, structured_lerp_Scalar)                        \
  _("addcmul_", addcmul_, structured_addcmul_out)                                \
  _("addcdiv_", addcdiv_, structured_addcdiv_out)                                \
  _("threshold_backward", threshold_backward, structured_threshold_backward_out) \
  _("clamp_min", clamp_min, structured_clamp_min_out)                            \
  _("clamp_min_", clamp_min_, structured_clamp_min_out)                          \
  _("pow.Tensor_Scalar", pow_Tensor_Scalar, structured_pow_Tensor_Scalar_out)    \
  _("reciprocal", reciprocal, structured_reciprocal_out)                         \
  _("log", log, structured_log_out)                                              \
  _("cos", cos, structured_cos_out)                                              \
  _("sin", sin, structured_sin_out)                                              \
  _("silu", silu, structured_silu_out)                                           \
  _("silu_", silu_, structured_silu_out)                                         \
  _("silu_backward", silu_backward, structured_silu_backward_out)                \
  _("sigmoid_backward", sigmoid_backward, structured_sigmoid_backward_out)       \
  _("tanh_backward", tanh_backward, structured_tanh_backward_out)
// Matmuls and reductions of those steps, in float32 and float64.
#define VNPU_FULL_PRECISION_OPS(_)                                              \
  _("sum.dim_IntList", sum_dim_IntList, structured_sum_out, FullPrecisionFloat) \
  _("mm", mm, structured_mm_out_cpu, FullPrecisionMatmul)                       \
  _("addmm", addmm, structured_addmm_out_cpu, FullPrecisionAddmm)
// Softmax of those steps' losses, on contiguous operands.
#define VNPU_CONTIGUOUS_OPS(_)                                                                         \
  _("_log_softmax", _log_softmax, structured_log_softmax_cpu_out)                                      \
  _("_log_softmax_backward_data", _log_softmax_backward_data, structured_log_softmax_backward_cpu_out) \
  _("_softmax", _softmax, structured_softmax_cpu_out)                                                  \
  _("_softmax_backward_data", _softmax_backward_data, structured_softmax_backward_cpu_out)

// The DispatchStubs those operators' impls call, with the CPU's kernels as their npu entries.
// clang-format off
#define VNPU_HOST_STUBS(_) \
  _(add_stub)          \
  _(mul_stub)          \
  _(div_true_stub)     \
  _(neg_stub)          \
  _(exp_stub)          \
  _(sqrt_stub)         \
  _(rsqrt_stub)        \
  _(sigmoid_stub)      \
  _(tanh_stub)         \
  _(lerp_kernel_scalar_weight) \
  _(addcmul_stub)      \
  _(addcdiv_stub)      \
  _(threshold_stub)    \
  _(clamp_min_scalar_stub) \
  _(sum_stub)          \
  _(pow_tensor_scalar_stub) \
  _(fill_stub)         \
  _(copy_stub)         \
  _(reciprocal_stub)   \
  _(log_stub)          \
  _(cos_stub)          \
  _(sin_stub)          \
  _(silu_stub)         \
  _(silu_backward_stub) \
  _(sigmoid_backward_stub) \
  _(tanh_backward_stub)
// clang-format on

namespace at::native {
#define VNPU_REGISTER_HOST_STUB(stub) REGISTER_PRIVATEUSE1_DISPATCH(stub, &vnpu::HostKernel<stub>::run)
VNPU_HOST_STUBS(VNPU_REGISTER_HOST_STUB)
#undef VNPU_REGISTER_HOST_STUB
}  // namespace at::native

TORCH_LIBRARY_IMPL(aten, PrivateUse1, m) {
#define VNPU_REGISTER_STRUCTURED(name, op, structured) \
  m.impl(name, TORCH_FN((&vnpu::Direct<at::_ops::op, at::native::structured>::call)));
  VNPU_STRUCTURED_OPS(VNPU_REGISTER_STRUCTURED)
#undef VNPU_REGISTER_STRUCTURED
#define VNPU_REGISTER_FULL_PRECISION(name, op, structured, admits) \
  m.impl(name, TORCH_FN((&vnpu::Direct<at::_ops::op, at::native::structured, vnpu::admits>::call)));
  VNPU_FULL_PRECISION_OPS(VNPU_REGISTER_FULL_PRECISION)
#undef VNPU_REGISTER_FULL_PRECISION
#define VNPU_REGISTER_CONTIGUOUS(name, op, structured) \
  m.impl(name, TORCH_FN((&vnpu::Direct<at::_ops::op, at::native::structured, vnpu::ContiguousOperands>::call)));
  VNPU_CONTIGUOUS_OPS(VNPU_REGISTER_CONTIGUOUS)
#undef VNPU_REGISTER_CONTIGUOUS
  m.impl("relu", TORCH_FN((&vnpu::Composite<at::_ops::relu, &at::native::relu>::call)));
  m.impl("relu_", TORCH_FN((&vnpu::Composite<at::_ops::relu_, &at::native::relu_>::call)));
  m.impl("zero_", TORCH_FN((&vnpu::Composite<at::_ops::zero_, &at::native::zero_>::call)));
  m.impl("native_layer_norm",
         TORCH_FN((&vnpu::Composite<at::_ops::native_layer_norm, &vnpu::layer_norm, vnpu::ContiguousOperands>::call)));
  m.impl("_unsafe_view", TORCH_FN((&vnpu::Composite<at::_ops::_unsafe_view, &vnpu::unsafe_view>::call)));
  m.impl("sum", TORCH_FN((&vnpu::Composite<at::_ops::sum, &at::native::sum>::call)));
  m.impl("mean.dim",
         TORCH_FN((&vnpu::Composite<at::_ops::mean_dim, &vnpu::mean_as_on_the_cpu, vnpu::FullPrecisionMean>::call)));
  m.impl("cat", TORCH_FN(vnpu::Cat::call));
  // Operators with a Python number: the tensor operator with the number as a CPU scalar, as on the CPU.
  using Binary = at::Tensor (*)(const at::Tensor&, const at::Scalar&);
  using InPlace = at::Tensor& (*)(at::Tensor&, const at::Scalar&);
  using WithAlpha = at::Tensor (*)(const at::Tensor&, const at::Scalar&, const at::Scalar&);
  m.impl("add.Scalar",
         TORCH_FN((&vnpu::Composite<at::_ops::add_Scalar, static_cast<WithAlpha>(&at::native::add)>::call)));
  m.impl("sub.Scalar",
         TORCH_FN((&vnpu::Composite<at::_ops::sub_Scalar, static_cast<WithAlpha>(&at::native::sub)>::call)));
  m.impl("mul.Scalar", TORCH_FN((&vnpu::Composite<at::_ops::mul_Scalar, static_cast<Binary>(&at::native::mul)>::call)));
  m.impl("div.Scalar", TORCH_FN((&vnpu::Composite<at::_ops::div_Scalar, static_cast<Binary>(&at::native::div)>::call)));
  using InPlaceWithAlpha = at::Tensor& (*)(at::Tensor&, const at::Scalar&, const at::Scalar&);
  m.impl("add_.Scalar",
         TORCH_FN((&vnpu::Composite<at::_ops::add__Scalar, static_cast<InPlaceWithAlpha>(&at::native::add_)>::call)));
  m.impl("sub_.Scalar",
         TORCH_FN((&vnpu::Composite<at::_ops::sub__Scalar, static_cast<InPlaceWithAlpha>(&at::native::sub_)>::call)));
  m.impl("div_.Scalar",
         TORCH_FN((&vnpu::Composite<at::_ops::div__Scalar, static_cast<InPlace>(&at::native::div_)>::call)));
  m.impl("nll_loss_forward", TORCH_FN(vnpu::NllLossForward::call));
  m.impl("nll_loss_backward", TORCH_FN(vnpu::NllLossBackward::call));
#define VNPU_REGISTER_LIKE(op) \
  m.impl(#op, TORCH_FN((&vnpu::Composite<at::_ops::op, &at::native::op, vnpu::StaysOnItsDevice>::call)));
  VNPU_REGISTER_LIKE(empty_like)
  VNPU_REGISTER_LIKE(zeros_like)
  VNPU_REGISTER_LIKE(ones_like)
#undef VNPU_REGISTER_LIKE
  m.impl(
      "fill_.Scalar",
      TORCH_FN((&vnpu::Composite<at::_ops::fill__Scalar, static_cast<at::Tensor& (*)(at::Tensor&, const at::Scalar&)>(
                                                             &at::native::fill_)>::call)));
}
