// The hccl group's collective timeout and its ephemeral extensions (ProcessGroupHCCL.h): the transport's
// default timeout follows them; collectives on the intra-host link read them when they run.
#include "distributed/ProcessGroupHCCL.h"

namespace vnpu {

std::chrono::milliseconds ProcessGroupHCCL::base_timeout() const {
  const double seconds = link_.execute_seconds > 0 ? link_.execute_seconds : 1800.0;
  return std::chrono::milliseconds(static_cast<int64_t>(seconds * 1000));
}

void ProcessGroupHCCL::apply_timeout() {
  if (transport_ && transport_->getBackendName() == "gloo") {  // (planning mode's transport has no timeouts)
    transport_->setTimeout(base_timeout() + ephemeral_.active());
  }
}

void ProcessGroupHCCL::setTimeout(std::chrono::milliseconds timeout) {
  TORCH_CHECK(timeout.count() > 0, "the timeout of an hccl group must be positive, got ", timeout.count(), " ms");
  link_.execute_seconds = static_cast<double>(timeout.count()) / 1000.0;
  apply_timeout();
}

void ProcessGroupHCCL::add_ephemeral_timeout(std::chrono::milliseconds extra) {
  TORCH_CHECK(extra.count() >= 0, "an ephemeral timeout extension cannot be negative, got ", extra.count(), " ms");
  ephemeral_.add(extra);
  apply_timeout();
}

void ProcessGroupHCCL::replace_transport(c10::intrusive_ptr<c10d::Backend> transport) {
  transport_ = std::move(transport);
  apply_timeout();
}

void ProcessGroupHCCL::expire_ephemeral_timeout() {
  if (ephemeral_.settle()) {
    apply_timeout();
  }
}

c10d::Backend* ProcessGroupHCCL::transport() {
  expire_ephemeral_timeout();
  return transport_.get();
}

}  // namespace vnpu
