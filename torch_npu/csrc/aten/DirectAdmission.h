// Which calls of an operator may run on their npu tensors themselves, without the redirect's CPU aliases
// (StructuredKernels.cpp, DirectCopy.cpp, UnboxedRedirect.cpp), and the kernel of operators whose CPU code is
// device-generic. The rest take the redirect, which runs them or raises the error with torch_npu's text.
#pragma once

#include "aten/OpFacts.h"
#include "aten/OpHooks.h"
#include "aten/TensorMapping.h"
#include "aten/UnboxedRedirect.h"
#include "runtime/Device.h"

#include <ATen/core/Tensor.h>

#include <optional>
#include <type_traits>

namespace vnpu {

// Whether a call may run on its npu tensors: they share one device (the current one) and one dtype;
// CPU 0-dim tensors (Python numbers) may sit beside them.
class Admission {
 public:
  template <class T>
  void argument(const T& value) {
    if constexpr (std::is_same_v<std::decay_t<T>, at::Tensor>) {
      tensor(value);
    } else if constexpr (std::is_same_v<std::decay_t<T>, at::TensorList> ||
                         std::is_same_v<std::decay_t<T>, at::ITensorListRef>) {
      for (const at::Tensor& t : value) {
        tensor(t);
      }
    } else if constexpr (std::is_same_v<std::decay_t<T>, std::optional<at::Tensor>>) {
      if (value.has_value() && value->defined()) {
        tensor(*value);
      }
    }
  }

  // After every argument: true when the call runs here.
  bool settle() const {
    return ok_ && seen_npu_ && device_ == current_device() && !g_in_bad_fork &&
           g_stopped_devices.load(std::memory_order_relaxed) == 0;
  }

  c10::DeviceIndex device() const {
    return device_;
  }
  at::ScalarType dtype() const {
    return dtype_;
  }

 private:
  void tensor(const at::Tensor& t) {
    if (!ok_) {
      return;
    }
    if (!t.defined() || C10_UNLIKELY(t._is_zerotensor())) {
      ok_ = false;
      return;
    }
    const c10::Device device = t.device();
    if (device.type() == kNpu) {
      check_in_bounds(t);  // the redirect's check and error: a storage resized or freed under the tensor
      const at::ScalarType dtype = t.scalar_type();
      if (!seen_npu_) {
        seen_npu_ = true;
        device_ = device.index();
        dtype_ = dtype;
      } else if (device.index() != device_ || dtype != dtype_) {
        ok_ = false;
      }
    } else if (!(t.dim() == 0 && device.is_cpu() && t.layout() == c10::kStrided)) {
      ok_ = false;
    }
  }

  bool ok_ = true;
  bool seen_npu_ = false;  // the first npu tensor's device and dtype are the call's
  c10::DeviceIndex device_ = -1;
  at::ScalarType dtype_ = at::ScalarType::Undefined;
};

// Nothing observes the operator (hooks, precision emulation, dumps) and it is not a CPU fallback.
inline bool runs_on_npu_tensors(const OpFacts& facts) {
  return !slow_path_active() && !facts.cpu_fallback;
}

// The calls an operator takes this path with, beyond the admission.
struct AnyDtype {
  template <class... Args>
  static bool admits(at::ScalarType /*dtype*/, const Args&... /*args*/) {
    return true;
  }
};

// Operators that make a new tensor from one (ones_like, _to_copy), when the result stays on the argument's
// device as a strided tensor in pageable memory; a result for another device or layout takes the redirect.
struct StaysOnItsDevice {
  template <class... Rest>
  static bool admits(at::ScalarType /*dtype*/, const at::Tensor& self, std::optional<at::ScalarType> /*dtype*/,
                     std::optional<at::Layout> layout, std::optional<at::Device> device, std::optional<bool> pin_memory,
                     const Rest&... /*rest*/) {
    return self.layout() == c10::kStrided && (!layout.has_value() || *layout == c10::kStrided) &&
           (!device.has_value() || *device == self.device()) && !pin_memory.value_or(false);
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

// An operator whose CPU implementation is device-generic code around other operators or DispatchStubs
// (relu is clamp_min, zero_ is fill_, fill_ a TensorIterator, _to_copy and clone an empty tensor and copy_): it
// runs as on the CPU, its callees take their own npu path. Observed, it takes the redirect and is seen as itself.
// An error of kind `Retried` is raised again by the redirect with torch_npu's text (operators whose CPU checks all
// come before any write); other errors propagate as the CPU raised them.
template <class Op, auto Implementation, class Admits = AnyDtype, class Retried = c10::Error,
          class Sig = typename Op::schema>
struct Composite;
template <class Op, auto Implementation, class Admits, class Retried, class Ret, class... Args>
struct Composite<Op, Implementation, Admits, Retried, Ret(Args...)> {
  static Ret call(Args... args) {
    Admission admission;
    if (admitted<Op, Admits>(admission, args...)) {
      try {
        return Implementation(args...);
      } catch (const c10::OutOfMemoryError&) {
        throw;
      } catch (const Retried&) {
      }
    }
    return Unboxed<Op>::call(args...);
  }
};

}  // namespace vnpu
