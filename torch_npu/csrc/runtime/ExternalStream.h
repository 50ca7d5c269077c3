// Raw runtime streams and the npu streams that wrap them.
//
// npurt.npuStreamCreate hands out raw stream handles, as aclrtCreateStream does on a card;
// torch.npu.ExternalStream wraps any raw handle in a stream id of the external type, one slot
// per distinct handle and device, so the same handle always gives the same stream.
#pragma once

#include <c10/core/Stream.h>

#include <cstdint>

namespace vnpu {

constexpr int kAclSuccess = 0;
constexpr int kAclErrorInvalidParam = 100000;       // ACL_ERROR_INVALID_PARAM
constexpr int kAclErrorRtParamInvalid = 107000;     // ACL_ERROR_RT_PARAM_INVALID
constexpr uint32_t kAclHostRegMapped = 0x2;         // ACL_HOST_REG_MAPPED
constexpr uint32_t kAclHostRegPinned = 0x10000000;  // ACL_HOST_REG_PINNED

// aclrtCreateStream / aclrtDestroyStream: `out` receives the new handle.
int create_raw_stream(void** out);
int destroy_raw_stream(void* handle);
// aclrtHostRegister / aclrtHostUnregister for host memory the device may read.
int host_register(void* ptr, size_t size, uint32_t flags);
int host_unregister(void* ptr);

// The external stream of `device` wrapping `handle` (stable for the handle's lifetime).
c10::Stream external_stream(c10::DeviceIndex device, void* handle);
// The raw handle an external stream wraps; fails if the slot holds none.
void* external_stream_handle(c10::Stream stream);

}  // namespace vnpu
