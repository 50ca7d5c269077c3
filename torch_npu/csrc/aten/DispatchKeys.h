// The dispatch-key sets the redirect and the native kernels dispatch to.
#pragma once

#include <c10/core/DispatchKeySet.h>

namespace vnpu {

// CPU kernels (what the redirect runs on CPU aliases).
inline constexpr c10::DispatchKeySet kCpuKeys(c10::DispatchKey::CPU);
// npu tensors' backend key.
inline constexpr c10::DispatchKeySet kNpuKeys(c10::DispatchKey::PrivateUse1);

}  // namespace vnpu
