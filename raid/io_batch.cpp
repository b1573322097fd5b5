#include "raid/io_batch.hpp"

#include <algorithm>
#include <climits>
#include <memory>
#include <mutex>

#include "raid/join.hpp"

namespace stripefs {

namespace {

constexpr size_t kMaxIovecs = IOV_MAX;

// Requests are cut at multiples of this: max_io rounded down to the preferred I/O size.
uint64_t cut_boundary(const DeviceLimits& limits) {
  const uint64_t preferred = std::max<uint64_t>(preferred_io_size(limits), limits.logical_block);
  const uint64_t max_io = std::max<uint64_t>(limits.max_io, preferred);
  return max_io / preferred * preferred;
}

}  // namespace

std::vector<MergedRequest> merge_ios(std::vector<PlannedIo> ios,
                                     std::span<const DeviceLimits* const> limits) {
  std::sort(ios.begin(), ios.end(), [](const PlannedIo& a, const PlannedIo& b) {
    return a.member != b.member ? a.member < b.member : a.offset < b.offset;
  });
  std::vector<MergedRequest> out;
  uint64_t run_end = 0;
  uint64_t run_length = 0;
  for (const PlannedIo& io : ios) {
    const uint64_t boundary = cut_boundary(*limits[io.member]);
    uint64_t offset = io.offset;
    std::byte* data = io.data;
    uint64_t remaining = io.length;
    while (remaining > 0) {
      // Never let one piece cross a boundary: split it there.
      const uint64_t to_boundary = boundary - offset % boundary;
      const uint64_t length = std::min(remaining, to_boundary);
      MergedRequest* run = out.empty() ? nullptr : &out.back();
      const bool joins = run != nullptr && run->member == io.member && run_end == offset &&
                         offset % boundary != 0 && run_length + length <= boundary &&
                         run->iov.size() < kMaxIovecs;
      if (!joins) {
        out.push_back(MergedRequest{io.member, offset, {}, {}, 0});
        run = &out.back();
        run_length = 0;
      }
      iovec& last = run->iov.empty() ? run->iov.emplace_back(iovec{data, 0}) : run->iov.back();
      if (static_cast<std::byte*>(last.iov_base) + last.iov_len == data) {
        last.iov_len += length;  // contiguous in memory too: one iovec
      } else {
        run->iov.push_back({data, length});
      }
      if (run->tags.empty() || run->tags.back() != io.tag) run->tags.push_back(io.tag);
      ++run->planned;
      run_length += length;
      run_end = offset + length;
      offset += length;
      data += length;
      remaining -= length;
    }
  }
  return out;
}

void submit_ios(std::span<Member* const> members, MemberOp op, std::vector<PlannedIo> ios, bool fua,
                std::function<void(std::vector<FailedIo>)> done) {
  if (ios.empty()) {
    done({});
    return;
  }
  // Missing members (nullptr) get no I/O; their slot only keeps indexes aligned.
  // Each slot read once: a role's device may be swapped meanwhile (a hot replace).
  static const DeviceLimits kNone{};
  std::vector<Member*> devices(members.size());
  std::vector<const DeviceLimits*> limits;
  limits.reserve(members.size());
  for (size_t i = 0; i < members.size(); ++i) {
    devices[i] = load_member(members, i);
    limits.push_back(devices[i] ? &devices[i]->limits() : &kNone);
  }
  std::vector<MergedRequest> requests = merge_ios(std::move(ios), limits);

  // One allocation per batch: the count-down, the failures and the caller's callback
  // together (the join's own callback holds only a pointer back, so it needs none).
  struct Batch {
    Batch(size_t parts, std::function<void(std::vector<FailedIo>)> then)
        : done(std::move(then)), join(parts, [this](Result<void>) { done(std::move(failures)); }) {}
    std::function<void(std::vector<FailedIo>)> done;
    std::mutex mutex;  // guards failures
    std::vector<FailedIo> failures;
    Join join;
  };
  auto batch = std::make_shared<Batch>(requests.size(), std::move(done));
  for (MergedRequest& merged : requests) {
    MemberRequest request;
    request.op = op;
    request.offset = merged.offset;
    request.fua = fua;
    request.iov = std::move(merged.iov);
    request.merged = merged.planned;
    const uint64_t expected = request.length();
    Member* device = devices[merged.member];
    request.done = [batch, device, op, member = merged.member, tags = std::move(merged.tags),
                    expected](int64_t result) {
      const bool ok = result >= 0 && static_cast<uint64_t>(result) == expected;
      device->count(op, ok ? expected : 0, ok);
      if (!ok) {
        const int error = result < 0 ? static_cast<int>(-result) : EIO;
        std::lock_guard lock(batch->mutex);
        for (uint32_t tag : tags) batch->failures.push_back({member, tag, error});
      }
      batch->join.finish();
    };
    device->start(std::move(request));
  }
}

std::future<std::vector<FailedIo>> submit_ios_async(std::span<Member* const> members, MemberOp op,
                                                    std::vector<PlannedIo> ios) {
  auto done = std::make_shared<std::promise<std::vector<FailedIo>>>();
  auto future = done->get_future();
  submit_ios(members, op, std::move(ios), false,
             [done](std::vector<FailedIo> failed) { done->set_value(std::move(failed)); });
  return future;
}

}  // namespace stripefs
