#include "raid/member_set.hpp"

#include <cstring>

#include "raid/log.hpp"

namespace stripefs {

MemberSet::MemberSet(std::vector<Member*> members) : members_(std::move(members)) {
  for (size_t i = 0; i < members_.size(); ++i) active_[i].store(members_[i] != nullptr);
}

unsigned MemberSet::missing() const {
  unsigned missing = 0;
  for (unsigned i = 0; i < size(); ++i) missing += active(i) ? 0 : 1;
  return missing;
}

void MemberSet::fail(unsigned member, const Error& why) {
  FailureListener listener;
  {
    // The failure counts as unrecorded before any write can plan around the member: a
    // write that skips it is then held until the record is durable.
    std::lock_guard lock(mutex_);
    // A member being rebuilt fails too: nothing is written to it any more.
    if (!active_[member].load() && !recovering_[member].load()) return;
    failed_incarnation_[member].store(incarnation_[member].load(), std::memory_order_release);
    listener = listener_;
    if (listener) unrecorded_ |= uint64_t{1} << member;
    active_[member].store(false, std::memory_order_release);
    recovering_[member].store(false, std::memory_order_release);
    recovered_[member].store(0, std::memory_order_release);
  }
  raid_log().error("member {} ({}) failed: {}", member,
                   (*this)[member] ? (*this)[member]->name() : "missing", why.message);
  if (listener) listener(member, why);
}

void MemberSet::note_failures(const std::vector<FailedIo>& failures) {
  for (const FailedIo& f : failures) {
    fail(f.member, Error{f.error, fmt::format("I/O error: {}", std::strerror(f.error))});
  }
}

void MemberSet::set_failure_listener(FailureListener listener) {
  std::lock_guard lock(mutex_);
  listener_ = std::move(listener);
}

void MemberSet::failure_recorded(unsigned member) {
  std::vector<std::function<void()>> ready;
  {
    std::lock_guard lock(mutex_);
    unrecorded_ &= ~(uint64_t{1} << member);
    if (unrecorded_ == 0) ready = std::exchange(held_, {});
  }
  for (auto& then : ready) then();
}

void MemberSet::after_failures_recorded(std::function<void()> then) {
  {
    std::lock_guard lock(mutex_);
    if (unrecorded_ != 0) {
      held_.push_back(std::move(then));
      return;
    }
  }
  then();
}

void MemberSet::hold_out(unsigned member) {
  active_[member].store(false, std::memory_order_release);
}

void MemberSet::restore(unsigned member) {
  if ((*this)[member] != nullptr) active_[member].store(true, std::memory_order_release);
}

void MemberSet::start_recovery(unsigned member, Member* device, uint64_t recovered) {
  // The pointer is published by the stores below: whoever sees the member in sync for a
  // stripe (an acquire load) sees the device too. Under the lock, as set_recovered checks.
  std::lock_guard lock(mutex_);
  store_member(members_, member, device);
  incarnation_[member].fetch_add(1, std::memory_order_acq_rel);
  recovered_[member].store(recovered, std::memory_order_release);
  recovering_[member].store(true, std::memory_order_release);
}

void MemberSet::swap_device(unsigned member, Member* device) {
  store_member(members_, member, device);
}

bool MemberSet::set_recovered(unsigned member, uint64_t stripes, uint64_t incarnation) {
  std::lock_guard lock(mutex_);
  if (!recovering_[member].load() || incarnation_[member].load() != incarnation) return false;
  recovered_[member].store(stripes, std::memory_order_release);
  return true;
}

void MemberSet::finish_recovery(unsigned member) {
  std::lock_guard lock(mutex_);
  if (!recovering_[member].load()) return;  // it failed meanwhile
  active_[member].store(true, std::memory_order_release);
  recovering_[member].store(false, std::memory_order_release);
  recovered_[member].store(0, std::memory_order_release);
}

}  // namespace stripefs
