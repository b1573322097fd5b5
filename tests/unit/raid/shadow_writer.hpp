// A writer for tests that run it beside background work (a rebuild, a replace): random 4 KiB
// blocks (partial stripes) and now and then a whole stripe, with a shadow copy of the volume
// kept in step, so the test can check every byte afterwards.
#pragma once

#include <gtest/gtest.h>

#include <atomic>
#include <cstring>
#include <mutex>
#include <random>
#include <utility>

#include "raid/volume.hpp"
#include "unit/raid/test_util.hpp"

namespace stripefs::test {

// The next write of such a writer: where, and what (a 4 KiB block, or one time in 8 a whole
// stripe).
inline std::pair<uint64_t, AlignedBuffer> random_write(const Volume& volume, std::mt19937_64& rng) {
  const uint64_t stripe = volume.geometry().stripe_data_size();
  const bool whole = rng() % 8 == 0;
  const uint64_t length = whole ? stripe : 4096;
  const uint64_t at =
      whole ? rng() % (volume.size() / stripe) * stripe : rng() % (volume.size() / 4096) * 4096;
  return {at, random_buffer(length, rng())};
}

// Writes until `stop`; the shadow and the volume change together under `mutex`. `writes`
// counts them (tests wait on it).
inline void write_randomly(Volume& volume, AlignedBuffer& shadow, std::mutex& mutex,
                           const std::atomic<bool>& stop, uint64_t seed,
                           std::atomic<uint64_t>& writes) {
  std::mt19937_64 rng(seed);
  while (!stop.load()) {
    auto [at, data] = random_write(volume, rng);
    const uint64_t length = data.size();
    std::lock_guard lock(mutex);
    auto w = volume.write(at, data.span());
    ASSERT_TRUE(w) << w.error().message;
    std::memcpy(shadow.data() + at, data.data(), length);
    ++writes;
  }
}

}  // namespace stripefs::test
