// torch.npu.memory.NPUPluggableAllocator: device memory from a user library's functions
//   void* alloc(ssize_t size, int device, void* stream);
//   void  free(void* ptr, ssize_t size, int device, void* stream);
// installed with change_current_allocator() before the first npu allocation.
#pragma once

#include <c10/core/Device.h>

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <string>

namespace vnpu {

struct PluggableFunctions {
  void* (*alloc)(ptrdiff_t size, int device, void* stream) = nullptr;
  void (*free)(void* ptr, ptrdiff_t size, int device, void* stream) = nullptr;
  std::string path;
};

// Loads the two functions from a shared library; throws a clear error when either is missing.
PluggableFunctions load_pluggable_allocator(const std::string& path, const std::string& alloc_name,
                                            const std::string& free_name);
// Routes every later npu allocation to these functions. Refused once npu memory was allocated.
void use_pluggable_allocator(const PluggableFunctions& functions);
extern std::atomic<const PluggableFunctions*> g_active_pluggable_allocator;
inline const PluggableFunctions* active_pluggable_allocator() {
  return g_active_pluggable_allocator.load(std::memory_order_acquire);
}

}  // namespace vnpu
