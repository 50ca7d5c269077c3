// The hccl backend: c10d collectives on npu tensors, carried by a gloo backend over zero-copy CPU aliases
// of the same memory. What gloo lacks is composed here: AVG (sum, then divide), PREMUL_SUM (scale, then
// sum), bool SUM / PRODUCT (MAX / MIN over the bytes); BAND / BOR / BXOR are refused as torch_npu does.
// Errors name the collective and the group. With TORCH_HCCL_DESYNC_DEBUG=1 every collective first compares
// what each rank is about to run (collective, element count, dtype, reduction) and mismatches are
// reported by every rank instead of hanging or mixing data.
//
// Like HCCL choosing HCCS / PCIe inside a server and RoCE between servers, a group whose ranks all run on
// one host carries allreduce (and the reduce-scatters built on it), reduce, broadcast, allgather and
// allgather_into_tensor over an IntraHostLink (shared memory); the others (gather, scatter, all-to-all, send /
// recv), and groups spanning hosts, use the gloo transport.
// HCCL_INTRA_ROCE_ENABLE=1 keeps one host's ranks on the network transport too.
#pragma once

#include "distributed/EphemeralTimeout.h"
#include "distributed/IntraHostLink.h"
#include "distributed/SilentCheck.h"

#include <torch/csrc/distributed/c10d/Backend.hpp>

#include <functional>
#include <memory>
#include <optional>
#include <string>

namespace vnpu {

class ProcessGroupHCCL final : public c10d::Backend {
 public:
  ProcessGroupHCCL(c10::intrusive_ptr<c10d::Backend> transport, int rank, int size, std::string name);
  ~ProcessGroupHCCL() override;

  const std::string getBackendName() const override {
    return name_;
  }
  // A stable communicator name per group (the "hcom" torch_npu's fused MC2 operators take).
  std::string comm_name() const;

  c10::intrusive_ptr<c10d::Work> broadcast(std::vector<at::Tensor>& tensors,
                                           const c10d::BroadcastOptions& opts) override;
  c10::intrusive_ptr<c10d::Work> allreduce(std::vector<at::Tensor>& tensors,
                                           const c10d::AllreduceOptions& opts) override;
  c10::intrusive_ptr<c10d::Work> allreduce_coalesced(std::vector<at::Tensor>& tensors,
                                                     const c10d::AllreduceCoalescedOptions& opts) override;
  c10::intrusive_ptr<c10d::Work> reduce(std::vector<at::Tensor>& tensors, const c10d::ReduceOptions& opts) override;
  c10::intrusive_ptr<c10d::Work> allgather(std::vector<std::vector<at::Tensor>>& outputs,
                                           std::vector<at::Tensor>& inputs,
                                           const c10d::AllgatherOptions& opts) override;
  c10::intrusive_ptr<c10d::Work> _allgather_base(at::Tensor& output, at::Tensor& input,
                                                 const c10d::AllgatherOptions& opts) override;
  c10::intrusive_ptr<c10d::Work> allgather_into_tensor_coalesced(std::vector<at::Tensor>& outputs,
                                                                 std::vector<at::Tensor>& inputs,
                                                                 const c10d::AllgatherOptions& opts) override;
  c10::intrusive_ptr<c10d::Work> gather(std::vector<std::vector<at::Tensor>>& outputs, std::vector<at::Tensor>& inputs,
                                        const c10d::GatherOptions& opts) override;
  c10::intrusive_ptr<c10d::Work> scatter(std::vector<at::Tensor>& outputs, std::vector<std::vector<at::Tensor>>& inputs,
                                         const c10d::ScatterOptions& opts) override;
  c10::intrusive_ptr<c10d::Work> reduce_scatter(std::vector<at::Tensor>& outputs,
                                                std::vector<std::vector<at::Tensor>>& inputs,
                                                const c10d::ReduceScatterOptions& opts) override;
  c10::intrusive_ptr<c10d::Work> _reduce_scatter_base(at::Tensor& output, at::Tensor& input,
                                                      const c10d::ReduceScatterOptions& opts) override;
  c10::intrusive_ptr<c10d::Work> reduce_scatter_tensor_coalesced(std::vector<at::Tensor>& outputs,
                                                                 std::vector<at::Tensor>& inputs,
                                                                 const c10d::ReduceScatterOptions& opts) override;
  c10::intrusive_ptr<c10d::Work> alltoall_base(at::Tensor& output, at::Tensor& input,
                                               std::vector<int64_t>& output_splits, std::vector<int64_t>& input_splits,
                                               const c10d::AllToAllOptions& opts) override;
  c10::intrusive_ptr<c10d::Work> alltoall(std::vector<at::Tensor>& outputs, std::vector<at::Tensor>& inputs,
                                          const c10d::AllToAllOptions& opts) override;
  c10::intrusive_ptr<c10d::Work> send(std::vector<at::Tensor>& tensors, int dst, int tag) override;
  c10::intrusive_ptr<c10d::Work> recv(std::vector<at::Tensor>& tensors, int src, int tag) override;
  c10::intrusive_ptr<c10d::Work> recvAnysource(std::vector<at::Tensor>& tensors, int tag) override;
  c10::intrusive_ptr<c10d::Work> barrier(const c10d::BarrierOptions& opts) override;

  // reinit_process_group(rebuild_link=True): what the transport was connected with (the store, the connect and
  // execute timeouts in seconds), kept with the group; later collectives use a newly connected transport.
  struct Link {
    c10::intrusive_ptr<c10d::Store> store;
    double connect_seconds = 0;
    double execute_seconds = 0;
    int64_t generation = 0;
  };
  void set_link(Link link) {
    link_ = std::move(link);
  }
  Link& link() {
    return link_;
  }
  void replace_transport(c10::intrusive_ptr<c10d::Backend> transport);

  // The timeout of the group's collectives (Backend._set_default_timeout), and an extension of it for the
  // collectives issued from now on until the first of them finished (_add_ephemeral_timeout). Collectives
  // given their own timeout keep it on the transport; on the intra-host link the extension is added to it.
  void setTimeout(std::chrono::milliseconds timeout) override;
  void add_ephemeral_timeout(std::chrono::milliseconds extra);

  // The intra-host link: created by rank 0, opened by the others, unlinked by rank 0 once all have it, closed
  // by every rank when any of them could not open it (the group then stays on the transport).
  void open_intra_host_link(const std::string& name, bool create) {
    intra_host_ = std::make_unique<IntraHostLink>(name, getRank(), getSize(), create);
  }
  void unlink_intra_host_link() {
    if (intra_host_) {
      intra_host_->unlink();
    }
  }
  void close_intra_host_link() {
    intra_host_.reset();
  }
  bool uses_intra_host_link() const {
    return intra_host_ != nullptr;
  }
  // How many collectives the intra-host link ran in place on the peers' memory.
  std::map<std::string, uint64_t> in_place_collectives() const {
    return intra_host_ ? intra_host_->in_place_collectives() : std::map<std::string, uint64_t>{};
  }

  // The group's collective sequence number (torch_npu's _get_sequence_number_for_group), the transport's.
  void setSequenceNumberForGroup() override {
    transport_->setSequenceNumberForGroup();
  }
  uint64_t getSequenceNumberForGroup() override {
    return transport_->getSequenceNumberForGroup();
  }

 private:
  // A transport collective's work (errors name the collective and the group), remembered so that a later
  // intra-host collective starts after it (program order).
  c10::intrusive_ptr<c10d::Work> named(const char* collective, c10::intrusive_ptr<c10d::Work> work,
                                       std::vector<at::Tensor> results, std::function<void()> after = nullptr);
  // A send / recv work: not remembered, since gloo's point-to-point works can be waited for once only (a second
  // wait blocks); intra-host collectives are not ordered after transfers still in flight.
  c10::intrusive_ptr<c10d::Work> point_to_point(const char* what, c10::intrusive_ptr<c10d::Work> work,
                                                std::vector<at::Tensor> results);
  // The transport a collective is issued on, once an expired ephemeral extension was removed from its timeout.
  c10d::Backend* transport();
  std::chrono::milliseconds base_timeout() const;
  void apply_timeout();
  // Removes an ephemeral extension whose collective has finished from the group's timeout.
  void expire_ephemeral_timeout();
  // Runs `run` on the intra-host link now: a completed work holding `results` (then `after`), or the error.
  c10::intrusive_ptr<c10d::Work> on_intra_host(const char* collective,
                                               const std::function<void(std::chrono::milliseconds)>& run,
                                               const std::vector<at::Tensor>& results,
                                               std::chrono::milliseconds timeout,
                                               std::function<void()> after = nullptr);
  std::string describe(const char* collective) const;
  void check_in_step(const char* collective, const std::vector<at::Tensor>& tensors, int64_t reduce_op);

  c10::intrusive_ptr<c10d::Backend> transport_;
  std::string name_;
  bool desync_debug_ = false;
  int64_t sequence_ = 0;
  Link link_;
  std::unique_ptr<IntraHostLink> intra_host_;
  EphemeralTimeout ephemeral_;
  CollectiveSilentCheck silent_check_;
  // Weak: a transport work nobody holds any more is finished, and its tensors are not kept alive here.
  std::optional<c10::weak_intrusive_ptr<c10d::Work>> last_transport_work_;
};

}  // namespace vnpu
