// The CPU engine's memory: its own anonymous mappings (on transparent huge pages where the kernel
// allows), and the weight memory a device keeps between sessions
// (Device::keep_memory_between_sessions).
#pragma once

#include <cstdint>
#include <mutex>

namespace carb::cpu {

/// Transparent huge pages are 2 MiB on x86-64 (and the usual arm64 kernels).
inline constexpr std::int64_t kHugePageBytes = std::int64_t{2} << 20;

std::int64_t page_bytes();
std::int64_t round_up(std::int64_t bytes, std::int64_t alignment);

/// Memory the session holds (weights, activation arena, scratchpad, prepare's staging): its own
/// anonymous mapping, 2 MiB-aligned when it is at least that large, and marked MADV_HUGEPAGE, so
/// where the kernel allows (Linux's default THP mode, "madvise", gives huge pages only on request)
/// each 2 MiB of it is one page fault and one TLB entry instead of 512, which makes writing fresh
/// memory much cheaper where faults are expensive (docs/cpu-engine.md#prepare; measured in
/// docs/benchmarks.md, "CPU engine: prepare"). A kernel without THP refuses the advice and the
/// mapping stays on 4 KiB pages. Pages are backed on first touch or by populate_pages(); the tail
/// past the last whole 2 MiB stays on 4 KiB pages, so the resident set never exceeds the bytes
/// asked for by more than a page. Out of memory is std::bad_alloc throughout, so the measure module
/// maps one type to `oom`.
class Pages {
 public:
  Pages() = default;
  explicit Pages(std::int64_t bytes);
  ~Pages();
  Pages(Pages&& other) noexcept;
  Pages& operator=(Pages&& other) noexcept;

  std::byte* data() const { return data_; }
  /// The mapping's length, page-rounded.
  std::int64_t bytes() const { return bytes_; }
  /// Unmaps everything past the first `bytes` (page-rounded; no more than it holds).
  void truncate(std::int64_t bytes);
  /// Forgets the mapping without unmapping it (it has been moved elsewhere).
  void release();

 private:
  std::byte* data_ = nullptr;
  std::int64_t bytes_ = 0;  ///< page-rounded
};

/// Maps the pages of a fresh buffer in one system call before it is first written (a no-op for
/// pages already backed). See pages.cpp.
void populate_pages(void* data, std::int64_t bytes);

/// The weight memory of finished sessions, kept mapped and resident for the next session, so a
/// process that prepares one configuration after another (a reused campaign worker) does not have
/// the kernel zero fresh pages for every network's weights: writing fresh pages costs far more than
/// writing kept ones (docs/cpu-engine.md#prepare; measured in docs/benchmarks.md, "CPU engine:
/// prepare"). It keeps one mapping of whole 2 MiB pages, as large as the
/// largest weight region since keeping began. A session takes it whole (grown when it needs
/// more) and writes its weights at its start, overwriting every weight, bias and channel padding
/// before any kernel reads it; the rest stays resident and untouched until the session gives it
/// back. Off until keep(true); thread-safe.
class WeightMemory {
 public:
  /// Turns keeping on or off; off gives back what is kept.
  void keep(bool on);
  /// The bytes kept now, all resident; starts the count of unused_bytes().
  std::int64_t kept_bytes();
  /// Of the bytes kept at the last kept_bytes(), those no session taken since has used: they
  /// stayed resident and untouched all along.
  std::int64_t unused_bytes();
  /// A mapping of at least `bytes` for a session's weights, starting with the kept pages where
  /// any are kept.
  Pages take(std::int64_t bytes);
  /// A finished session's weight region: kept when keeping is on, else unmapped.
  void give_back(Pages pages);

 private:
  std::mutex mutex_;
  bool on_ = false;
  Pages kept_;  ///< whole 2 MiB pages, all resident; empty when nothing is kept
  std::int64_t unused_ = 0;
};

}  // namespace carb::cpu
