#include "fs/core/read_index.hpp"

#include <algorithm>

namespace stripefs::fs {

std::optional<std::pair<uint64_t, uint64_t>> ReadIndex::find(uint64_t b, uint64_t limit,
                                                             size_t extents, uint64_t end_block,
                                                             Fill fill) {
  if (extents < kMinExtents || b >= end_block || limit == 0) return std::nullopt;
  const size_t p = b >> kPageShift;
  const uint64_t* answers = nullptr;
  if (p < slots_.size()) {
    const Slot& slot = slots_[p];
    if (slot.sparse) return std::nullopt;
    answers = slot.answers.get();
  }
  if (answers == nullptr) {
    const uint64_t pages = (end_block >> kPageShift) + ((end_block & (kPageBlocks - 1)) != 0);
    if (pages > 4 * uint64_t{extents}) return std::nullopt;
    if (slots_.size() < pages) slots_.resize(pages);
    if (p >= slots_.size()) return std::nullopt;
    answers = make(p, fill);
    if (answers == nullptr) return std::nullopt;
  }
  const size_t i = b & (kPageBlocks - 1);
  const uint64_t v = answers[i];
  const size_t last = i + std::min<uint64_t>(kPageBlocks - i, limit);
  size_t j = i + 1;
  if (v == 0) {
    while (j < last && answers[j] == 0) ++j;
  } else {
    while (j < last && answers[j] == v + (j - i)) ++j;
  }
  return std::pair<uint64_t, uint64_t>{v, j - i};
}

const uint64_t* ReadIndex::make(size_t p, Fill fill) {
  Slot& slot = slots_[p];
  auto answers = std::make_unique_for_overwrite<uint64_t[]>(kPageBlocks);
  const uint64_t first = uint64_t{p} << kPageShift;
  if (fill(first, first + kPageBlocks, answers.get()) < kDenseExtents) {
    slot.sparse = true;
    return nullptr;
  }
  slot.answers = std::move(answers);
  ++pages_;
  made_.fetch_add(1, std::memory_order_relaxed);
  return slot.answers.get();
}

void ReadIndex::changed(uint64_t first, uint64_t end, size_t extents, Fill fill) {
  if (slots_.empty() || first >= end) return;
  if (extents < kMinExtents / 2) return clear();
  const size_t last = std::min<uint64_t>(slots_.size() - 1, (end - 1) >> kPageShift);
  for (size_t p = first >> kPageShift; p <= last && p < slots_.size(); ++p) {
    Slot& slot = slots_[p];
    slot.sparse = false;  // its extents changed: looked at again when next read
    if (!slot.answers) continue;
    const uint64_t page_first = uint64_t{p} << kPageShift;
    const uint64_t from = std::max(first, page_first);
    const uint64_t to = std::min(end, page_first + kPageBlocks);
    if (from == page_first && to == page_first + kPageBlocks) {
      slot.answers.reset();
      --pages_;
    } else {
      fill(from, to, slot.answers.get() + (from - page_first));
    }
  }
}

}  // namespace stripefs::fs
