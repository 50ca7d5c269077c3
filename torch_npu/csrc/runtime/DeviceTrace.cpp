#include "runtime/DeviceTrace.h"

#include <array>
#include <mutex>

namespace vnpu::trace {

std::atomic<int> g_listening{0};

namespace {

std::array<std::atomic<Handler>, 3> g_handlers{};
std::mutex g_install_mutex;

}  // namespace

void set_handler(Listener listener, Handler handler) {
  std::lock_guard<std::mutex> guard(g_install_mutex);
  const int index = static_cast<int>(listener);
  g_handlers[index].store(handler, std::memory_order_release);
  const int bit = 1 << index;
  const int listening = g_listening.load(std::memory_order_relaxed);
  g_listening.store(handler != nullptr ? (listening | bit) : (listening & ~bit), std::memory_order_release);
}

void dispatch(Point point, uintptr_t first, uintptr_t second) {
  for (const auto& slot : g_handlers) {
    const Handler handler = slot.load(std::memory_order_acquire);
    if (handler != nullptr) {
      handler(point, first, second);
    }
  }
}

}  // namespace vnpu::trace
