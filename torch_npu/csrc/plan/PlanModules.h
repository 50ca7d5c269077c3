// Which nn.Module is running, for planning mode's memory labels. Forward: module hooks installed by
// torch_npu/npu/_plan.py push and pop the module's name on the calling thread. Backward (the autograd
// engine's threads run no module): the autograd node being evaluated was made by the forward operator
// with the same sequence number, so the module that was running when that number was drawn is the
// one whose backward this is.
#pragma once

#include <cstdint>
#include <string>

namespace vnpu {

void plan_enter_module(const std::string& name);
void plan_exit_module();

// The module to label the calling thread's allocations with: the innermost running module, or in
// backward "backward of <module>"; -1 if none (plan_module_id's ids).
int32_t plan_current_module();

}  // namespace vnpu
