#include "allocator.hpp"

#include <cuda_runtime_api.h>

#include <new>
#include <utility>

#include "carb/error.hpp"
#include "check.hpp"

namespace carb::cuda {

DeviceAllocator::DeviceAllocator(Allocate allocate, Release release)
    : allocate_(std::move(allocate)), release_(std::move(release)) {}

DeviceAllocator::Buffer::Buffer(Buffer&& other) noexcept
    : owner_(std::exchange(other.owner_, nullptr)),
      data_(std::exchange(other.data_, nullptr)),
      bytes_(std::exchange(other.bytes_, 0)),
      kind_(other.kind_) {}

DeviceAllocator::Buffer& DeviceAllocator::Buffer::operator=(Buffer&& other) noexcept {
  if (this != &other) {
    reset();
    owner_ = std::exchange(other.owner_, nullptr);
    data_ = std::exchange(other.data_, nullptr);
    bytes_ = std::exchange(other.bytes_, 0);
    kind_ = other.kind_;
  }
  return *this;
}

DeviceAllocator::Buffer::~Buffer() { reset(); }

void DeviceAllocator::Buffer::reset() {
  if (owner_ != nullptr) owner_->release(*this);
  owner_ = nullptr;
  data_ = nullptr;
  bytes_ = 0;
}

DeviceAllocator::Buffer DeviceAllocator::allocate(std::int64_t bytes, MemoryKind kind) {
  CARB_CHECK(bytes >= 0, "negative allocation");
  Buffer buffer;
  if (bytes == 0) return buffer;
  const std::int64_t counted = (bytes + kGranuleBytes - 1) / kGranuleBytes * kGranuleBytes;
  void* data = allocate_(static_cast<std::size_t>(counted));
  if (data == nullptr) throw std::bad_alloc();
  buffer.owner_ = this;
  buffer.data_ = data;
  buffer.bytes_ = counted;
  buffer.kind_ = kind;
  current_[static_cast<std::size_t>(kind)] += counted;
  total_ += counted;
  peak_ = std::max(peak_, total_);
  return buffer;
}

void DeviceAllocator::release(Buffer& buffer) {
  release_(buffer.data_);
  current_[static_cast<std::size_t>(buffer.kind_)] -= buffer.bytes_;
  total_ -= buffer.bytes_;
}

DeviceAllocator make_cuda_allocator() {
  return DeviceAllocator(
      [](std::size_t bytes) -> void* {
        void* data = nullptr;
        const cudaError_t status = cudaMalloc(&data, bytes);
        if (status == cudaErrorMemoryAllocation) {
          cudaGetLastError();  // not sticky: clear it and report out of memory
          return nullptr;
        }
        CARB_CUDA(status);
        return data;
      },
      // A failure here can only follow a sticky error, which was reported where it happened.
      [](void* data) { cudaFree(data); });
}

}  // namespace carb::cuda
