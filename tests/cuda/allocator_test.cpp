// carb's device allocator's bookkeeping. The raw allocation is injected: these tests hand it
// host memory (std::malloc) and a budget, so the counting runs without a GPU; the CUDA sessions
// use the same class over cudaMalloc (tests/cuda/gpu_test.cpp checks it there).
#include <gtest/gtest.h>

#include <cstdlib>
#include <new>

#include "cuda/allocator.hpp"

namespace carb::cuda {
namespace {

// Host memory standing in for a device with `capacity` bytes.
struct HostDevice {
  std::int64_t capacity = 0;
  std::int64_t used = 0;
  int releases = 0;

  DeviceAllocator allocator() {
    return DeviceAllocator(
        [this](std::size_t bytes) -> void* {
          if (used + static_cast<std::int64_t>(bytes) > capacity) return nullptr;
          used += static_cast<std::int64_t>(bytes);
          return std::malloc(bytes);
        },
        [this](void* data) {
          ++releases;
          std::free(data);
        });
  }
};

TEST(DeviceAllocator, CountsByKindAndKeepsTheHighWaterMark) {
  HostDevice device{1 << 20};
  DeviceAllocator allocator = device.allocator();
  auto weights = allocator.allocate(1000, MemoryKind::kWeights);  // counted as 1024
  auto activations = allocator.allocate(4096, MemoryKind::kActivations);
  EXPECT_EQ(weights.bytes(), 1024);
  EXPECT_EQ(allocator.current_bytes(MemoryKind::kWeights), 1024);
  EXPECT_EQ(allocator.current_bytes(MemoryKind::kActivations), 4096);
  EXPECT_EQ(allocator.total_bytes(), 5120);
  {
    auto transient = allocator.allocate(8192, MemoryKind::kTransient);
    EXPECT_EQ(allocator.peak_bytes(), 13312);
  }
  EXPECT_EQ(allocator.current_bytes(MemoryKind::kTransient), 0);
  EXPECT_EQ(allocator.total_bytes(), 5120);
  EXPECT_EQ(allocator.peak_bytes(), 13312);
  EXPECT_EQ(device.releases, 1);
}

TEST(DeviceAllocator, MovedBuffersReleaseOnce) {
  HostDevice device{1 << 20};
  DeviceAllocator allocator = device.allocator();
  auto first = allocator.allocate(256, MemoryKind::kWorkspace);
  void* data = first.data();
  DeviceAllocator::Buffer second = std::move(first);
  EXPECT_EQ(second.data(), data);
  EXPECT_EQ(first.data(), nullptr);
  second = allocator.allocate(512, MemoryKind::kWorkspace);  // releases the first
  EXPECT_EQ(device.releases, 1);
  EXPECT_EQ(allocator.current_bytes(MemoryKind::kWorkspace), 512);
  second.reset();
  EXPECT_EQ(device.releases, 2);
  EXPECT_EQ(allocator.total_bytes(), 0);
}

TEST(DeviceAllocator, OutOfMemoryIsBadAllocAndCountsNothing) {
  HostDevice device{4096};
  DeviceAllocator allocator = device.allocator();
  auto held = allocator.allocate(2048, MemoryKind::kWeights);
  EXPECT_THROW(allocator.allocate(4096, MemoryKind::kActivations), std::bad_alloc);
  EXPECT_EQ(allocator.total_bytes(), 2048);
  EXPECT_EQ(allocator.peak_bytes(), 2048);
  EXPECT_EQ(allocator.current_bytes(MemoryKind::kActivations), 0);
}

TEST(DeviceAllocator, ZeroBytesIsAnEmptyBuffer) {
  HostDevice device{0};
  DeviceAllocator allocator = device.allocator();
  auto empty = allocator.allocate(0, MemoryKind::kWorkspace);
  EXPECT_EQ(empty.data(), nullptr);
  EXPECT_EQ(empty.bytes(), 0);
  EXPECT_EQ(allocator.total_bytes(), 0);
}

}  // namespace
}  // namespace carb::cuda
