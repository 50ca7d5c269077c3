#include "aten/CpuOperandError.h"

namespace vnpu {
namespace {

CpuOperandMessage& message_source() {
  static auto* source = new CpuOperandMessage();
  return *source;
}

}  // namespace

void set_cpu_operand_message(CpuOperandMessage message) {
  message_source() = std::move(message);
}

std::string cpu_operand_message(const std::string& op) {
  const auto& source = message_source();
  return source ? source(op) : std::string();
}

}  // namespace vnpu
