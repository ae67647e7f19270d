// carb's device allocator: every byte a CUDA session holds on the GPU (weights, activations,
// library workspaces, prepare's transient buffers) goes through it, counted by kind, with the
// high-water mark of the total.
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>

namespace carb::cuda {

/// What a device buffer holds.
enum class MemoryKind { kWeights, kActivations, kWorkspace, kTransient };
inline constexpr int kMemoryKindCount = 4;

/// Counts device memory by kind and keeps the high-water mark of the total. Buffers return their
/// bytes when they die, so the allocator must outlive them. Not thread-safe.
class DeviceAllocator {
 public:
  /// Raw allocation: a pointer, or nullptr when the device is out of memory (any other failure
  /// throws). Raw release never throws.
  using Allocate = std::function<void*(std::size_t bytes)>;
  using Release = std::function<void(void* data)>;

  /// Sizes are counted rounded up to this (cudaMalloc's alignment), bytes.
  static constexpr std::int64_t kGranuleBytes = 256;

  DeviceAllocator(Allocate allocate, Release release);

  /// A device buffer; moves, never copies.
  class Buffer {
   public:
    Buffer() = default;
    Buffer(Buffer&& other) noexcept;
    Buffer& operator=(Buffer&& other) noexcept;
    Buffer(const Buffer&) = delete;
    Buffer& operator=(const Buffer&) = delete;
    ~Buffer();

    void* data() const { return data_; }
    std::int64_t bytes() const { return bytes_; }  ///< counted bytes (rounded to the granule)
    /// Returns the bytes now rather than at destruction.
    void reset();

   private:
    friend class DeviceAllocator;
    DeviceAllocator* owner_ = nullptr;
    void* data_ = nullptr;
    std::int64_t bytes_ = 0;
    MemoryKind kind_ = MemoryKind::kTransient;
  };

  /// A buffer of at least `bytes` (an empty buffer for 0). Throws std::bad_alloc when the device
  /// has no room.
  Buffer allocate(std::int64_t bytes, MemoryKind kind);

  std::int64_t current_bytes(MemoryKind kind) const {
    return current_[static_cast<std::size_t>(kind)];
  }
  std::int64_t total_bytes() const { return total_; }
  std::int64_t peak_bytes() const { return peak_; }

 private:
  void release(Buffer& buffer);

  Allocate allocate_;
  Release release_;
  std::array<std::int64_t, kMemoryKindCount> current_{};
  std::int64_t total_ = 0;
  std::int64_t peak_ = 0;
};

/// The allocator over cudaMalloc/cudaFree on the current device.
DeviceAllocator make_cuda_allocator();

}  // namespace carb::cuda
