// A set of uint64_t kept as disjoint half-open intervals: file blocks promised to delayed
// allocation, or in flight to the volume.
#pragma once
#include <cstdint>
#include <map>

namespace stripefs::fs {

class IntervalSet {
 public:
  // Adds [first, end); returns how many values were not in the set before.
  uint64_t add(uint64_t first, uint64_t end);
  // Removes [first, end); returns how many values were in the set.
  uint64_t remove(uint64_t first, uint64_t end);
  // How many values of [first, end) are in the set.
  uint64_t count(uint64_t first, uint64_t end) const;
  bool overlaps(uint64_t first, uint64_t end) const { return count(first, end) > 0; }
  // The start of the first run that holds `value` or a greater one (UINT64_MAX if none).
  uint64_t first_run_reaching(uint64_t value) const;
  // Calls f(a, b) for each run of the set within [first, end), clipped to it, in order.
  template <class F>
  void for_each(uint64_t first, uint64_t end, F&& f) const {
    auto it = runs_.upper_bound(first);
    if (it != runs_.begin()) --it;
    for (; it != runs_.end() && it->first < end; ++it) {
      const uint64_t a = it->first > first ? it->first : first;
      const uint64_t b = it->second < end ? it->second : end;
      if (a < b) f(a, b);
    }
  }
  uint64_t size() const { return size_; }
  bool empty() const { return size_ == 0; }

 private:
  std::map<uint64_t, uint64_t> runs_;  // first -> end
  uint64_t size_ = 0;
};

}  // namespace stripefs::fs
