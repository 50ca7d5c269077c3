#include "runtime/DeviceTrace.h"

namespace vnpu::trace {

std::atomic<Handler> g_handler{nullptr};

void set_handler(Handler handler) {
  g_handler.store(handler, std::memory_order_release);
}

}  // namespace vnpu::trace
