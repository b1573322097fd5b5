// Helpers shared by the raid unit tests.
#pragma once

#include <memory>
#include <random>
#include <vector>

#include "raid/aligned_buffer.hpp"
#include "raid/faulty_member.hpp"
#include "raid/memory_member.hpp"

namespace stripefs::test {

inline AlignedBuffer random_buffer(size_t size, uint64_t seed) {
  AlignedBuffer buffer(size);
  std::mt19937_64 rng(seed);
  auto* words = reinterpret_cast<uint64_t*>(buffer.data());
  for (size_t i = 0; i < size / 8; ++i) words[i] = rng();
  return buffer;
}

// An array of memory members, each behind a FaultyMember so tests can inject failures and
// read the log of requests.
struct MemoryArray {
  std::vector<std::unique_ptr<MemoryMember>> media;
  std::vector<std::unique_ptr<FaultyMember>> faulty;

  MemoryArray(unsigned count, uint64_t size, DeviceLimits limits = {}) {
    for (unsigned i = 0; i < count; ++i) {
      media.push_back(std::make_unique<MemoryMember>("mem" + std::to_string(i), size, limits));
      faulty.push_back(std::make_unique<FaultyMember>(*media.back()));
    }
  }
  std::vector<Member*> members() const {
    std::vector<Member*> out;
    for (auto& f : faulty) out.push_back(f.get());
    return out;
  }
};

}  // namespace stripefs::test
