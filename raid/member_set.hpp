// The array's members as the Volume drives them: which are in service, taking one out when
// it fails, holding writes that skip a failed member until its failure is recorded durably,
// and putting a member back (re-add, rebuild).
//
// Lock order: mutex_ is a leaf (nothing is called under it but the bookkeeping here).
#pragma once

#include <array>
#include <atomic>
#include <functional>
#include <mutex>
#include <span>
#include <vector>

#include "raid/geometry.hpp"
#include "raid/io_batch.hpp"
#include "raid/member.hpp"
#include "raid/result.hpp"

namespace stripefs {

class MemberSet {
 public:
  using FailureListener = std::function<void(unsigned member, const Error& why)>;

  // `members[i]` plays role i; nullptr for a member that is missing (never in service).
  explicit MemberSet(std::vector<Member*> members);

  unsigned size() const { return static_cast<unsigned>(members_.size()); }
  Member* operator[](unsigned index) const { return members_[index]; }
  // Every role's member, nullptr where missing: what submit_ios takes.
  std::span<Member* const> all() const { return members_; }

  bool active(unsigned member) const { return active_[member].load(std::memory_order_acquire); }
  std::function<bool(unsigned)> active_fn() const {
    return [this](unsigned member) { return active(member); };
  }
  unsigned missing() const;

  // Takes a member out of service. The listener hears of it once per member, on the thread
  // that noticed, and must then record it durably and call failure_recorded(): until then
  // after_failures_recorded() holds its continuations (as md holds writes until its
  // superblock update), so a crash can never bring the failed member back as current.
  void fail(unsigned member, const Error& why);
  // fail() for every member a batch of member I/Os found failing.
  void note_failures(const std::vector<FailedIo>& failures);
  void set_failure_listener(FailureListener listener);
  void failure_recorded(unsigned member);
  // Runs `then` at once, or once every failure reported to the listener is recorded.
  void after_failures_recorded(std::function<void()> then);

  // Out of service silently (a member being re-added), and back.
  void hold_out(unsigned member);
  void restore(unsigned member);

 private:
  std::vector<Member*> members_;
  std::array<std::atomic<bool>, Geometry::kMaxMembers> active_{};

  std::mutex mutex_;  // guards listener_, unrecorded_, held_
  FailureListener listener_;
  uint64_t unrecorded_ = 0;  // bit per member whose failure is not yet recorded
  std::vector<std::function<void()>> held_;
};

}  // namespace stripefs
