// The reductions of the intra-host link, in the documented order: element i of the result is
// ((p0[i] op p1[i]) op p2[i]) ... op p{k-1}[i], the parts in group-rank order, each step rounded in the dtype.
#pragma once

#include <c10/core/ScalarType.h>

#include <cstdint>
#include <vector>

namespace vnpu {

enum class LinkReduce { kSum, kProduct, kMin, kMax };

// Writes the reduction of `parts` (n elements each) to `out`, which may be one of the parts.
void reduce_into(uint8_t* out, const std::vector<const uint8_t*>& parts, int64_t n, at::ScalarType dtype,
                 LinkReduce op);

}  // namespace vnpu
