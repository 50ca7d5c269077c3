#include "runtime/PluggableAllocator.h"

#include <c10/util/Exception.h>

#include <dlfcn.h>

#include <atomic>

namespace vnpu {

std::atomic<const PluggableFunctions*> g_active_pluggable_allocator{nullptr};

// Set by the caching allocator when it hands out its first block.
extern std::atomic<bool> g_npu_memory_used;

PluggableFunctions load_pluggable_allocator(const std::string& path, const std::string& alloc_name,
                                            const std::string& free_name) {
  void* handle = dlopen(path.c_str(), RTLD_NOW | RTLD_LOCAL);
  TORCH_CHECK(handle != nullptr, "NPUPluggableAllocator: cannot load ", path, ": ", dlerror());
  PluggableFunctions f;
  f.path = path;
  f.alloc = reinterpret_cast<decltype(f.alloc)>(dlsym(handle, alloc_name.c_str()));
  TORCH_CHECK(f.alloc != nullptr, "NPUPluggableAllocator: ", path, " has no function named ", alloc_name);
  f.free = reinterpret_cast<decltype(f.free)>(dlsym(handle, free_name.c_str()));
  TORCH_CHECK(f.free != nullptr, "NPUPluggableAllocator: ", path, " has no function named ", free_name);
  return f;  // the library stays loaded for the life of the process
}

void use_pluggable_allocator(const PluggableFunctions& functions) {
  TORCH_CHECK(!g_npu_memory_used.load(), "Can't swap an already initialized allocator");
  g_active_pluggable_allocator.store(new PluggableFunctions(functions));
}

}  // namespace vnpu
