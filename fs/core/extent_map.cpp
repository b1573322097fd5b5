#include "fs/core/extent_map.hpp"

#include <algorithm>

namespace stripefs::fs {

MemExtent MemExtent::slice(uint64_t from, uint64_t to) const {
  MemExtent part = *this;
  part.extent.logical = from;
  part.extent.physical = extent.physical + (from - extent.logical);
  part.extent.length = static_cast<uint32_t>(to - from);
  if (replaces != 0) part.replaces = replaces + (from - extent.logical);
  return part;
}

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

namespace {
// Where a read takes file block `b` of `m` from: 0 (zeros, or the cache) unless written and
// on disk. The one rule for readable_run's answers, from the tree and for the index alike.
uint64_t readable_block(const MemExtent& m, uint64_t b) {
  return (m.extent.unwritten || m.pending) ? 0 : m.extent.physical + (b - m.extent.logical);
}
}  // namespace

std::pair<uint64_t, uint64_t> ExtentMap::readable_run(uint64_t b, uint64_t limit) const {
  const auto fill = [this](uint64_t first, uint64_t end, uint64_t* out) {
    return fill_answers(first, end, out);
  };
  if (auto indexed = index_.find(b, limit, map_.size(), end_block(), fill)) return *indexed;
  auto e = map_.upper_bound(b);
  if (e != map_.begin()) {
    auto p = std::prev(e);
    const Extent& x = p->second.extent;
    if (b < x.logical_end()) {
      return {readable_block(p->second, b), std::min(x.logical_end() - b, limit)};
    }
  }
  return {0, std::min(e == map_.end() ? UINT64_MAX : e->first - b, limit)};
}

size_t ExtentMap::fill_answers(uint64_t first, uint64_t end, uint64_t* out) const {
  std::fill(out, out + (end - first), 0);  // holes
  size_t extents = 0;
  auto it = map_.upper_bound(first);
  if (it != map_.begin()) --it;
  for (; it != map_.end() && it->first < end; ++it) {
    const MemExtent& m = it->second;
    const Extent& x = m.extent;
    if (x.logical_end() <= first) continue;
    ++extents;
    const uint64_t from = std::max(first, x.logical), to = std::min(end, x.logical_end());
    for (uint64_t b = from; b < to; ++b) out[b - first] = readable_block(m, b);
  }
  return extents;
}

void ExtentMap::reindex(uint64_t first, uint64_t end) {
  index_.changed(first, end, map_.size(),
                 [this](uint64_t a, uint64_t b, uint64_t* out) { return fill_answers(a, b, out); });
}

void ExtentMap::insert(Extent extent) {
  MemExtent m{extent, false};
  uint64_t touched_end = extent.logical_end();
  if (auto old = map_.find(extent.logical); old != map_.end()) {
    touched_end = std::max(touched_end, old->second.extent.logical_end());
  }
  auto [it, inserted] = map_.insert_or_assign(extent.logical, m);
  // Merge with the previous and next extents where both are contiguous. (An erase moves
  // the tree's entries: iterators are found again after one.)
  uint64_t key = extent.logical;
  if (it != map_.begin()) {
    auto prev = std::prev(it);
    if (mergeable(prev->second, it->second)) {
      prev->second.extent.length += it->second.extent.length;
      key = prev->first;
      map_.erase(it);
      it = map_.find(key);
    }
  }
  if (auto next = std::next(it); next != map_.end() && mergeable(it->second, next->second)) {
    it->second.extent.length += next->second.extent.length;
    map_.erase(next);
  }
  touch(key, std::max(touched_end, map_.at(key).extent.logical_end()));
  reindex(extent.logical, touched_end);
}

std::vector<RemovedRun> ExtentMap::remove(uint64_t first, uint64_t end) {
  std::vector<RemovedRun> removed;
  auto it = map_.upper_bound(first);
  if (it != map_.begin()) --it;
  while (it != map_.end() && it->first < end) {
    const MemExtent m = it->second;
    const Extent e = m.extent;
    if (e.logical_end() <= first) {
      ++it;
      continue;
    }
    it = map_.erase(it);
    touch(e.logical, e.logical_end());
    const uint64_t cut_begin = std::max(first, e.logical);
    const uint64_t cut_end = std::min(end, e.logical_end());
    if (e.logical < cut_begin) {
      const MemExtent head = m.slice(e.logical, cut_begin);
      map_.emplace(head.extent.logical, head);
      it = map_.lower_bound(e.logical_end());  // (the emplace moved the tree's entries)
    }
    if (cut_end < e.logical_end()) {
      const MemExtent tail = m.slice(cut_end, e.logical_end());
      it = map_.emplace(tail.extent.logical, tail).first;
    }
    const MemExtent cut = m.slice(cut_begin, cut_end);
    removed.push_back({cut.extent.physical, cut_end - cut_begin, m.pending});
    if (cut.replaces != 0) removed.push_back({cut.replaces, cut_end - cut_begin, false});
  }
  reindex(first, end);
  return removed;
}

void ExtentMap::split_at(uint64_t file_block) {
  auto it = map_.upper_bound(file_block);
  if (it == map_.begin()) return;
  --it;
  MemExtent& m = it->second;
  if (m.extent.logical >= file_block || m.extent.logical_end() <= file_block) return;
  touch(m.extent.logical, m.extent.logical_end());
  const MemExtent tail = m.slice(file_block, m.extent.logical_end());
  m = m.slice(m.extent.logical, file_block);
  map_.emplace(file_block, tail);
}

void ExtentMap::replace(uint64_t first, uint64_t count, uint64_t physical) {
  split_at(first);
  split_at(first + count);
  touch(first, first + count);
  MemExtent& m = map_.at(first);
  m.replaces = m.extent.physical;
  m.extent.physical = physical;
  m.pending = true;
  reindex(first, first + count);
}

void ExtentMap::merge_around(uint64_t first, uint64_t end) {
  auto it = map_.lower_bound(first);
  if (it != map_.begin()) --it;
  while (it != map_.end() && it->first <= end) {
    auto next = std::next(it);
    if (next == map_.end()) break;
    if (mergeable(it->second, next->second)) {
      touch(it->first, next->second.extent.logical_end());
      it->second.extent.length += next->second.extent.length;
      const uint64_t key = it->first;
      map_.erase(next);
      it = map_.find(key);  // (the erase moved the tree's entries)
    } else {
      it = next;
    }
  }
}

Settled ExtentMap::settle(uint64_t first, uint64_t end, bool written) {
  split_at(first);
  split_at(end);
  touch(first, end);
  Settled settled;
  for (auto it = map_.lower_bound(first); it != map_.end() && it->first < end; ++it) {
    MemExtent& m = it->second;
    if (m.pending) {
      settled.used.emplace_back(m.extent.physical, m.extent.length);
      if (m.replaces != 0) settled.replaced.emplace_back(m.replaces, m.extent.length);
      m.pending = false;
      m.replaces = 0;
    }
    if (written) m.extent.unwritten = false;
  }
  merge_around(first, end);
  reindex(first, end);
  return settled;
}

std::vector<std::pair<uint64_t, uint64_t>> ExtentMap::abandon(uint64_t first, uint64_t end) {
  split_at(first);
  split_at(end);
  touch(first, end);
  std::vector<std::pair<uint64_t, uint64_t>> reserved;
  for (auto it = map_.lower_bound(first); it != map_.end() && it->first < end;) {
    MemExtent& m = it->second;
    if (!m.pending) {
      ++it;
      continue;
    }
    reserved.emplace_back(m.extent.physical, m.extent.length);
    if (m.replaces == 0) {
      it = map_.erase(it);
      continue;
    }
    m.extent.physical = m.replaces;
    m.replaces = 0;
    m.pending = false;
    ++it;
  }
  merge_around(first, end);
  reindex(first, end);
  return reserved;
}

bool ExtentMap::continues(const MemExtent& a, const MemExtent& b) {
  const auto stored = [](const MemExtent& m) { return !m.pending || m.replaces != 0; };
  const auto physical = [](const MemExtent& m) {
    return m.pending ? m.replaces : m.extent.physical;
  };
  return stored(a) && stored(b) && a.extent.unwritten == b.extent.unwritten &&
         a.extent.logical_end() == b.extent.logical && physical(a) + a.extent.length == physical(b);
}

ExtentMap::Map::const_iterator ExtentMap::run_start(Map::const_iterator it) const {
  while (it != map_.begin() && continues(std::prev(it)->second, it->second)) --it;
  return it;
}

std::vector<Extent> ExtentMap::on_disk(uint64_t from, uint64_t to) const {
  std::vector<Extent> extents;
  if (from == 0 && to == UINT64_MAX) extents.reserve(map_.size());
  // The merge below depends on where its run began (the length limit): it starts there.
  auto it = map_.upper_bound(from);
  if (it != map_.begin()) it = run_start(std::prev(it));
  const MemExtent* taken = nullptr;  // the entry extents.back() took last, while it takes more
  for (; it != map_.end(); ++it) {
    const MemExtent& m = it->second;
    if (m.pending && m.replaces == 0) {  // not on disk yet: a commit stores nothing of it
      taken = nullptr;
      continue;
    }
    if (taken != nullptr && continues(*taken, m) &&
        uint64_t{extents.back().length} + m.extent.length <= kMaxExtentLength) {
      extents.back().length += m.extent.length;
      taken = &m;
      continue;
    }
    Extent e = m.extent;
    if (m.pending) e.physical = m.replaces;
    if (e.logical >= to) break;
    // Before `from`: merged into, never listed.
    if (!extents.empty() && extents.back().logical < from) extents.pop_back();
    extents.push_back(e);
    taken = &m;
  }
  if (!extents.empty() && extents.back().logical < from) extents.pop_back();
  return extents;
}

void ExtentMap::touch(uint64_t first, uint64_t end) {
  constexpr size_t kMaxRanges = 4096;  // beyond this a commit lists the whole map anyway
  if (changed_all_ || first >= end) return;
  if (!changed_.empty()) {
    auto& last = changed_.back();
    if (first <= last.second && last.first <= end) {
      last = {std::min(first, last.first), std::max(end, last.second)};
      return;
    }
  }
  if (changed_.size() == kMaxRanges) {
    changed_all_ = true;
    changed_.clear();
    return;
  }
  changed_.emplace_back(first, end);
}

std::optional<std::vector<std::pair<uint64_t, uint64_t>>> ExtentMap::changed() const {
  if (changed_all_) return std::nullopt;
  std::vector<std::pair<uint64_t, uint64_t>> ranges;
  ranges.reserve(changed_.size());
  for (auto [a, b] : changed_) {
    // Extents listed the same up to the run (as on_disk() merges) holding the last entry
    // before `a`: what starts before that run is unchanged. After `b`, the entries are the
    // same, and the listing agrees again from the first entry after `b` that begins a run
    // (its predecessor unchanged).
    uint64_t from = 0;
    if (auto it = map_.lower_bound(a); it != map_.begin()) {
      from = std::min(a, run_start(std::prev(it))->first);
    }
    uint64_t to = UINT64_MAX;
    if (auto it = map_.lower_bound(b); it != map_.end()) {
      for (++it; it != map_.end() && continues(std::prev(it)->second, it->second);) ++it;
      if (it != map_.end()) to = it->first;
    }
    ranges.emplace_back(from, std::max(to, b));
  }
  std::sort(ranges.begin(), ranges.end());
  std::vector<std::pair<uint64_t, uint64_t>> merged;
  for (const auto& r : ranges) {
    if (!merged.empty() && r.first <= merged.back().second) {
      merged.back().second = std::max(merged.back().second, r.second);
    } else {
      merged.push_back(r);
    }
  }
  return merged;
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

uint64_t ExtentMap::written_end() const {
  for (auto it = map_.rbegin(); it != map_.rend(); ++it) {
    const MemExtent& m = it->second;
    if (m.pending ? m.replaces != 0 : !m.extent.unwritten) return m.extent.logical_end();
  }
  return 0;
}

}  // namespace stripefs::fs
