#include "fs/core/interval_set.hpp"

#include <algorithm>

namespace stripefs::fs {

uint64_t IntervalSet::count(uint64_t first, uint64_t end) const {
  uint64_t n = 0;
  auto it = runs_.upper_bound(first);
  if (it != runs_.begin()) --it;
  for (; it != runs_.end() && it->first < end; ++it) {
    const uint64_t a = std::max(first, it->first), b = std::min(end, it->second);
    if (a < b) n += b - a;
  }
  return n;
}

uint64_t IntervalSet::remove(uint64_t first, uint64_t end) {
  if (first >= end) return 0;
  uint64_t removed = 0;
  auto it = runs_.upper_bound(first);
  if (it != runs_.begin()) --it;
  while (it != runs_.end() && it->first < end) {
    const uint64_t a = it->first, b = it->second;
    if (b <= first) {
      ++it;
      continue;
    }
    it = runs_.erase(it);
    if (a < first) runs_.emplace(a, first);
    if (end < b) it = runs_.emplace(end, b).first;
    removed += std::min(b, end) - std::max(a, first);
  }
  size_ -= removed;
  return removed;
}

uint64_t IntervalSet::add(uint64_t first, uint64_t end) {
  if (first >= end) return 0;
  const uint64_t before = count(first, end);
  // Absorb every run that touches [first, end).
  auto it = runs_.upper_bound(first);
  if (it != runs_.begin() && std::prev(it)->second >= first) --it;
  uint64_t a = first, b = end;
  while (it != runs_.end() && it->first <= end) {
    a = std::min(a, it->first);
    b = std::max(b, it->second);
    size_ -= it->second - it->first;
    it = runs_.erase(it);
  }
  runs_.emplace(a, b);
  size_ += b - a;
  return (end - first) - before;
}

uint64_t IntervalSet::first_run_reaching(uint64_t value) const {
  auto it = runs_.upper_bound(value);
  if (it != runs_.begin() && std::prev(it)->second > value) return std::prev(it)->first;
  return it == runs_.end() ? UINT64_MAX : it->first;
}

}  // namespace stripefs::fs
