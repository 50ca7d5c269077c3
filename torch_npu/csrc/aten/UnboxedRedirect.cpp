// The redirect for the hottest operators, without boxing.
//
// The boxed redirect (Redirect.cpp) serves every operator through one kernel: the dispatcher packs
// the arguments into a stack, the CPU kernel unpacks them again. For small tensors that packing
// is a large share of an operator's cost, so the operators that dominate training and inference
// steps get a typed kernel generated from ATen's operator structs (at::_ops::*): same rules, same
// RedirectCall, but arguments stay C++ values and the CPU kernel is called through its typed
// redispatch. Boxing also copies each tensor argument onto the stack, and the first copy of a tensor
// only its Python object holds takes the GIL (PyObject preservation), once on the way in and once out.
//
// What the redirect costs, in instructions per `a + 1` on a 10-element float tensor (callgrind, with
// the Python call: the CPU operator is 21.0k, the npu one 23.9k):
//   ~0.85k  the CPU alias of the npu argument: a recycled TensorImpl and StorageImpl (TensorMapping.cpp)
//           re-pointed at the npu bytes, the argument's geometry, the bounds check, kept again after;
//   ~1.0k   the kernel's allocation from the npu caching allocator (its statistics, split blocks and
//           profiler events) instead of malloc, net of the malloc it replaces;
//   ~0.3k   adopting the kernel's result: its TensorImpl and pool block become the npu tensor's;
//   ~0.3k   thread-local state (calls, spare aliases, the device's pool scope): each access from a
//           shared library is a function call;
//   ~0.45k  the call itself: device checks, the device's pool scope and busy flag, argument tuple.
#include "aten/DispatchKeys.h"
#include "aten/HostSync.h"
#include "aten/OpFacts.h"
#include "aten/OpHooks.h"
#include "aten/Redirect.h"
#include "aten/RedirectCall.h"
#include "runtime/CachingAllocator.h"

#include <ATen/Operators.h>
#include <ATen/core/boxing/impl/boxing.h>
#include <ATen/ops/empty.h>
#include <ATen/ops/empty_strided.h>
#include <c10/util/SmallVector.h>
#include <torch/library.h>

#include <optional>
#include <tuple>
#include <type_traits>
#include <utility>

namespace vnpu {
namespace {

// Arguments written by the kernel (in-place self, out=), to return the caller's own tensor.
using WrittenRefs = c10::SmallVector<std::pair<c10::TensorImpl*, at::Tensor*>, 2>;

// Types that carry tensors: each needs its own mapping below (a tensor passed through unchanged would
// hand npu memory to a CPU kernel as an npu tensor).
template <class T>
inline constexpr bool kCarriesTensors =
    std::is_same_v<std::decay_t<T>, at::Tensor> || std::is_same_v<std::decay_t<T>, at::TensorList> ||
    std::is_same_v<std::decay_t<T>, at::ITensorListRef> || std::is_same_v<std::decay_t<T>, std::optional<at::Tensor>> ||
    std::is_same_v<std::decay_t<T>, c10::List<std::optional<at::Tensor>>> ||
    std::is_same_v<std::decay_t<T>, at::OptionalTensorRef>;

// What an argument of C++ type T becomes for the CPU kernel.
template <class T>
struct CpuArg {
  static_assert(!kCarriesTensors<T>, "an unboxed npu operator takes a tensor argument type with no CPU mapping");
  using type = T;
  static T convert(RedirectCall&, WrittenRefs&, T value, int) {
    return std::forward<T>(value);
  }
};
template <>
struct CpuArg<const at::Tensor&> {
  using type = at::Tensor;
  static at::Tensor convert(RedirectCall& call, WrittenRefs&, const at::Tensor& t, int i) {
    return call.tensor(t, i);
  }
};
template <>
struct CpuArg<at::Tensor&> {
  using type = at::Tensor;
  static at::Tensor convert(RedirectCall& call, WrittenRefs& written, at::Tensor& t, int i) {
    at::Tensor cpu = call.tensor(t, i);
    written.emplace_back(cpu.unsafeGetTensorImpl(), &t);
    return cpu;
  }
};
// A tensor list (the _foreach_ operators): each npu tensor becomes an alias; in-place lists write
// through them into npu memory.
template <>
struct CpuArg<at::TensorList> {
  using type = c10::SmallVector<at::Tensor, 8>;
  static type convert(RedirectCall& call, WrittenRefs&, at::TensorList list, int i) {
    type out;
    out.reserve(list.size());
    for (const at::Tensor& t : list) {
      out.push_back(call.tensor(t, i));
    }
    return out;
  }
};
template <>
struct CpuArg<const std::optional<at::Tensor>&> {
  using type = std::optional<at::Tensor>;
  static std::optional<at::Tensor> convert(RedirectCall& call, WrittenRefs&, const std::optional<at::Tensor>& t,
                                           int i) {
    return t.has_value() ? std::optional<at::Tensor>(call.tensor(*t, i)) : std::nullopt;
  }
};
template <>
struct CpuArg<std::optional<c10::Device>> {
  using type = std::optional<c10::Device>;
  static std::optional<c10::Device> convert(RedirectCall& call, WrittenRefs&, std::optional<c10::Device> d, int) {
    return d.has_value() ? std::optional<c10::Device>(call.device(*d)) : d;
  }
};
template <>
struct CpuArg<std::optional<c10::Layout>> {
  using type = std::optional<c10::Layout>;
  static std::optional<c10::Layout> convert(RedirectCall& call, WrittenRefs&, std::optional<c10::Layout> l, int) {
    if (l.has_value()) {
      call.layout(*l);
    }
    return l;
  }
};

template <class T>
void route_generator(const RedirectCall&, T&) {}
[[maybe_unused]] void route_generator(const RedirectCall& call, std::optional<at::Generator>& g) {
  g = call.generator(g);
}

// Maps a kernel result back to npu.
template <class Ret>
struct Result {
  static Ret map(RedirectCall&, const WrittenRefs&, Ret&& r) {
    return std::forward<Ret>(r);
  }
};
template <>
struct Result<at::Tensor> {
  static at::Tensor map(RedirectCall& call, const WrittenRefs&, at::Tensor&& r) {
    return call.map.to_npu(r);
  }
};
template <>
struct Result<std::vector<at::Tensor>> {
  static std::vector<at::Tensor> map(RedirectCall& call, const WrittenRefs&, std::vector<at::Tensor>&& r) {
    for (at::Tensor& t : r) {
      t = call.map.to_npu(t);
    }
    return std::move(r);
  }
};
template <>
struct Result<at::Tensor&> {
  static at::Tensor& map(RedirectCall&, const WrittenRefs& written, at::Tensor& r) {
    for (const auto& [cpu, original] : written) {
      if (cpu == r.unsafeGetTensorImpl()) {
        return *original;
      }
    }
    TORCH_INTERNAL_ASSERT(false, "an in-place npu operator returned a tensor that is not one of its arguments");
  }
};
template <class... Ts>
struct Result<std::tuple<Ts...>> {
  static std::tuple<Ts...> map(RedirectCall& call, const WrittenRefs& written, std::tuple<Ts...>&& r) {
    return std::apply(
        [&](auto&&... xs) {
          return std::tuple<Ts...>(Result<Ts>::map(call, written, std::forward<decltype(xs)>(xs))...);
        },
        std::move(r));
  }
};

template <class Op, class Sig = typename Op::schema>
struct Unboxed;

template <class Op, class Ret, class... Args>
struct Unboxed<Op, Ret(Args...)> {
  static const OpFacts& facts() {
    static const OpFacts f =
        make_op_facts(c10::Dispatcher::singleton().findSchemaOrThrow(Op::name, Op::overload_name).schema());
    return f;
  }

  static Ret call(Args... args) {
    // Observed operators and (with an operator-support profile) CPU-fallback ones take the boxed path.
    if (C10_UNLIKELY(slow_path_active() || facts().cpu_fallback)) {
      return call_boxed(std::forward<Args>(args)...);
    }
    return call_indexed(std::index_sequence_for<Args...>{}, std::forward<Args>(args)...);
  }

  // With hooks or precision emulation active, the boxed redirect (which implements them) runs.
  static Ret call_boxed(Args... args) {
    static const c10::OperatorHandle handle =
        c10::Dispatcher::singleton().findSchemaOrThrow(Op::name, Op::overload_name);
    torch::jit::Stack stack;
    stack.reserve(sizeof...(Args));
    torch::jit::push(stack, args...);
    run_redirect(facts(), handle, &stack);
    if constexpr (std::is_void_v<Ret>) {
      return;
    } else if constexpr (std::is_same_v<Ret, at::Tensor&>) {
      // In-place and out= results are one of the arguments: return the caller's own tensor.
      c10::TensorImpl* result = stack.back().toTensor().unsafeGetTensorImpl();
      at::Tensor* found = nullptr;
      auto match = [&](auto& arg) {
        if constexpr (std::is_same_v<std::decay_t<decltype(arg)>, at::Tensor>) {
          if (found == nullptr && arg.unsafeGetTensorImpl() == result) {
            found = const_cast<at::Tensor*>(&arg);
          }
        }
      };
      (match(args), ...);
      TORCH_INTERNAL_ASSERT(found != nullptr, "an in-place npu operator returned a tensor that is not an argument");
      return *found;
    } else {
      return c10::impl::PopResult<Ret>::call(stack);
    }
  }

  template <size_t... I>
  static Ret call_indexed(std::index_sequence<I...>, Args... args) {
    const OpFacts& f = facts();
    RedirectCall call(f);
    call.map.borrow_inputs = true;  // the arguments are the caller's, alive until this returns
    WrittenRefs written;
    // Braced initialisation converts the arguments left to right, as the boxed redirect does.
    std::tuple<typename CpuArg<Args>::type...> cpu{
        CpuArg<Args>::convert(call, written, std::forward<Args>(args), static_cast<int>(I))...};
    call.settle();
    std::apply([&](auto&... xs) { (route_generator(call, xs), ...); }, cpu);
    if constexpr (std::is_void_v<Ret>) {
      run(call, cpu);
      call.reflect_writes();
    } else {
      Ret r = run(call, cpu);
      call.reflect_writes();
      return Result<Ret>::map(call, written, std::forward<Ret>(r));
    }
  }

  template <class Tuple>
  static Ret run(RedirectCall& call, Tuple& cpu) {
    auto invoke = [&](auto&... xs) -> Ret { return Op::redispatch(kCpuKeys, xs...); };
    try {
      if (call.map.keep_cpu) {
        return std::apply(invoke, cpu);
      }
      DevicePoolScope scope(call.map.device);
      return std::apply(invoke, cpu);
    } catch (const c10::NotImplementedError& error) {
      call.rethrow_for_npu(error);
    } catch (const c10::Error& error) {
      call.rethrow_for_npu(error);
    }
  }
};

}  // namespace
}  // namespace vnpu

// The operators that dominate training and inference steps, measured by counting the operators an
// MLP/Adam, ConvNet/SGD, transformer/AdamW, AMP bf16 and Llama-style train + decode step reach the
// npu kernel with (the rest take the boxed redirect; tensor-list operators always do).
#define VNPU_UNBOXED_OPS(_)                                                                                       \
  /* element-wise arithmetic, comparisons, selection */                                                           \
  _(add_Tensor, "add.Tensor")                                                                                     \
  _(add__Tensor, "add_.Tensor")                                                                                   \
  _(add_Scalar, "add.Scalar")                                                                                     \
  _(sub_Tensor, "sub.Tensor")                                                                                     \
  _(sub__Tensor, "sub_.Tensor")                                                                                   \
  _(sub_Scalar, "sub.Scalar")                                                                                     \
  _(rsub_Scalar, "rsub.Scalar")                                                                                   \
  _(mul_Tensor, "mul.Tensor")                                                                                     \
  _(mul__Tensor, "mul_.Tensor")                                                                                   \
  _(mul_Scalar, "mul.Scalar")                                                                                     \
  _(mul__Scalar, "mul_.Scalar")                                                                                   \
  _(div_Tensor, "div.Tensor")                                                                                     \
  _(div__Tensor, "div_.Tensor")                                                                                   \
  _(div_Scalar, "div.Scalar")                                                                                     \
  _(div__Scalar, "div_.Scalar")                                                                                   \
  _(maximum, "maximum")                                                                                           \
  _(minimum, "minimum")                                                                                           \
  _(neg, "neg")                                                                                                   \
  _(reciprocal, "reciprocal")                                                                                     \
  _(exp, "exp")                                                                                                   \
  _(exp_, "exp_")                                                                                                 \
  _(log, "log")                                                                                                   \
  _(sqrt, "sqrt")                                                                                                 \
  _(rsqrt, "rsqrt")                                                                                               \
  _(abs, "abs")                                                                                                   \
  _(cos, "cos")                                                                                                   \
  _(sin, "sin")                                                                                                   \
  _(pow_Tensor_Scalar, "pow.Tensor_Scalar")                                                                       \
  _(pow_Scalar, "pow.Scalar")                                                                                     \
  _(eq_Scalar, "eq.Scalar")                                                                                       \
  _(eq_Tensor, "eq.Tensor")                                                                                       \
  _(ne_Scalar, "ne.Scalar")                                                                                       \
  _(gt_Scalar, "gt.Scalar")                                                                                       \
  _(lt_Scalar, "lt.Scalar")                                                                                       \
  _(where_self, "where.self")                                                                                     \
  _(masked_fill_Scalar, "masked_fill.Scalar")                                                                     \
  _(masked_fill__Scalar, "masked_fill_.Scalar")                                                                   \
  _(clamp, "clamp")                                                                                               \
  _(lerp__Scalar, "lerp_.Scalar")                                                                                 \
  _(addcmul_, "addcmul_")                                                                                         \
  _(addcdiv_, "addcdiv_")                                                                                         \
  _(triu, "triu")                                                                                                 \
  _(tril, "tril")                                                                                                 \
  /* activations and their backwards */                                                                           \
  _(sigmoid, "sigmoid")                                                                                           \
  _(tanh, "tanh")                                                                                                 \
  _(relu, "relu")                                                                                                 \
  _(relu_, "relu_")                                                                                               \
  _(gelu, "gelu")                                                                                                 \
  _(silu, "silu")                                                                                                 \
  _(threshold_backward, "threshold_backward")                                                                     \
  _(gelu_backward, "gelu_backward")                                                                               \
  _(silu_backward, "silu_backward")                                                                               \
  _(sigmoid_backward, "sigmoid_backward")                                                                         \
  _(tanh_backward, "tanh_backward")                                                                               \
  /* reductions, softmax, losses */                                                                               \
  _(sum, "sum")                                                                                                   \
  _(sum_dim_IntList, "sum.dim_IntList")                                                                           \
  _(mean, "mean")                                                                                                 \
  _(mean_dim, "mean.dim")                                                                                         \
  _(argmax, "argmax")                                                                                             \
  _(topk, "topk")                                                                                                 \
  _(_softmax, "_softmax")                                                                                         \
  _(_log_softmax, "_log_softmax")                                                                                 \
  _(_softmax_backward_data, "_softmax_backward_data")                                                             \
  _(_log_softmax_backward_data, "_log_softmax_backward_data")                                                     \
  _(nll_loss_forward, "nll_loss_forward")                                                                         \
  _(nll_loss_backward, "nll_loss_backward")                                                                       \
  /* matmuls, convolutions, normalisation, pooling, attention */                                                  \
  _(mm, "mm")                                                                                                     \
  _(addmm, "addmm")                                                                                               \
  _(bmm, "bmm")                                                                                                   \
  _(convolution, "convolution")                                                                                   \
  _(convolution_backward, "convolution_backward")                                                                 \
  _(native_layer_norm, "native_layer_norm")                                                                       \
  _(native_layer_norm_backward, "native_layer_norm_backward")                                                     \
  _(native_batch_norm, "native_batch_norm")                                                                       \
  _(native_batch_norm_backward, "native_batch_norm_backward")                                                     \
  _(max_pool2d_with_indices, "max_pool2d_with_indices")                                                           \
  _(max_pool2d_with_indices_backward, "max_pool2d_with_indices_backward")                                         \
  _(_scaled_dot_product_flash_attention_for_cpu, "_scaled_dot_product_flash_attention_for_cpu")                   \
  _(_scaled_dot_product_flash_attention_for_cpu_backward, "_scaled_dot_product_flash_attention_for_cpu_backward") \
  /* indexing, embedding, reshapes that copy */                                                                   \
  _(embedding, "embedding")                                                                                       \
  _(embedding_dense_backward, "embedding_dense_backward")                                                         \
  _(index_select, "index_select")                                                                                 \
  _(gather, "gather")                                                                                             \
  _(slice_backward, "slice_backward")                                                                             \
  _(_unsafe_view, "_unsafe_view")                                                                                 \
  /* creation, filling, copies, host reads */                                                                     \
  _(full, "full")                                                                                                 \
  _(arange_start_step, "arange.start_step")                                                                       \
  _(ones_like, "ones_like")                                                                                       \
  _(zeros_like, "zeros_like")                                                                                     \
  _(fill__Scalar, "fill_.Scalar")                                                                                 \
  _(zero_, "zero_")                                                                                               \
  /* optimizer steps (Adam, AdamW, SGD with momentum), gradient clipping and zero_grad on lists */                \
  _(_foreach_add__Scalar, "_foreach_add_.Scalar")                                                                 \
  _(_foreach_add__List, "_foreach_add_.List")                                                                     \
  _(_foreach_add__Tensor, "_foreach_add_.Tensor")                                                                 \
  _(_foreach_mul__Scalar, "_foreach_mul_.Scalar")                                                                 \
  _(_foreach_mul__Tensor, "_foreach_mul_.Tensor")                                                                 \
  _(_foreach_div__ScalarList, "_foreach_div_.ScalarList")                                                         \
  _(_foreach_lerp__Scalar, "_foreach_lerp_.Scalar")                                                               \
  _(_foreach_addcmul__Scalar, "_foreach_addcmul_.Scalar")                                                         \
  _(_foreach_addcdiv__ScalarList, "_foreach_addcdiv_.ScalarList")                                                 \
  _(_foreach_sqrt, "_foreach_sqrt")                                                                               \
  _(_foreach_norm_Scalar, "_foreach_norm.Scalar")                                                                 \
  _(_foreach_zero_, "_foreach_zero_")

namespace vnpu {
namespace {

// Conversions follow torch_npu's _to_copy: a dtype-only conversion of an npu tensor to float64 gives
// float32 (the card has no double kernels; torch_npu warns once), and a non-blocking copy to the host
// lands in pinned memory, as a device-to-host DMA does.
at::Tensor to_copy(const at::Tensor& self, std::optional<at::ScalarType> dtype, std::optional<at::Layout> layout,
                   std::optional<at::Device> device, std::optional<bool> pin_memory, bool non_blocking,
                   std::optional<at::MemoryFormat> memory_format) {
  const bool from_npu = self.device().type() == c10::DeviceType::PrivateUse1;
  if (from_npu && !device.has_value() && dtype == at::ScalarType::Double && self.scalar_type() != at::kDouble) {
    TORCH_WARN_ONCE("Device do not support double dtype now, dtype cast replace with float.");
    dtype = at::ScalarType::Float;
  }
  at::Tensor result =
      Unboxed<at::_ops::_to_copy>::call(self, dtype, layout, device, pin_memory, non_blocking, memory_format);
  if (!non_blocking && device.has_value() && device->type() != self.device().type()) {
    host_waits_for_stream(from_npu ? self.device().index() : result.device().index());
  }
  if (from_npu && non_blocking && result.device().is_cpu() && result.layout() == c10::kStrided && !result.is_pinned()) {
    at::Tensor pinned = at::empty_strided(result.sizes(), result.strides(), result.options().pinned_memory(true));
    pinned.copy_(result);
    return pinned;
  }
  return result;
}

// A blocking copy between host and npu memory and reading a scalar back make the host wait for the stream,
// as torch_npu does after the DMA (aten/HostSync.h); one comparison when a copy stays on one side.
at::Tensor& copy_(at::Tensor& self, const at::Tensor& src, bool non_blocking) {
  at::Tensor& result = Unboxed<at::_ops::copy_>::call(self, src, non_blocking);
  if (!non_blocking && self.device().type() != src.device().type()) {
    host_waits_for_stream(self.device().type() == c10::DeviceType::PrivateUse1 ? self.device().index()
                                                                               : src.device().index());
  }
  return result;
}

at::Scalar local_scalar_dense(const at::Tensor& self) {
  at::Scalar value = Unboxed<at::_ops::_local_scalar_dense>::call(self);
  host_waits_for_stream(self.device().index());
  return value;
}

// torch_npu's clone allocates its result in the source's format, so a copy of a whole NZ or NC1HWC0
// tensor (Parameter deepcopy, contiguous()) keeps the format and its padded storage size.
at::Tensor clone(const at::Tensor& self, std::optional<at::MemoryFormat> memory_format) {
  if (self.has_storage() && !self.is_view() && self.storage_offset() == 0 && self.is_contiguous() &&
      memory_format.value_or(c10::MemoryFormat::Preserve) != c10::MemoryFormat::ChannelsLast &&
      memory_format.value_or(c10::MemoryFormat::Preserve) != c10::MemoryFormat::ChannelsLast3d) {
    const auto [format, storage_numel] = storage_format(self.storage().data_ptr());
    if (format >= 0 && static_cast<size_t>(storage_numel) * self.itemsize() == self.storage().nbytes()) {
      at::Tensor storage_owner = at::empty({storage_numel}, self.options());
      at::Tensor result = at::empty({0}, self.options());
      result.set_(storage_owner.storage(), 0, self.sizes(), self.strides());
      result.copy_(self);
      set_storage_format(result.storage().data_ptr(), format, storage_numel);
      return result;
    }
  }
  return Unboxed<at::_ops::clone>::call(self, memory_format);
}

}  // namespace
}  // namespace vnpu

TORCH_LIBRARY_IMPL(aten, PrivateUse1, m) {
#define VNPU_REGISTER_UNBOXED(op, name) m.impl(name, TORCH_FN((&vnpu::Unboxed<at::_ops::op>::call)));
  VNPU_UNBOXED_OPS(VNPU_REGISTER_UNBOXED)
#undef VNPU_REGISTER_UNBOXED
  m.impl("_to_copy", TORCH_FN(vnpu::to_copy));
  m.impl("clone", TORCH_FN(vnpu::clone));
  m.impl("copy_", TORCH_FN(vnpu::copy_));
  m.impl("_local_scalar_dense", TORCH_FN(vnpu::local_scalar_dense));
}
