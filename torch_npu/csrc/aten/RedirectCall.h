// The arguments of one redirected operator call: npu tensors become CPU aliases, devices are
// checked and chosen, device= arguments and generators are rewritten for the CPU kernel.
// Shared by the boxed redirect (any operator) and the unboxed one (the hottest operators).
#pragma once

#include "aten/OpFacts.h"
#include "aten/TensorMapping.h"

#include <ATen/core/Generator.h>

#include <optional>

namespace vnpu {

class RedirectCall {
 public:
  explicit RedirectCall(const OpFacts& facts);
  static int64_t calls_on_this_thread();

  // An npu tensor becomes a CPU alias; other tensors pass (a non-scalar CPU tensor next to npu
  // tensors is an error unless the operator mixes devices).
  at::Tensor tensor(const at::Tensor& t, int arg);
  // A device= argument: npu devices choose where results go (the kernel gets "cpu"), "cpu"
  // keeps results on the CPU.
  c10::Device device(c10::Device d);
  void layout(c10::Layout layout) const;
  // After the arguments: pick the device and raise device-mismatch errors.
  void settle();
  // After the kernel: what it did to written arguments (in-place, out=, resizes, set_) reaches the npu tensors.
  void reflect_writes();
  // Random operators draw from the npu generator of their device (the default one for None).
  std::optional<at::Generator> generator(const std::optional<at::Generator>& g) const;

  [[noreturn]] void unsupported_layout(c10::Layout layout) const;
  // A CPU kernel's dtype error ('"addmm_impl_cpu_" not implemented for 'Bool'') in the npu operator's
  // words ('"addmm_npu" not implemented for 'Bool''), as CUDA's kernels name themselves "..._cuda".
  [[noreturn]] void rethrow_for_npu(const c10::NotImplementedError& error) const;
  // Argument checks that torch_npu's kernels raise with its ERR01001 suffix get it here too; any
  // other error is rethrown unchanged. Call it only from a catch block.
  [[noreturn]] void rethrow_for_npu(const c10::Error& error) const;

  CallMapping map;

 private:
  bool on_npu() const {
    return npu_arg_ >= 0 || map.explicit_device;
  }

  const OpFacts& facts_;
  int npu_arg_ = -1;
  int stray_cpu_arg_ = -1;
  bool cpu_self_ = false;  // an indexing operator's self is a CPU tensor
  c10::Device stray_cpu_device_ = c10::Device(c10::kCPU);
};

}  // namespace vnpu
