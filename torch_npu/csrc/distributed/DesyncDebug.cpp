// TORCH_HCCL_DESYNC_DEBUG=1: before each collective the ranks of a group exchange what they are about to run
// (sequence number, collective, element count, dtype, reduction) and every rank reports a mismatch rank by rank.
#include "distributed/HcclWork.h"
#include "distributed/ProcessGroupHCCL.h"

#include <algorithm>

namespace vnpu {

namespace {

const std::vector<std::string>& collective_names() {
  static const std::vector<std::string> names = {"broadcast",
                                                 "allreduce",
                                                 "reduce",
                                                 "allgather",
                                                 "allgather_into_tensor",
                                                 "gather",
                                                 "scatter",
                                                 "reduce_scatter",
                                                 "reduce_scatter_tensor",
                                                 "all_to_all_single",
                                                 "all_to_all",
                                                 "barrier"};
  return names;
}

std::string fingerprint_text(const int64_t* f) {
  const auto& names = collective_names();
  const std::string name = f[1] >= 0 && f[1] < static_cast<int64_t>(names.size()) ? names[f[1]] : "?";
  std::string text = c10::str(name, "(#", f[0], ", numel=", f[2],
                              ", dtype=", f[3] >= 0 ? c10::toString(static_cast<at::ScalarType>(f[3])) : "none");
  if (f[4] >= 0) {
    text += c10::str(", op=", f[4]);
  }
  return text + ")";
}

}  // namespace

void ProcessGroupHCCL::check_in_step(const char* collective, const std::vector<at::Tensor>& tensors,
                                     int64_t reduce_op) {
  if (!desync_debug_) {
    return;
  }
  const auto& names = collective_names();
  const auto found = std::find(names.begin(), names.end(), collective);
  int64_t numel = 0;
  for (const auto& t : tensors) {
    numel += t.numel();
  }
  at::Tensor mine =
      at::tensor({sequence_++, static_cast<int64_t>(found - names.begin()), numel,
                  tensors.empty() ? int64_t{-1} : static_cast<int64_t>(tensors[0].scalar_type()), reduce_op},
                 at::kLong);
  std::vector<std::vector<at::Tensor>> all(1);
  for (int r = 0; r < getSize(); ++r) {
    all[0].push_back(at::empty_like(mine));
  }
  std::vector<at::Tensor> in{mine};
  transport_->allgather(all, in, c10d::AllgatherOptions())->wait();
  bool same = true;
  for (const auto& other : all[0]) {
    same = same && at::equal(other, mine);
  }
  if (!same) {
    std::string report;
    for (int r = 0; r < getSize(); ++r) {
      report += c10::str("\n  rank ", r, ": ", fingerprint_text(all[0][r].data_ptr<int64_t>()));
    }
    TORCH_CHECK(false, "Detected mismatch between collectives on ", describe(collective),
                " (TORCH_HCCL_DESYNC_DEBUG=1):", report, dist_error(kDistParam, "invalid parameter"));
  }
}

}  // namespace vnpu
