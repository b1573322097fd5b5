// Assembly: reading every member's superblock and deciding which members form the array,
// which are stale, failed or returning, and what to tell the operator about each.
#pragma once

#include <span>
#include <string>
#include <vector>

#include "raid/member.hpp"
#include "raid/result.hpp"
#include "raid/superblock.hpp"

namespace stripefs {

struct Assembly {
  Superblock superblock;           // the freshest (highest events)
  std::vector<Member*> by_role;    // nullptr where a role is missing or kept out
  std::vector<std::string> notes;  // one line per member missing, stale or damaged
  // Kept out for being behind (stale, or recorded missing), not for failing: members that
  // may be re-added, rebuilt where the bitmap says the array was written since they left.
  struct Returning {
    unsigned role;
    Member* member;
    uint64_t events;   // its superblock's: when it was last current
    std::string note;  // why it is kept out, for when it cannot be re-added
  };
  std::vector<Returning> returning;
  // Spares of this array (their superblock says so): no role, kept for a rebuild.
  std::vector<Member*> spares;
  // Recorded as being rebuilt when the array stopped: they rejoin from their own
  // superblock's checkpoint (member bytes below which they are rebuilt; 0 for one that
  // missed events since, which is rebuilt whole).
  struct Recovering {
    unsigned role;
    Member* member;
    uint64_t checkpoint;
  };
  std::vector<Recovering> recovering;
  // Hot replaces an earlier run left under way (Superblock::replacement): the new device,
  // beside the role's device it copies, resumes its copy from its checkpoint (device bytes
  // copied and durable).
  struct Replacing {
    unsigned role;
    Member* member;
    Uuid uuid;  // its member_uuid
    uint64_t checkpoint;
  };
  std::vector<Replacing> replacing;
};

// Reads every member's superblock and decides which members form the array; the freshest
// (highest events) speaks for it. Spares of the array (Superblock::spare) are set apart in
// `spares`; they never speak for it, and are refused when they are all that is given. Refuses, with
// a line naming the member and field, a device that holds no stripefs superblock (ENODATA; with
// `force` it is kept out and named in `notes` instead, like a damaged one), members of different
// arrays or geometries, a role the array does not have, two members claiming one role with the same
// events (a copy of a member: EINVAL), and two members that were each run without the other
// (split brain, EUCLEAN). Of two claiming one role with different events, the older held it
// before another device took it over (a hot replace, a rebuild onto a new device): it is
// kept out and named in `notes`.
// A member whose superblock is damaged is kept out and named in `notes`. Members one event
// behind the freshest count as current (superblocks are written one member after another,
// and a crash between two writes must not cost a member). Members further behind, or
// recorded missing, are `returning`; members recorded faulty stay out. A returning member
// whose last run shared no member that is current now ran without them (a split brain): it
// is kept out with a note, not offered for re-add, as mdadm ignores such a member.
// With `force`, stale and failed members are brought back, freshest first, while more
// members are missing than the level tolerates (md's --force).
// A replacement (Superblock::replacement) never speaks for the array or holds a role: it is
// paired with the role's device it copies (`replacing`) when that device holds the role and
// the replacement is as current as the freshest member; else it is kept out with a note, or
// kept as a spare when its role has no device.
// Too many members missing is not refused here: Array::open cannot start the Volume then.
Result<Assembly> assemble(std::span<Member* const> members, bool force = false);

}  // namespace stripefs
