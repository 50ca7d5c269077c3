// What an operator on a sparse COO npu tensor raises (see UnsupportedLayouts.cpp).
#pragma once

#include <string>

namespace vnpu {

// torch_npu's error for operator `op` (e.g. "aten::add.Tensor") on a sparse COO npu tensor.
[[noreturn]] void raise_sparse_coo_unsupported(const std::string& op);

}  // namespace vnpu
