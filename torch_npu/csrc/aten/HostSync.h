// Operators that make the host wait for the device (reading device memory on the host):
// refused during graph capture, reported by torch.npu.set_sync_debug_mode.
#pragma once

#include "aten/OpHooks.h"

#include <string>
#include <vector>

namespace vnpu {

// Why the operator synchronises, or empty when it does not.
std::string host_sync_reason(const c10::OperatorHandle& op, const std::vector<c10::IValue>& inputs);

// torch.npu.set_sync_debug_mode: 0 default (silent), 1 warn, 2 error.
void set_sync_debug_mode(int mode);
int sync_debug_mode();

}  // namespace vnpu
