// Turns the member I/Os of one Volume operation into as few, as large and as well aligned
// device requests as possible: sorted by member offset, contiguous neighbours merged (their
// buffers become one iovec list), and cut so no request exceeds the member's max_io or
// crosses a multiple of it (rounded to the optimal I/O size) — requests stay aligned to the
// device's limits.
#pragma once

#include <cstdint>
#include <functional>
#include <future>
#include <span>
#include <vector>

#include "raid/member.hpp"

namespace stripefs {

struct PlannedIo {
  unsigned member;
  uint64_t offset;  // bytes, absolute on the member
  std::byte* data;
  uint64_t length;
  uint32_t tag;  // the caller's: reported back if this I/O fails
};

struct FailedIo {
  unsigned member;
  uint32_t tag;
  int error;  // errno
};

struct MergedRequest {
  unsigned member;
  uint64_t offset;
  std::vector<iovec> iov;
  std::vector<uint32_t> tags;
  uint32_t planned = 0;  // the planned I/Os (or pieces of them) in it
};

// The member requests `ios` become. `limits[m]` are member m's limits. Pure; exposed for tests.
std::vector<MergedRequest> merge_ios(std::vector<PlannedIo> ios,
                                     std::span<const DeviceLimits* const> limits);

// Submits `ios` (all of kind `op`) to `members` and calls `done` once with every failure.
void submit_ios(std::span<Member* const> members, MemberOp op, std::vector<PlannedIo> ios, bool fua,
                std::function<void(std::vector<FailedIo>)> done);
// The same, with a future for every failure instead of a callback.
std::future<std::vector<FailedIo>> submit_ios_async(std::span<Member* const> members, MemberOp op,
                                                    std::vector<PlannedIo> ios);

}  // namespace stripefs
