// The work objects of the hccl backend, and torch_npu's DIST error-code suffix.
#pragma once

#include <torch/csrc/distributed/c10d/Work.hpp>

#include <functional>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

namespace vnpu {

struct CollectiveRecord;

constexpr int kDistParam = 1;
constexpr int kDistType = 2;
constexpr int kDistNotSupport = 7;
constexpr int kDistHccl = 200;

// "\n[ERROR] <time> (PID:.., Device:.., RankID:..) ERR02<code> DIST <message>", as
// torch_npu/utils/_error_code.py formats it (TORCH_NPU_COMPACT_ERROR_OUTPUT=1 keeps the tag only).
std::string dist_error(int code, const char* message);

// A transport work whose future yields the npu results, whose errors name the collective and the
// group, and which runs `after` (e.g. AVG's division) once the transport is done.
class HcclWork final : public c10d::Work {
 public:
  HcclWork(c10::intrusive_ptr<c10d::Work> inner, std::string what, std::vector<at::Tensor> results,
           std::function<void()> after);

  bool isCompleted() override;
  bool isSuccess() const override;
  std::exception_ptr exception() const override;
  void abort() override;
  bool wait(std::chrono::milliseconds timeout) override;
  c10::intrusive_ptr<c10::ivalue::Future> getFuture() override;
  // The profiler's record of this collective: completion (wait, a completed query, the future) ends it.
  void set_record(std::shared_ptr<CollectiveRecord> record);

 private:
  struct Once {
    explicit Once(std::function<void()> fn) : fn(std::move(fn)) {}
    void run();
    std::function<void()> fn;
    std::once_flag flag;
  };

  c10::intrusive_ptr<c10d::Work> inner_;
  std::string what_;
  std::vector<at::Tensor> results_;
  std::shared_ptr<Once> after_;
  std::shared_ptr<CollectiveRecord> record_;
};

// A collective that ran to the end in the calling thread (the intra-host link): done, or failed with `error`.
class CompletedWork final : public c10d::Work {
 public:
  CompletedWork(std::vector<at::Tensor> results, std::exception_ptr error);

  bool isCompleted() override {
    return true;
  }
  bool isSuccess() const override {
    return error_ == nullptr;
  }
  std::exception_ptr exception() const override {
    return error_;
  }
  bool wait(std::chrono::milliseconds timeout) override;
  c10::intrusive_ptr<c10::ivalue::Future> getFuture() override {
    return future_;
  }

 private:
  std::exception_ptr error_;
  c10::intrusive_ptr<c10::ivalue::Future> future_;
};

}  // namespace vnpu
