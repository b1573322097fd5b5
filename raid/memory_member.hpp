// A member held in memory, for unit tests: requests complete synchronously inside submit().
#pragma once

#include <memory>
#include <mutex>
#include <vector>

#include "raid/member.hpp"

namespace stripefs {

class MemoryMember final : public Member {
 public:
  MemoryMember(std::string name, uint64_t size, DeviceLimits limits = {});

  void submit(MemberRequest request) override;

  // Direct access for tests that inspect or damage the contents.
  std::span<std::byte> contents() { return {data_.get(), size()}; }

 private:
  std::unique_ptr<std::byte[]> data_;
  std::mutex mutex_;  // makes each request atomic with respect to others
};

}  // namespace stripefs
