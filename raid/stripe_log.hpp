// What the Volume needs to close the RAID5/6 write hole. raid/ declares it; journal/
// implements it; whoever assembles the array plugs it in.
//
// A partial-stripe write changes some data chunks and the parity in place, member by member:
// a crash in between leaves a stripe whose parity matches neither the old nor the new data,
// and if a member is then missing its chunk is rebuilt wrong (the write hole). With a stripe
// log, the new contents are durable in the log before any in-place write, and replayed after
// a crash, so every stripe is consistent again, degraded or not.
#pragma once

#include <cstdint>
#include <functional>
#include <span>
#include <vector>

#include "raid/result.hpp"

namespace stripefs {

class Volume;

struct StripeLogWrite {
  unsigned member;
  uint64_t offset;  // bytes, absolute on the member; a sector multiple
  std::span<const std::byte> data;
};

class StripeLog {
 public:
  virtual ~StripeLog() = default;

  // Makes one partial stripe's writes (new data and parity) durable in the log, then calls
  // `logged` with a token (or an error: then nothing may be written in place). The data
  // must stay unchanged until `logged` runs.
  virtual void log(uint64_t stripe, std::vector<StripeLogWrite> writes,
                   std::function<void(Result<uint64_t>)> logged) = 0;
  // Full stripes bypass the log. Replay must then never bring back an older logged write of
  // the same stripe over them: `go` runs once no such write can be replayed any more, or
  // with the error that keeps the log from getting there (then the write must not happen).
  virtual void before_bypass(std::vector<uint64_t> stripes,
                             std::function<void(Result<void>)> go) = 0;
  // The writes logged under `token` completed on the members.
  virtual void written(uint64_t token) = 0;
  // After a crash and before any other I/O: rewrites every logged write to the active
  // members of `volume`. Returns how many writes were replayed. A member whose write fails
  // is failed (as md does) and replay goes on while the array can run without it; the
  // records then stay in the log until the caller has recorded that failure durably and
  // calls checkpoint() (Array::open does). Blocking.
  virtual Result<uint64_t> replay(Volume& volume) = 0;
  // True when the log was rebuilt empty (forced over a damaged one): what it held is gone,
  // so after an unclean shutdown every stripe must be resynced.
  virtual bool lost_records() const { return false; }
  // Releases every record whose in-place write completed (made durable first), so a clean
  // shutdown leaves nothing to replay. Blocking.
  virtual Result<void> checkpoint() { return {}; }
  // Member `role`, away until now, is being re-added (before any new write): a log kept on
  // the members gives it a current copy. Blocking.
  virtual Result<void> member_returned(unsigned role) {
    (void)role;
    return {};
  }
};

}  // namespace stripefs
