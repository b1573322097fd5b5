// A writer for tests that run it beside background work (a rebuild, a replace): random 4 KiB
// blocks (partial stripes) and now and then a whole stripe, with a shadow copy of the volume
// kept in step, so the test can check every byte afterwards.
#pragma once

#include <gtest/gtest.h>

#include <atomic>
#include <cstring>
#include <mutex>
#include <random>

#include "raid/volume.hpp"
#include "unit/raid/test_util.hpp"

namespace stripefs::test {

// Writes until `stop`; the shadow and the volume change together under `mutex`. `writes`
// counts them (tests wait on it).
inline void write_randomly(Volume& volume, AlignedBuffer& shadow, std::mutex& mutex,
                           const std::atomic<bool>& stop, uint64_t seed,
                           std::atomic<uint64_t>& writes) {
  std::mt19937_64 rng(seed);
  const uint64_t stripe = volume.geometry().stripe_data_size();
  while (!stop.load()) {
    const bool whole = rng() % 8 == 0;
    const uint64_t length = whole ? stripe : 4096;
    const uint64_t at =
        whole ? rng() % (volume.size() / stripe) * stripe : rng() % (volume.size() / 4096) * 4096;
    AlignedBuffer data = random_buffer(length, rng());
    std::lock_guard lock(mutex);
    auto w = volume.write(at, data.span());
    ASSERT_TRUE(w) << w.error().message;
    std::memcpy(shadow.data() + at, data.data(), length);
    ++writes;
  }
}

}  // namespace stripefs::test
