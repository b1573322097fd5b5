// What the Volume needs from a write-intent bitmap. raid/ declares it; journal/ implements
// it (md's internal bitmap); whoever assembles the array plugs it in.
//
// Ranges are byte ranges of the members' data areas (from the data offset, the same on
// every member): a stripe row, or a run of rows, may be inconsistent while written.
#pragma once

#include <cstdint>
#include <functional>
#include <utility>
#include <vector>

#include "raid/member.hpp"

namespace stripefs {

class WriteIntent {
 public:
  virtual ~WriteIntent() = default;

  // Records [begin, end) as being written, durably on every active member, then calls
  // `ready` (on any thread, possibly inside this call). Only then may data go out.
  virtual void begin_write(uint64_t begin, uint64_t end, std::function<void()> ready) = 0;
  // The write begun over [begin, end) is complete on the members. The range may be
  // recorded clean again once it has been idle for a while and the members were flushed.
  virtual void end_write(uint64_t begin, uint64_t end) = 0;

  // After an unclean shutdown: the ranges that were being written, so may be inconsistent
  // (sorted, disjoint). Only these need a resync.
  virtual std::vector<std::pair<uint64_t, uint64_t>> ranges_to_resync() const = 0;
  // [begin, end) was resynced: its record may be cleared like any idle range.
  virtual void resynced(uint64_t begin, uint64_t end) = 0;
  // What a member last current at array events `events` may have missed: every range
  // recorded as written, since the record is never cleared while a member is missing; or
  // everything, when the record cannot be trusted or was cleared after `events` (md's
  // events_cleared check). Only these ranges need rebuilding when it returns.
  virtual std::vector<std::pair<uint64_t, uint64_t>> ranges_missed_since(uint64_t events) const = 0;
  // The array's events count, each time it changes: clearing the record notes it.
  virtual void set_events(uint64_t events) = 0;
  // A member that was away is back and current (rebuilt): it gets the whole record, which it
  // missed while away. Blocking.
  virtual Result<void> member_returned(Member& member) = 0;
};

}  // namespace stripefs
