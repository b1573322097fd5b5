// The array's members as the Volume drives them: which are in service, taking one out when
// it fails, holding writes that skip a failed member until its failure is recorded durably,
// and putting a member back (re-add, rebuild).
//
// A member being rebuilt (md's recovery) is out of service for reads, but in sync for the
// stripes below its recovery point, which the rebuild moves up one stripe at a time, under
// that stripe's lock: writes to those stripes go to it like to any member, so it never falls
// behind what the rebuild has already done.
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
  // A role's device may change while I/O runs (swap_device), so it is read atomically, here
  // and by submit_ios.
  Member* operator[](unsigned index) const { return load_member(members_, index); }
  // Every role's member, nullptr where missing: what submit_ios takes.
  std::span<Member* const> all() const { return members_; }

  bool active(unsigned member) const { return active_[member].load(std::memory_order_acquire); }
  std::function<bool(unsigned)> active_fn() const {
    return [this](unsigned member) { return active(member); };
  }
  // Members out of service (being rebuilt included).
  unsigned missing() const;

  // In sync for `stripe`: in service, or being rebuilt and past it. Writes go to the members
  // in sync for their stripe, and so do the reads a partial-stripe write needs.
  bool in_sync(unsigned member, uint64_t stripe) const {
    return active(member) || stripe < recovered_[member].load(std::memory_order_acquire);
  }
  std::function<bool(unsigned)> in_sync_fn(uint64_t stripe) const {
    return [this, stripe](unsigned member) { return in_sync(member, stripe); };
  }
  // Written to at all: in service or being rebuilt (what a flush must reach).
  bool written(unsigned member) const { return active(member) || recovering(member); }

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

  // Role `member`, out of service, is rebuilt onto `device` (which must outlive the set),
  // in sync below stripe `recovered` from now on.
  void start_recovery(unsigned member, Member* device, uint64_t recovered);
  // Stripes below `stripes` are rebuilt: in sync from now on. Called under the lock of
  // stripe `stripes - 1`. Only if the member is still being rebuilt onto the device of
  // `incarnation` (the rebuild's): false, and nothing changed, once it failed or another
  // device took the role.
  bool set_recovered(unsigned member, uint64_t stripes, uint64_t incarnation);
  uint64_t recovered(unsigned member) const {
    return recovered_[member].load(std::memory_order_acquire);
  }
  bool recovering(unsigned member) const {
    return recovering_[member].load(std::memory_order_acquire);
  }
  // The rebuild is complete: the member serves reads too.
  void finish_recovery(unsigned member);

  // Role `member`, in service, is served by `device` from now on (a hot replace puts its
  // ReplacingMember in, and the replacement at the end). I/O already submitted finishes on
  // the device it went to, which must outlive it; nothing else changes: the role stays in
  // service, its incarnation the same.
  void swap_device(unsigned member, Member* device);

  // Which device a role holds: bumped each time a new device takes the role. A failure
  // remembers the incarnation that failed, so whoever records it late (after a rebuild gave
  // the role to a new device) can tell it is about the old one.
  uint64_t incarnation(unsigned member) const {
    return incarnation_[member].load(std::memory_order_acquire);
  }
  uint64_t failed_incarnation(unsigned member) const {
    return failed_incarnation_[member].load(std::memory_order_acquire);
  }

 private:
  std::vector<Member*> members_;
  std::array<std::atomic<bool>, Geometry::kMaxMembers> active_{};
  // Being rebuilt: in sync for the stripes below recovered_ (0 when not being rebuilt).
  std::array<std::atomic<bool>, Geometry::kMaxMembers> recovering_{};
  std::array<std::atomic<uint64_t>, Geometry::kMaxMembers> recovered_{};
  std::array<std::atomic<uint64_t>, Geometry::kMaxMembers> incarnation_{};
  std::array<std::atomic<uint64_t>, Geometry::kMaxMembers> failed_incarnation_{};

  std::mutex mutex_;  // guards listener_, unrecorded_, held_
  FailureListener listener_;
  uint64_t unrecorded_ = 0;  // bit per member whose failure is not yet recorded
  std::vector<std::function<void()>> held_;
};

}  // namespace stripefs
