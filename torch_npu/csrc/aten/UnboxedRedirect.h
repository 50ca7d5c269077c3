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
#pragma once

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

#include <optional>
#include <tuple>
#include <type_traits>
#include <utility>

namespace vnpu {
namespace unboxed {

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
// A tensor list reference (cat): the aliases, kept in a vector the CPU kernel reads the list from.
struct CpuTensorList {
  c10::SmallVector<at::Tensor, 8> tensors;
  operator at::ITensorListRef() const {  // NOLINT(google-explicit-constructor): passed as the kernel's argument
    return at::ITensorListRef(at::ArrayRef<at::Tensor>(tensors));
  }
};
template <>
struct CpuArg<const at::ITensorListRef&> {
  using type = CpuTensorList;
  static type convert(RedirectCall& call, WrittenRefs&, const at::ITensorListRef& list, int i) {
    type out;
    for (const at::Tensor& t : list) {
      out.tensors.push_back(call.tensor(t, i));
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
inline void route_generator(const RedirectCall& call, std::optional<at::Generator>& g) {
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

}  // namespace unboxed

using unboxed::Unboxed;

}  // namespace vnpu
