// The few values planning mode keeps: small data (a whole storage of at most kPlanValueBytes). Data
// the program copies from the host to an npu tensor (DistributedDataParallel's bucket indices,
// torch.tensor([...], device="npu")) really lands in npu memory, and an operator that reads only such
// values and makes small results computes them on the CPU (position ids, masks, token ids: what models
// test with .all() or .item()), so reading them back works. An operator that writes the storage without
// computing, any collective but a broadcast (each rank of a planned job runs the same program, so a
// broadcast leaves what the rank has), and freeing it end that: from then on reading it raises planning
// mode's error, as for every tensor planning mode does not compute.
#pragma once

#include <ATen/core/Tensor.h>

#include <cstddef>
#include <cstdint>

namespace vnpu {

inline constexpr size_t kPlanValueBytes = 1024 * 1024;

// Whether `t` is the whole of its storage and small enough to hold values in planning mode.
bool plan_can_hold_values(const at::Tensor& t);
// The storage of `t` (an npu tensor) now holds values / no longer does.
void plan_values_written(const at::Tensor& t);
void plan_values_lost(const at::Tensor& t);
// The block at `ptr` was freed.
void plan_values_freed(int64_t ptr);
bool plan_has_values(const at::Tensor& t);

}  // namespace vnpu
