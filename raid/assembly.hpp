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
};

// Reads every member's superblock and decides which members form the array. Refuses, with
// a line naming the member and field, members of different arrays or geometries, a device
// that holds no stripefs superblock, two members claiming one role, and too many members
// missing for the level's redundancy.
// Members one event behind the freshest count as current (superblocks are written one
// member after another, and a crash between two writes must not cost a member). Members run
// apart from each other (split brain) are refused. With `force`, stale members are brought
// back, freshest first, while the array could not start without them (md's --force).
Result<Assembly> assemble(std::span<Member* const> members, bool force = false);

}  // namespace stripefs
