#include "runtime/SharedStorage.h"

#include "runtime/Device.h"
#include "runtime/ErrorCode.h"

#include <ATen/ops/from_blob.h>
#include <c10/core/Storage.h>

#include <sys/mman.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

namespace vnpu {
namespace {

std::string syscall_error() {
  return error_suffix(SubModule::kPta, kErrSyscall, "system call failed");
}

struct SharedMapping {
  void* address;
  size_t length;  // the mapped length (at least one byte: an empty storage still has a mapping to share)
  int fd;
};

void release_mapping(void* context) {
  auto* mapping = static_cast<SharedMapping*>(context);
  munmap(mapping->address, mapping->length);
  close(mapping->fd);
  delete mapping;
}

SharedMapping* map_shared(int fd, size_t length) {
  void* address = mmap(nullptr, length, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
  if (address == MAP_FAILED) {
    const int error = errno;
    close(fd);
    TORCH_CHECK(false, "sharing npu memory between processes: mmap of ", length,
                " bytes failed: ", std::strerror(error), syscall_error());
  }
  return new SharedMapping{address, length, fd};
}

}  // namespace

std::tuple<int64_t, int64_t> share_npu_storage(const at::Tensor& t) {
  TORCH_CHECK(t.device().type() == kNpu, "share_npu_storage expects an npu tensor, got ", t.device(),
              error_suffix(SubModule::kPta, kErrParam, "invalid parameter"));
  c10::StorageImpl* storage = t.storage().unsafeGetStorageImpl();
  const size_t nbytes = storage->nbytes();
  if (storage->data_ptr().get_deleter() == &release_mapping) {
    const auto* mapping = static_cast<SharedMapping*>(storage->data_ptr().get_context());
    return {mapping->fd, static_cast<int64_t>(nbytes)};
  }
  const int fd = memfd_create("vnpu-shared-npu-storage", MFD_CLOEXEC);
  TORCH_CHECK(fd >= 0, "sharing npu memory between processes: memfd_create failed: ", std::strerror(errno),
              syscall_error());
  const size_t length = std::max<size_t>(nbytes, 1);
  if (ftruncate(fd, static_cast<off_t>(length)) != 0) {
    const int error = errno;
    close(fd);
    TORCH_CHECK(false, "sharing npu memory between processes: cannot size a ", length,
                "-byte segment: ", std::strerror(error), syscall_error());
  }
  SharedMapping* mapping = map_shared(fd, length);
  if (nbytes > 0) {
    std::memcpy(mapping->address, storage->data(), nbytes);
  }
  // The caching allocator's block goes back to its pool; the storage keeps its size, format and users.
  storage->set_data_ptr_noswap(c10::DataPtr(mapping->address, mapping, &release_mapping, t.device()));
  return {fd, static_cast<int64_t>(nbytes)};
}

at::Tensor open_shared_npu_storage(int64_t fd, int64_t nbytes, int64_t device) {
  TORCH_CHECK(nbytes >= 0 && fd >= 0, "open_shared_npu_storage: invalid segment (fd ", fd, ", ", nbytes, " bytes)",
              error_suffix(SubModule::kPta, kErrParam, "invalid parameter"));
  SharedMapping* mapping = map_shared(static_cast<int>(fd), std::max<size_t>(static_cast<size_t>(nbytes), 1));
  const c10::Device npu(kNpu, static_cast<c10::DeviceIndex>(device));
  // The storage owns the mapping with the same deleter as a storage shared here, so sending it on shares the
  // same memory again rather than a copy.
  return at::for_blob(mapping->address, {nbytes})
      .context(mapping, &release_mapping)
      .target_device(npu)
      .options(at::TensorOptions().dtype(at::kByte).device(npu))
      .make_tensor();
}

}  // namespace vnpu
