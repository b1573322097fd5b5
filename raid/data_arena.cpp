#include "raid/data_arena.hpp"

#include <sanitizer/asan_interface.h>
#include <sys/mman.h>

#include <algorithm>
#include <cstring>

#include "raid/log.hpp"

namespace stripefs {

namespace {
constexpr size_t kPagesPerChunk = DataArena::kChunkBytes / DataArena::kPageBytes;
constexpr size_t kWords = kPagesPerChunk / 64;
constexpr size_t kHugePage = 2u << 20;
constexpr size_t kLargeUnit = 16;  // pages: large buffers are 64 KiB multiples

// Whether pages [first, first + unit) are all free; `unit` divides 64 and `first` is a
// multiple of it, so they share one word.
bool unit_free(const std::vector<uint64_t>& used, size_t first, size_t unit) {
  const uint64_t mask = unit == 64 ? ~uint64_t{0} : ((uint64_t{1} << unit) - 1);
  return ((used[first / 64] >> (first % 64)) & mask) == 0;
}

void mark(std::vector<uint64_t>& used, size_t first, size_t pages, bool in_use) {
  for (size_t p = first; p < first + pages; ++p) {
    const uint64_t bit = uint64_t{1} << (p % 64);
    used[p / 64] = in_use ? used[p / 64] | bit : used[p / 64] & ~bit;
  }
}
}  // namespace

DataArena& DataArena::shared() {
  static DataArena* arena = new DataArena(kMaxChunks);  // never destroyed: see the header
  return *arena;
}

DataArena::DataArena(unsigned max_chunks) : max_chunks_(max_chunks) {
  // Address space only (PROT_NONE, nothing committed); a chunk becomes memory when it is
  // added. Aligned to 2 MiB so that each chunk can be backed by huge pages, which the kernel
  // pins and maps for a fixed request in fewer pieces.
  const size_t reserve = size_t{max_chunks_} * kChunkBytes + kHugePage;
  void* p = mmap(nullptr, reserve, PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
  if (p == MAP_FAILED) {
    raid_log().warn("data arena: cannot reserve address space ({}); file data uses the heap",
                    std::strerror(errno));
    return;
  }
  reserved_ = p;
  const auto start = reinterpret_cast<uintptr_t>(p);
  const uintptr_t aligned = (start + kHugePage - 1) / kHugePage * kHugePage;
  base_ = reinterpret_cast<std::byte*>(aligned);
}

DataArena::~DataArena() {
  if (reserved_ == nullptr) return;
  ASAN_UNPOISON_MEMORY_REGION(base_, size_t{chunks()} * kChunkBytes);
  munmap(reserved_, size_t{max_chunks_} * kChunkBytes + kHugePage);
}

void DataArena::allow(size_t bytes) {
  std::lock_guard lock(mutex_);
  const size_t want = std::min<size_t>((bytes + kChunkBytes - 1) / kChunkBytes, max_chunks_);
  limit_chunks_ = std::max(limit_chunks_, want);
}

bool DataArena::grow() {
  const unsigned n = chunks_.load(std::memory_order_relaxed);
  if (base_ == nullptr || n >= limit_chunks_) return false;
  std::byte* chunk = chunk_base(n);
  if (mprotect(chunk, kChunkBytes, PROT_READ | PROT_WRITE) != 0) {
    raid_log().warn("data arena: cannot add a chunk ({})", std::strerror(errno));
    limit_chunks_ = n;  // do not try again on every allocation
    return false;
  }
  (void)madvise(chunk, kChunkBytes, MADV_HUGEPAGE);  // a hint: fine if refused
  // Under AddressSanitizer, memory no buffer holds is poisoned, as freed heap memory would be.
  ASAN_POISON_MEMORY_REGION(chunk, kChunkBytes);
  used_.emplace_back(kWords, 0);
  runs_.emplace_back(kPagesPerChunk, 0);
  free_pages_.push_back(kPagesPerChunk);
  unit_.push_back(0);
  chunks_.store(n + 1, std::memory_order_release);
  return true;
}

// First fit among the chunk's free runs of `unit`-page units; `pages` is a multiple of `unit`.
std::byte* DataArena::take(unsigned chunk, size_t pages, size_t unit) {
  if (free_pages_[chunk] < pages) return nullptr;
  std::vector<uint64_t>& used = used_[chunk];
  size_t run = 0;
  for (size_t p = 0; p < kPagesPerChunk; p += unit) {
    if (p % 64 == 0 && used[p / 64] == ~uint64_t{0}) {  // a full word: skip it
      run = 0;
      p += 64 - unit;
      continue;
    }
    run = unit_free(used, p, unit) ? run + unit : 0;
    if (run == pages) {
      const size_t first = p + unit - pages;
      mark(used, first, pages, true);
      runs_[chunk][first] = static_cast<uint16_t>(pages);
      free_pages_[chunk] -= pages;
      unit_[chunk] = unit;
      return chunk_base(chunk) + first * kPageBytes;
    }
  }
  return nullptr;
}

std::byte* DataArena::allocate(size_t bytes) {
  size_t pages = (std::max<size_t>(bytes, 1) + kPageBytes - 1) / kPageBytes;
  const size_t unit = pages >= kLargeUnit ? kLargeUnit : 1;
  pages = (pages + unit - 1) / unit * unit;
  std::lock_guard lock(mutex_);
  if (pages > kPagesPerChunk) {
    ++refused_;
    return nullptr;
  }
  // Chunks of the same kind first, then empty ones, then a new one.
  std::byte* found = nullptr;
  const unsigned n = chunks_.load(std::memory_order_relaxed);
  for (unsigned c = 0; c < n && found == nullptr; ++c) {
    if (unit_[c] == unit) found = take(c, pages, unit);
  }
  for (unsigned c = 0; c < n && found == nullptr; ++c) {
    if (unit_[c] == 0) found = take(c, pages, unit);
  }
  if (found == nullptr && grow()) found = take(n, pages, unit);
  if (found == nullptr) {
    ++refused_;
    return nullptr;
  }
  bytes_in_use_ += pages * kPageBytes;
  ASAN_UNPOISON_MEMORY_REGION(found, pages * kPageBytes);
  return found;
}

void DataArena::release(std::byte* data) {
  const auto offset = static_cast<size_t>(data - base_);
  const auto chunk = static_cast<unsigned>(offset / kChunkBytes);
  const size_t first = offset % kChunkBytes / kPageBytes;
  std::lock_guard lock(mutex_);
  const size_t pages = runs_[chunk][first];
  mark(used_[chunk], first, pages, false);
  runs_[chunk][first] = 0;
  free_pages_[chunk] += pages;
  if (free_pages_[chunk] == kPagesPerChunk) unit_[chunk] = 0;  // empty: either kind again
  bytes_in_use_ -= pages * kPageBytes;
  ASAN_POISON_MEMORY_REGION(data, pages * kPageBytes);
}

DataArenaStats DataArena::stats() const {
  std::lock_guard lock(mutex_);
  return DataArenaStats{chunks_.load(std::memory_order_relaxed), bytes_in_use_, refused_};
}

}  // namespace stripefs
