#include "fs/core/interval_set.hpp"

#include <gtest/gtest.h>

#include <random>
#include <set>

namespace stripefs::fs {
namespace {

TEST(IntervalSet, MatchesASetOfValues) {
  IntervalSet s;
  std::set<uint64_t> model;
  std::mt19937_64 rng(5);
  for (int i = 0; i < 5000; ++i) {
    const uint64_t a = rng() % 300, b = a + rng() % 40;
    const int op = static_cast<int>(rng() % 3);
    uint64_t expected = 0;
    for (uint64_t v = a; v < b; ++v) expected += (op == 0) ? !model.contains(v) : model.contains(v);
    if (op == 0) {
      ASSERT_EQ(s.add(a, b), expected);
      for (uint64_t v = a; v < b; ++v) model.insert(v);
    } else if (op == 1) {
      ASSERT_EQ(s.remove(a, b), expected);
      for (uint64_t v = a; v < b; ++v) model.erase(v);
    } else {
      ASSERT_EQ(s.count(a, b), expected);
      // The start of the run holding the first value >= a.
      auto m = model.lower_bound(a);
      uint64_t start = UINT64_MAX;
      if (m != model.end()) {
        start = *m;
        while (start > 0 && model.contains(start - 1)) --start;
      }
      ASSERT_EQ(s.first_run_reaching(a), start) << a;
    }
    ASSERT_EQ(s.size(), model.size());
  }
}

}  // namespace
}  // namespace stripefs::fs
