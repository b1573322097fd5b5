#include "fs/core/extent_map.hpp"

#include <algorithm>

namespace stripefs::fs {

ExtentMap::At ExtentMap::at(uint64_t file_block) const {
  At at{nullptr, nullptr, UINT64_MAX};
  auto e = map_.upper_bound(file_block);
  if (e != map_.end()) at.next = e->first;
  if (e != map_.begin()) {
    const MemExtent& p = std::prev(e)->second;
    if (file_block < p.extent.logical_end()) {
      at.extent = &p;
      if (std::prev(e) != map_.begin()) at.previous = &std::prev(e, 2)->second;
    } else {
      at.previous = &p;
    }
  }
  return at;
}

uint64_t ExtentMap::map(uint64_t file_block) const {
  const MemExtent* e = at(file_block).extent;
  return e == nullptr ? 0 : e->extent.physical + (file_block - e->extent.logical);
}

std::pair<uint64_t, uint64_t> ExtentMap::readable_run(uint64_t b) const {
  auto e = map_.upper_bound(b);
  if (e != map_.begin()) {
    auto p = std::prev(e);
    const Extent& x = p->second.extent;
    if (b < x.logical_end()) {
      const uint64_t v = (x.unwritten || p->second.pending) ? 0 : x.physical + (b - x.logical);
      return {v, x.logical_end() - b};
    }
  }
  return {0, e == map_.end() ? UINT64_MAX : e->first - b};
}

void ExtentMap::insert(Extent extent) {
  MemExtent m{extent, false};
  auto [it, inserted] = map_.insert_or_assign(extent.logical, m);
  // Merge with the previous and next extents where both are contiguous.
  if (it != map_.begin()) {
    auto prev = std::prev(it);
    if (mergeable(prev->second, it->second)) {
      prev->second.extent.length += it->second.extent.length;
      map_.erase(it);
      it = prev;
    }
  }
  if (auto next = std::next(it); next != map_.end() && mergeable(it->second, next->second)) {
    it->second.extent.length += next->second.extent.length;
    map_.erase(next);
  }
}

std::vector<RemovedRun> ExtentMap::remove(uint64_t first, uint64_t end) {
  std::vector<RemovedRun> removed;
  auto it = map_.upper_bound(first);
  if (it != map_.begin()) --it;
  while (it != map_.end() && it->first < end) {
    MemExtent m = it->second;
    const Extent e = m.extent;
    if (e.logical_end() <= first) {
      ++it;
      continue;
    }
    it = map_.erase(it);
    const uint64_t cut_begin = std::max(first, e.logical);
    const uint64_t cut_end = std::min(end, e.logical_end());
    if (e.logical < cut_begin) {
      MemExtent head = m;
      head.extent.length = static_cast<uint32_t>(cut_begin - e.logical);
      map_.emplace(head.extent.logical, head);
    }
    if (cut_end < e.logical_end()) {
      MemExtent tail = m;
      tail.extent.logical = cut_end;
      tail.extent.physical = e.physical + (cut_end - e.logical);
      tail.extent.length = static_cast<uint32_t>(e.logical_end() - cut_end);
      it = map_.emplace(tail.extent.logical, tail).first;
    }
    removed.push_back({e.physical + (cut_begin - e.logical), cut_end - cut_begin, m.pending});
  }
  return removed;
}

void ExtentMap::split_at(uint64_t file_block) {
  auto it = map_.upper_bound(file_block);
  if (it == map_.begin()) return;
  --it;
  MemExtent& m = it->second;
  if (m.extent.logical >= file_block || m.extent.logical_end() <= file_block) return;
  MemExtent tail = m;
  tail.extent.logical = file_block;
  tail.extent.physical += file_block - m.extent.logical;
  tail.extent.length = static_cast<uint32_t>(m.extent.logical_end() - file_block);
  m.extent.length = static_cast<uint32_t>(file_block - m.extent.logical);
  map_.emplace(file_block, tail);
}

std::vector<std::pair<uint64_t, uint64_t>> ExtentMap::settle(uint64_t first, uint64_t end,
                                                             bool written) {
  split_at(first);
  split_at(end);
  std::vector<std::pair<uint64_t, uint64_t>> on_disk;
  for (auto it = map_.lower_bound(first); it != map_.end() && it->first < end; ++it) {
    if (it->second.pending) {
      on_disk.emplace_back(it->second.extent.physical, it->second.extent.length);
      it->second.pending = false;
    }
    if (written) it->second.extent.unwritten = false;
  }
  // Merge neighbours back together.
  auto it = map_.lower_bound(first);
  if (it != map_.begin()) --it;
  while (it != map_.end() && it->first <= end) {
    auto next = std::next(it);
    if (next == map_.end()) break;
    if (mergeable(it->second, next->second)) {
      it->second.extent.length += next->second.extent.length;
      map_.erase(next);
    } else {
      it = next;
    }
  }
  return on_disk;
}

std::vector<Extent> ExtentMap::on_disk() const {
  std::vector<Extent> extents;
  for (const auto& [first, m] : map_) {
    if (!m.pending) extents.push_back(m.extent);
  }
  return extents;
}

uint64_t ExtentMap::start_of_last(uint64_t first, uint64_t stop, uint64_t count) const {
  uint64_t counted = 0;
  for (auto it = map_.lower_bound(stop); it != map_.begin();) {
    --it;
    if (it->second.extent.logical_end() <= first) break;
    if (++counted == count) return std::max(first, it->first);
  }
  return first;
}

uint64_t ExtentMap::end_block() const {
  return map_.empty() ? 0 : map_.rbegin()->second.extent.logical_end();
}

}  // namespace stripefs::fs
