// Calls and host time per npu operator, summed in C++ while a session runs (`vnpu run`'s report): no
// Python and no GIL on the operator path, so operators completing on any thread (autograd, collectives'
// callbacks) never wait for the interpreter.
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <utility>

namespace vnpu {

void start_operator_totals();
// Stops counting; operator name -> (calls, nanoseconds).
std::map<std::string, std::pair<int64_t, int64_t>> stop_operator_totals();

}  // namespace vnpu
