#include "runtime/Generator.h"

#include "runtime/Device.h"

#include <ATen/CPUGeneratorImpl.h>
#include <c10/core/GeneratorImpl.h>

#include <mutex>
#include <vector>

namespace vnpu {
namespace {

struct NpuGeneratorImpl final : c10::GeneratorImpl {
  NpuGeneratorImpl(c10::DeviceIndex device, uint64_t seed)
      : c10::GeneratorImpl(c10::Device(kNpu, device), c10::DispatchKeySet(c10::DispatchKey::PrivateUse1)),
        engine(at::make_generator<at::CPUGeneratorImpl>(seed)) {}

  void set_current_seed(uint64_t seed) override {
    engine.set_current_seed(seed);
  }
  void set_offset(uint64_t offset) override {
    engine.unsafeGetGeneratorImpl()->set_offset(offset);
  }
  uint64_t get_offset() const override {
    return engine.unsafeGetGeneratorImpl()->get_offset();
  }
  uint64_t current_seed() const override {
    return engine.current_seed();
  }
  uint64_t seed() override {
    return engine.seed();
  }
  void set_state(const c10::TensorImpl& state) override {
    engine.unsafeGetGeneratorImpl()->set_state(state);
  }
  c10::intrusive_ptr<c10::TensorImpl> get_state() const override {
    return engine.unsafeGetGeneratorImpl()->get_state();
  }
  static c10::DeviceType device_type() {
    return kNpu;
  }

  at::Generator engine;

 private:
  NpuGeneratorImpl* clone_impl() const override {
    auto* copy = new NpuGeneratorImpl(device().index(), 0);
    copy->engine = engine.clone();
    return copy;
  }
};

}  // namespace

at::Generator new_generator(c10::DeviceIndex device) {
  if (device < 0) {
    device = current_device();
  }
  check_device_index(device);
  return at::make_generator<NpuGeneratorImpl>(device, c10::default_rng_seed_val);
}

const at::Generator& default_generator(c10::DeviceIndex device) {
  static std::once_flag once;
  static std::vector<at::Generator> generators;
  std::call_once(once, [] {
    for (c10::DeviceIndex d = 0; d < device_count(); ++d) {
      generators.push_back(new_generator(d));
    }
  });
  if (device < 0) {
    device = current_device();
  }
  check_device_index(device);
  return generators[static_cast<size_t>(device)];
}

bool is_npu_generator(const at::Generator& generator) {
  return generator.defined() && generator.device().type() == kNpu;
}

at::Generator engine_of(const at::Generator& npu_generator) {
  return static_cast<NpuGeneratorImpl*>(npu_generator.unsafeGetGeneratorImpl())->engine;
}

}  // namespace vnpu
