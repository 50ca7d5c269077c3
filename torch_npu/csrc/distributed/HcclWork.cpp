#include "distributed/HcclWork.h"

#include "profiler/CollectiveRecorder.h"
#include "runtime/ErrorCode.h"

#include <ATen/core/ivalue_inl.h>
#include <c10/util/StringUtil.h>

#include <unistd.h>
#include <cstdlib>
#include <ctime>

namespace vnpu {

std::string dist_error(int code, const char* message) {
  return error_suffix(SubModule::kDist, code, message);
}

HcclWork::HcclWork(c10::intrusive_ptr<c10d::Work> inner, std::string what, std::vector<at::Tensor> results,
                   std::function<void()> after)
    : Work(-1, inner->retrieveOpType()),
      inner_(std::move(inner)),
      what_(std::move(what)),
      results_(std::move(results)),
      after_(std::make_shared<Once>(std::move(after))) {}

void HcclWork::Once::run() {
  std::call_once(flag, [this] {
    if (fn) {
      fn();
    }
  });
}

void HcclWork::set_record(std::shared_ptr<CollectiveRecord> record) {
  record_ = std::move(record);
}

bool HcclWork::isCompleted() {
  const bool done = inner_->isCompleted();
  if (done && record_) {
    record_->finish();
  }
  return done;
}
bool HcclWork::isSuccess() const {
  return inner_->isSuccess();
}
std::exception_ptr HcclWork::exception() const {
  return inner_->exception();
}
void HcclWork::abort() {
  inner_->abort();
}

bool HcclWork::wait(std::chrono::milliseconds timeout) {
  try {
    inner_->wait(timeout);
  } catch (const std::exception& e) {
    TORCH_CHECK(false, what_, " failed: ", e.what(), dist_error(kDistHccl, "call hccl api failed"));
  }
  if (record_) {
    record_->finish();
  }
  after_->run();
  return true;
}

c10::intrusive_ptr<c10::ivalue::Future> HcclWork::getFuture() {
  auto results = results_;
  auto what = what_;
  auto after = after_;
  auto record = record_;
  return inner_->getFuture()->then(
      [results, what, after, record](c10::ivalue::Future& done) -> c10::IValue {
        if (record) {
          record->finish();
        }
        if (done.hasError()) {
          throw std::runtime_error(what + " failed: " + done.tryRetrieveErrorMessage() +
                                   dist_error(kDistHccl, "call hccl api failed"));
        }
        after->run();
        return c10::IValue(results);
      },
      c10::ListType::create(c10::TensorType::get()));
}

CompletedWork::CompletedWork(std::vector<at::Tensor> results, std::exception_ptr error)
    : error_(std::move(error)),
      future_(c10::make_intrusive<c10::ivalue::Future>(c10::ListType::create(c10::TensorType::get()))) {
  if (error_) {
    future_->setError(error_);
  } else {
    future_->markCompleted(c10::IValue(std::move(results)));
  }
}

bool CompletedWork::wait(std::chrono::milliseconds /*timeout*/) {
  if (error_) {
    std::rethrow_exception(error_);
  }
  return true;
}

}  // namespace vnpu
