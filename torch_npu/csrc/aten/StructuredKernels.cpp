// Operators that run on the npu tensors themselves, without CPU aliases.
//
// The redirect (Redirect.cpp, UnboxedRedirect.h) runs an operator's CPU kernel on CPU aliases of its
// npu arguments and adopts what the kernel allocated. ATen's structured operators (a meta function that
// sizes the output -- the element-wise ones by building a TensorIterator -- and an impl that calls a
// DispatchStub or BLAS) have a shorter way, the one CUDA's generated kernels take: their structured class
// is built on the npu tensors, the output comes straight from the npu pool, and the npu entry of each
// DispatchStub is the CPU's kernel (npu memory is host memory). No alias is built and no result adopted.
// Operators whose CPU code is device-generic code around other operators (relu, fill_, zero_) run it.
//
// The CPU and the npu run the same code and the same kernels: results are bit-identical. What differs
// is where that code branches on the device, so this path takes only calls where it does not:
// TensorIterator converts operands of another dtype through temporaries only on the CPU (the npu tensors
// of a call must share one dtype; a CPU scalar beside them is converted as the CPU does); the CPU's
// matmul and reductions take oneDNN or float32-buffer paths for 16-bit floats (mm and sum run here in
// float32 / float64 only) and its matmul copies operands BLAS cannot read as they are (a copy that would
// be an npu tensor counted in the pool's peaks). Every other call -- mixed dtypes or devices, CPU
// tensors, observed operators (hooks, precision emulation), a stopped device, a forked child -- and every
// call that fails takes the redirect, which runs it or raises the error with torch_npu's text.
#include "aten/DispatchStubBuild.h"
#include "aten/TensorMapping.h"
#include "aten/UnboxedRedirect.h"
#include "runtime/Device.h"

#include <ATen/EmptyTensor.h>
#include <ATen/native/Activation.h>
#include <ATen/native/BinaryOps.h>
#include <ATen/native/Fill.h>
#include <ATen/native/Lerp.h>
#include <ATen/native/PointwiseOps.h>
#include <ATen/native/ReduceOps.h>
#include <ATen/native/TensorCompare.h>
#include <ATen/native/UnaryOps.h>
#include <ATen/ops/add_native.h>
#include <ATen/ops/addcdiv_native.h>
#include <ATen/ops/addcmul_native.h>
#include <ATen/ops/clamp_min_native.h>
#include <ATen/ops/div_native.h>
#include <ATen/ops/exp_native.h>
#include <ATen/ops/fill_native.h>
#include <ATen/ops/lerp_native.h>
#include <ATen/ops/mm_native.h>
#include <ATen/ops/mul_native.h>
#include <ATen/ops/neg_native.h>
#include <ATen/ops/relu_native.h>
#include <ATen/ops/rsqrt_native.h>
#include <ATen/ops/sigmoid_native.h>
#include <ATen/ops/sqrt_native.h>
#include <ATen/ops/sub_native.h>
#include <ATen/ops/sum_native.h>
#include <ATen/ops/tanh_native.h>
#include <ATen/ops/threshold_backward_native.h>
#include <ATen/ops/zero_native.h>
#include <torch/library.h>

#include <algorithm>
#include <optional>
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

// The structured class of an operator with its output allocated from the npu pool.
template <class Structured>
struct NpuFunctional final : NpuStructured<Structured> {
  void set_output_raw_strided(int64_t i, at::IntArrayRef sizes, at::IntArrayRef strides,
                              at::TensorOptions options) override {
    const auto dtype = options.dtype().toScalarType();
    output = strides.empty()
                 ? at::detail::empty_generic(sizes, npu_allocator(), kNpuKeys, dtype, options.memory_format_opt())
                 : at::detail::empty_strided_generic(sizes, strides, npu_allocator(), kNpuKeys, dtype);
    this->record_output(i, sizes, strides, options);
  }
  const at::Tensor& maybe_get_output(int64_t /*i*/) override {
    return output;
  }
  at::Tensor output;
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

// Whether a call may run on its npu tensors: they share one device (the current one) and one dtype;
// CPU 0-dim tensors (Python numbers) may sit beside them.
class Admission {
 public:
  template <class T>
  void argument(const T& value) {
    if constexpr (std::is_same_v<std::decay_t<T>, at::Tensor>) {
      tensor(value);
    }
  }

  // After every argument: true when the call runs here.
  bool settle() const {
    return ok_ && first_ != nullptr && first_->device().index() == current_device() && !g_in_bad_fork &&
           g_stopped_devices.load(std::memory_order_relaxed) == 0;
  }

  c10::DeviceIndex device() const {
    return first_->device().index();
  }
  at::ScalarType dtype() const {
    return first_->scalar_type();
  }

 private:
  void tensor(const at::Tensor& t) {
    if (!ok_) {
      return;
    }
    if (!t.defined() || C10_UNLIKELY(t._is_zerotensor())) {
      ok_ = false;
    } else if (t.device().type() == kNpu) {
      check_in_bounds(t);  // the redirect's check and error: a storage resized or freed under the tensor
      if (first_ == nullptr) {
        first_ = &t;
      } else if (t.device() != first_->device() || t.scalar_type() != first_->scalar_type()) {
        ok_ = false;
      }
    } else if (!(t.dim() == 0 && t.device().is_cpu() && t.layout() == c10::kStrided)) {
      ok_ = false;
    }
  }

  bool ok_ = true;
  const at::Tensor* first_ = nullptr;
};

bool runs_on_npu_tensors(const OpFacts& facts) {
  return !slow_path_active() && !facts.cpu_fallback;
}

// The calls an operator takes this path with, beyond the admission: any dtype, or only float32 / float64
// where the CPU's implementation branches on the device for the others (oneDNN bf16 / fp16 matmuls read
// CPU tensors only; CPU reductions of bf16 / fp16 accumulate in a float32 buffer).
struct AnyDtype {
  template <class... Args>
  static bool admits(at::ScalarType /*dtype*/, const Args&... /*args*/) {
    return true;
  }
};
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
struct FullPrecisionMatmul {
  static bool admits(at::ScalarType dtype, const at::Tensor& self, const at::Tensor& mat2) {
    return FullPrecisionFloat::admits(dtype) && self.dim() == 2 && mat2.dim() == 2 && blas_reads_as_is(self) &&
           blas_reads_as_is(mat2);
  }
};

// True when the call runs on its npu tensors: nothing observes the operator, the admission takes its
// arguments and the operator's own rule (`Admits`) its dtype and operands.
template <class Op, class Admits, class... Args>
bool admitted(Admission& admission, const Args&... args) {
  if (!runs_on_npu_tensors(Unboxed<Op>::facts())) {
    return false;
  }
  (admission.argument(args), ...);
  return admission.settle() && Admits::admits(admission.dtype(), args...);
}

template <class Op, class Structured, class Admits = AnyDtype, class Sig = typename Op::schema>
struct Direct;

template <class Op, class Structured, class Admits, class... Args>
struct Direct<Op, Structured, Admits, at::Tensor(Args...)> {
  static at::Tensor call(Args... args) {
    Admission admission;
    if (admitted<Op, Admits>(admission, args...)) {
      try {
        NpuFunctional<Structured> op;
        op.meta(args...);
        if (op.settle_operands(admission.dtype())) {
          DevicePoolScope scope(admission.device());  // scratch from the npu pool; the device is busy
          op.impl(args..., op.output);
          return std::move(op.output);
        }
      } catch (const c10::OutOfMemoryError&) {
        throw;
      } catch (const c10::Error&) {
        // The redirect below raises it with torch_npu's text.
      }
    }
    return Unboxed<Op>::call(args...);
  }
};

template <class Op, class Structured, class Admits, class... Args>
struct Direct<Op, Structured, Admits, at::Tensor&(at::Tensor&, Args...)> {
  static at::Tensor& call(at::Tensor& self, Args... args) {
    Admission admission;
    if (admitted<Op, Admits>(admission, self, args...)) {
      try {
        NpuInPlace<Structured> op(self);
        op.meta(self, args...);
        if (op.settle_operands(admission.dtype())) {
          DevicePoolScope scope(admission.device());  // scratch from the npu pool; the device is busy
          op.impl(self, args..., self);
          return self;
        }
      } catch (const c10::OutOfMemoryError&) {
        throw;
      } catch (const c10::Error&) {
        // The redirect below raises it with torch_npu's text.
      }
    }
    return Unboxed<Op>::call(self, args...);
  }
};

// An operator whose CPU implementation is device-generic code around other operators or DispatchStubs
// (relu is clamp_min, zero_ is fill_, fill_ a TensorIterator): it runs as on the CPU, its callees take their
// own npu path. Observed, it takes the redirect and is seen as itself.
template <class Op, auto Implementation, class Sig = typename Op::schema>
struct Composite;
template <class Op, auto Implementation, class Ret, class... Args>
struct Composite<Op, Implementation, Ret(Args...)> {
  static Ret call(Args... args) {
    Admission admission;
    if (admitted<Op, AnyDtype>(admission, args...)) {
      return Implementation(args...);
    }
    return Unboxed<Op>::call(args...);
  }
};

}  // namespace
}  // namespace vnpu

// The element-wise operators of the training steps the benchmarks measure (bench/bench_overhead.py):
// (operator, its aten::_ops struct, the structured CPU class).
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
  _("exp", exp, structured_exp_out)                                              \
  _("sqrt", sqrt, structured_sqrt_out)                                           \
  _("rsqrt", rsqrt, structured_rsqrt_out)                                        \
  _("sigmoid", sigmoid, structured_sigmoid_out)                                  \
  _("tanh", tanh, structured_tanh_out)                                           \
  _("lerp_.Scalar", lerp__Scalar, structured_lerp_Scalar)                        \
  _("addcmul_", addcmul_, structured_addcmul_out)                                \
  _("addcdiv_", addcdiv_, structured_addcdiv_out)                                \
  _("threshold_backward", threshold_backward, structured_threshold_backward_out) \
  _("clamp_min", clamp_min, structured_clamp_min_out)                            \
  _("clamp_min_", clamp_min_, structured_clamp_min_out)
// Matmuls and reductions of those steps, in float32 and float64.
#define VNPU_FULL_PRECISION_OPS(_)                                              \
  _("sum.dim_IntList", sum_dim_IntList, structured_sum_out, FullPrecisionFloat) \
  _("mm", mm, structured_mm_out_cpu, FullPrecisionMatmul)

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
  _(fill_stub)
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
  m.impl("relu", TORCH_FN((&vnpu::Composite<at::_ops::relu, &at::native::relu>::call)));
  m.impl("relu_", TORCH_FN((&vnpu::Composite<at::_ops::relu_, &at::native::relu_>::call)));
  m.impl("zero_", TORCH_FN((&vnpu::Composite<at::_ops::zero_, &at::native::zero_>::call)));
  m.impl(
      "fill_.Scalar",
      TORCH_FN((&vnpu::Composite<at::_ops::fill__Scalar, static_cast<at::Tensor& (*)(at::Tensor&, const at::Scalar&)>(
                                                             &at::native::fill_)>::call)));
}
