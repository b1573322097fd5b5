#include "raid/power_cut_member.hpp"

#include <cerrno>
#include <cstring>
#include <future>
#include <unordered_set>
#include <utility>

namespace stripefs {

namespace {

constexpr uint64_t kSector = 512;
constexpr uint64_t kTearBlock = 4096;  // the unit a cut keeps or loses

DeviceLimits with_volatile_cache(DeviceLimits limits) {
  limits.volatile_cache = true;
  return limits;
}

// Sends one request to `inner` and waits for it (inline for the members this wrapper takes).
int64_t run(Member& inner, MemberOp op, uint64_t offset, std::vector<iovec> iov, bool fua) {
  std::promise<int64_t> result;
  std::future<int64_t> answer = result.get_future();
  MemberRequest request;
  request.op = op;
  request.offset = offset;
  request.iov = std::move(iov);
  request.fua = fua;
  request.done = [&result](int64_t r) { result.set_value(r); };
  inner.submit(std::move(request));
  return answer.get();
}

// The cut's verdict for one block of one write: kept with probability `survive`.
bool survives(double survive, uint64_t seed, size_t write, uint64_t block) {
  if (survive <= 0) return false;
  uint64_t x = seed ^ (write * 0x9e3779b97f4a7c15ull) ^ (block * 0xc2b2ae3d27d4eb4full);
  x ^= x >> 30;
  x *= 0xbf58476d1ce4e5b9ull;
  x ^= x >> 27;
  x *= 0x94d049bb133111ebull;
  x ^= x >> 31;
  return static_cast<double>(x >> 11) * 0x1.0p-53 < survive;
}

}  // namespace

PowerCutMember::PowerCutMember(Member& inner)
    : Member("powercut:" + inner.name(), inner.size(), with_volatile_cache(inner.limits())),
      inner_(inner) {}

int64_t PowerCutMember::write_through(const MemberRequest& request) {
  const uint64_t length = request.length();
  Undo undo{request.offset, length, {}, request.fua};
  if (!request.fua) {
    undo.old.resize(length);
    const int64_t r =
        run(inner_, MemberOp::read, request.offset, {{undo.old.data(), undo.old.size()}}, false);
    if (r < 0) return r;
    if (static_cast<uint64_t>(r) != length) return -EIO;
  }
  const int64_t r = run(inner_, MemberOp::write, request.offset, request.iov, request.fua);
  // Kept even when the write failed: what it left is undone like any other write. A durable
  // write matters only over older volatile ones.
  if (!undo.durable || !undo_.empty()) undo_.push_back(std::move(undo));
  return r;
}

void PowerCutMember::submit(MemberRequest request) {
  int64_t result = -EIO;
  {
    std::lock_guard lock(mutex_);
    if (frozen_) {
      unanswered_.push_back(std::move(request));
      return;
    }
    if (!dead_) {
      switch (request.op) {
        case MemberOp::read:
          result = run(inner_, MemberOp::read, request.offset, request.iov, false);
          break;
        case MemberOp::write:
          result = write_through(request);
          break;
        case MemberOp::flush:
          result = run(inner_, MemberOp::flush, 0, {}, false);
          if (result >= 0) undo_.clear();
          break;
      }
    }
  }
  request.done(result);
}

void PowerCutMember::release_held() {
  std::vector<MemberRequest> held;
  {
    std::lock_guard lock(mutex_);
    if (!dead_) return;  // a live device answers what it holds itself
    frozen_ = false;
    held = std::exchange(unanswered_, {});
  }
  for (MemberRequest& r : held) r.done(-EIO);
}

void PowerCutMember::freeze() {
  std::lock_guard lock(mutex_);
  frozen_ = true;
}

void PowerCutMember::thaw() {
  std::vector<MemberRequest> held;
  {
    std::lock_guard lock(mutex_);
    if (dead_) return;  // too late: release_held() answers them
    frozen_ = false;
    held = std::exchange(unanswered_, {});
  }
  for (MemberRequest& r : held) submit(std::move(r));
}

size_t PowerCutMember::power_off(double survive, uint64_t seed) {
  std::lock_guard lock(mutex_);
  dead_ = true;
  // Newest first: a sector some newer write kept keeps that write's bytes; otherwise a lost
  // write puts back what it replaced, which is what the older writes left (each undone in
  // turn, or kept).
  std::unordered_set<uint64_t> kept;
  size_t undone = 0;
  for (size_t i = undo_.size(); i-- > 0;) {
    Undo& w = undo_[i];
    uint64_t last_block = UINT64_MAX;
    uint64_t run_start = 0, run_end = 0;  // sectors to put back, written as one run
    bool open = false;
    auto put_back = [&] {
      if (!open) return;
      const uint64_t at = run_start - w.offset;
      (void)run(inner_, MemberOp::write, run_start, {{w.old.data() + at, run_end - run_start}},
                false);
      open = false;
    };
    for (uint64_t s = w.offset; s < w.offset + w.length; s += kSector) {
      const uint64_t block = s / kTearBlock;
      const bool keep = w.durable || survives(survive, seed, i, block);
      if (keep || kept.contains(s)) {
        if (keep) kept.insert(s);
        put_back();
        continue;
      }
      if (block != last_block) ++undone;
      last_block = block;
      if (!open || run_end != s) {
        put_back();
        run_start = s;
        open = true;
      }
      run_end = s + kSector;
    }
    put_back();
  }
  undo_.clear();
  return undone;
}

size_t PowerCutMember::volatile_writes() const {
  std::lock_guard lock(mutex_);
  size_t n = 0;
  for (const Undo& w : undo_) n += w.durable ? 0 : 1;
  return n;
}

}  // namespace stripefs
