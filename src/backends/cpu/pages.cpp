#include "pages.hpp"

#include <algorithm>
#include <cstddef>
#include <new>
#include <utility>

#include <sys/mman.h>
#include <unistd.h>

namespace carb::cpu {

std::int64_t page_bytes() {
  static const std::int64_t page = ::sysconf(_SC_PAGESIZE);
  return page;
}

std::int64_t round_up(std::int64_t bytes, std::int64_t alignment) {
  return (bytes + alignment - 1) / alignment * alignment;
}

Pages::Pages(std::int64_t bytes) : bytes_(round_up(bytes, page_bytes())) {
  if (bytes_ == 0) return;
  const bool huge = bytes_ >= kHugePageBytes;
  const std::int64_t slack = huge ? kHugePageBytes - page_bytes() : 0;
  void* mapping = ::mmap(nullptr, static_cast<std::size_t>(bytes_ + slack), PROT_READ | PROT_WRITE,
                         MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  if (mapping == MAP_FAILED) throw std::bad_alloc();
  auto* start = static_cast<std::byte*>(mapping);
  data_ = start;
  if (huge) {  // keep the 2 MiB-aligned part; give back the slack on either side
    const auto address = reinterpret_cast<std::uintptr_t>(start);
    const auto aligned =
        static_cast<std::uintptr_t>(round_up(static_cast<std::int64_t>(address), kHugePageBytes));
    data_ = start + (aligned - address);
    const auto head = static_cast<std::size_t>(data_ - start);
    if (head > 0) ::munmap(start, head);
    const std::size_t tail = static_cast<std::size_t>(slack) - head;
    if (tail > 0) ::munmap(data_ + bytes_, tail);
#ifdef MADV_HUGEPAGE
    ::madvise(data_, static_cast<std::size_t>(bytes_), MADV_HUGEPAGE);
#endif
  }
}

Pages::~Pages() {
  if (data_ != nullptr) ::munmap(data_, static_cast<std::size_t>(bytes_));
}

Pages::Pages(Pages&& other) noexcept
    : data_(std::exchange(other.data_, nullptr)), bytes_(std::exchange(other.bytes_, 0)) {}

Pages& Pages::operator=(Pages&& other) noexcept {
  std::swap(data_, other.data_);
  std::swap(bytes_, other.bytes_);
  return *this;
}

void Pages::truncate(std::int64_t bytes) {
  const std::int64_t kept =
      std::min(round_up(std::max<std::int64_t>(bytes, 0), page_bytes()), bytes_);
  if (kept == 0) {
    *this = Pages();
    return;
  }
  if (kept < bytes_) ::munmap(data_ + kept, static_cast<std::size_t>(bytes_ - kept));
  bytes_ = kept;
}

void Pages::release() {
  data_ = nullptr;
  bytes_ = 0;
}

// Written page by page, each first touch of a 4 KiB page is a page fault; populating the range
// first with one MADV_POPULATE_WRITE takes its faults in one call, which costs less where faults
// are expensive (docs/benchmarks.md, "CPU engine: prepare"); on huge pages (Pages) it is one
// fault per 2 MiB either way. A kernel without MADV_POPULATE_WRITE (before Linux 5.14) refuses
// with EINVAL and the pages fault in on first write as before, so the result is ignored.
void populate_pages(void* data, std::int64_t bytes) {
#ifdef MADV_POPULATE_WRITE
  const auto page = static_cast<std::uintptr_t>(page_bytes());
  const auto start = reinterpret_cast<std::uintptr_t>(data);
  const std::uintptr_t begin = (start + page - 1) / page * page;
  const std::uintptr_t end = (start + static_cast<std::uintptr_t>(bytes)) / page * page;
  if (end > begin) {
    ::madvise(static_cast<char*>(data) + (begin - start), end - begin, MADV_POPULATE_WRITE);
  }
#else
  (void)data;
  (void)bytes;
#endif
}

namespace {

// Kept memory is whole 2 MiB pages: moved whole, a huge page stays one (mremap splits those
// it moves only in part, or to an address not on a 2 MiB boundary).
std::int64_t whole_huge_pages(std::int64_t bytes) {
  return std::max<std::int64_t>(bytes, 0) / kHugePageBytes * kHugePageBytes;
}

}  // namespace

void WeightMemory::keep(bool on) {
  const std::lock_guard lock(mutex_);
  on_ = on;
  if (!on) {
    kept_ = Pages();
    unused_ = 0;
  }
}

std::int64_t WeightMemory::kept_bytes() {
  const std::lock_guard lock(mutex_);
  unused_ = kept_.bytes();
  return kept_.bytes();
}

std::int64_t WeightMemory::unused_bytes() {
  const std::lock_guard lock(mutex_);
  return unused_;
}

Pages WeightMemory::take(std::int64_t bytes) {
  const std::lock_guard lock(mutex_);
  const std::int64_t needed = round_up(bytes, page_bytes());
  if (kept_.bytes() == 0) return Pages(bytes);
  unused_ = std::max<std::int64_t>(0, unused_ - std::min(needed, kept_.bytes()));
  if (kept_.bytes() >= needed) return std::exchange(kept_, Pages());
  // Grown: a fresh 2 MiB-aligned mapping, and the kept pages' page tables moved over its start.
  // Nothing is copied and nothing is zeroed; the rest of it is fresh. If the kernel refuses,
  // the fresh pages serve and the kept ones are given back.
  Pages pages(bytes);
  void* moved = ::mremap(kept_.data(), static_cast<std::size_t>(kept_.bytes()),
                         static_cast<std::size_t>(kept_.bytes()), MREMAP_MAYMOVE | MREMAP_FIXED,
                         pages.data());
  if (moved == MAP_FAILED) {
    kept_ = Pages();
  } else {
    kept_.release();
  }
  return pages;
}

void WeightMemory::give_back(Pages pages) {
  const std::lock_guard lock(mutex_);
  if (!on_) return;
  pages.truncate(whole_huge_pages(pages.bytes()));
  if (pages.bytes() > kept_.bytes()) kept_ = std::move(pages);
}

}  // namespace carb::cpu
