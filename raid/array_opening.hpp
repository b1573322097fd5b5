// Array::open's steps (array.cpp), some in files of their own: what an array being opened
// holds before the Array itself exists. Internal to raid/.
#pragma once

#include <memory>
#include <utility>
#include <vector>

#include "raid/array.hpp"

namespace stripefs {

// A hot replace an earlier run left under way, resumed by the opening (its copy in the
// Volume, mirroring) and handed to the Array, which queues it.
struct ResumedReplace {
  unsigned role;
  std::unique_ptr<ReplacingMember> copy;
  Uuid uuid;  // the new device's member_uuid
};

struct ArrayOpening {
  ArrayOpening(const OpenOptions& options, Assembly assembly)
      : options(options), assembly(std::move(assembly)) {}

  const OpenOptions& options;
  Assembly assembly;
  // Before the Volume, so they outlive it: it may hold them.
  std::vector<ResumedReplace> replaces;
  // Copies that stood in the Volume and were given up: kept until the Array goes.
  std::vector<std::unique_ptr<ReplacingMember>> given_up;
  std::unique_ptr<Volume> volume;
  std::vector<Assembly::Returning> returning;  // in the Volume but held out, to be re-added
  std::unique_ptr<StripeLog> stripe_log;
  std::unique_ptr<WriteIntent> intent;
  std::vector<unsigned> readded;  // returning members rebuilt and back
  std::vector<unsigned> broken;   // returning members that failed their own writes

  const Superblock& sb() const { return assembly.superblock; }
};

// Re-add (md's, with a bitmap): each returning member gets rebuilt from the others where the
// bitmap recorded writes since it left (the record is never cleared while a member is away),
// and the bitmap and a stripe log kept on the members are brought up to date on it. A member
// that fails its own writes is `broken` (recorded failed: not retried at every mount); one
// whose rebuild failed otherwise stays out. Notes say which. (array_readd.cpp)
void readd_returning(ArrayOpening& opening);

// Hot replaces cut short (Assembly::replacing), resumed before any I/O: each new device
// stands in the Volume again beside the role's device, its copy complete below its
// checkpoint and mirrored from the start. (array_replace_resume.cpp)
void resume_replaces(ArrayOpening& opening);
// Once the stripe log is replayed and the bitmap loaded, before the resync and the filesystem:
// what the new devices may have missed below their checkpoints is copied again (the metadata areas,
// and after a crash the ranges the bitmap recorded, or all of it without a bitmap), then
// flushed. A replace that cannot be brought up to date is given up (the old device serves
// alone, the new one is wiped) with a note. (array_replace_resume.cpp)
void recopy_replaced(ArrayOpening& opening);

// After an unclean shutdown: the stripe ranges [first, last] that may be inconsistent (the
// bitmap's, or every stripe), empty when the array was clean. Degraded too: the resync
// checks the redundancy left. (array_resync.cpp)
std::vector<std::pair<uint64_t, uint64_t>> stripes_to_resync(const ArrayOpening& opening);

}  // namespace stripefs
