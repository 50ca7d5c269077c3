// The zero-copy redirect: how an aten operator runs on npu.
//
// npu memory is host memory. For each npu operator the redirect builds CPU tensors that alias the
// same bytes (no copy), calls the operator's CPU kernel on them, and maps the results back:
// outputs the kernel allocated become npu tensors over the same memory (it was taken from the npu
// pools, see DevicePoolScope), outputs that alias an input become npu views of that input,
// arguments the kernel wrote (in-place, out=, resizes, set_) are reflected on the npu tensors.
// Generator arguments are routed to npu generators, and mixing devices raises PyTorch's error.
#pragma once

#include "aten/OpFacts.h"

#include <ATen/core/Tensor.h>
#include <ATen/core/dispatch/Dispatcher.h>

#include <string>
#include <utility>
#include <vector>

namespace vnpu {

// A CPU tensor over the memory of npu tensor `npu` (same sizes, strides, offset, conj/neg bits).
at::Tensor cpu_alias(const at::Tensor& npu);
// Like cpu_alias, but the CPU tensor keeps the npu storage alive (safe to hand to other threads,
// e.g. collective backends).
at::Tensor owning_cpu_alias(const at::Tensor& npu);

// Registers the redirect as the PrivateUse1 kernel of each named aten operator ("add.Tensor").
int64_t register_redirects(const std::vector<std::string>& names);

// The kernels each aten operator has, for the redirect's selection rules (torch_npu/_op_selection.py):
// ("add.Tensor", bits), bits 0-4 for kernels of PrivateUse1, CPU, CompositeImplicitAutograd,
// CompositeExplicitAutograd and CompositeExplicitAutogradNonFunctional. One pass over the dispatcher
// instead of a Python call per operator and key.
std::vector<std::pair<std::string, int64_t>> aten_operator_kernels();

class RedirectCall;
// The argument step of a redirected call on a boxed stack (its arguments start at `base`): npu tensors
// become CPU aliases, devices are checked, device= arguments and generators are rewritten.
void map_redirect_arguments(RedirectCall& call, const OpFacts& facts, torch::jit::Stack* stack, size_t base);

// The arguments as the caller passed them, handed to the installed hooks first (empty unless observed).
std::vector<c10::IValue> observe_arguments(const c10::OperatorHandle& op, const OpFacts& facts,
                                           const torch::jit::Stack& stack, size_t base, bool observed);

// Runs one operator through the redirect on a boxed stack (arguments in, results out).
void run_redirect(const OpFacts& facts, const c10::OperatorHandle& op, torch::jit::Stack* stack);

// The boxed kernel for operators reached through the PrivateUse1 fallback.
void redirect_fallback(const c10::OperatorHandle& op, c10::DispatchKeySet ks, torch::jit::Stack* stack);

// Number of operator calls the redirect has served on the calling thread, for tests and reports.
int64_t redirect_calls();

}  // namespace vnpu
