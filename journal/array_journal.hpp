// Plugging the write-ahead journal into raid/'s array lifecycle, as the stripe log that
// closes the RAID5/6 write hole. The journal lives on a separate device (pmem or NVMe in
// production, as md's journal device does).
#pragma once

#include "array.hpp"

namespace stripefs {

// Gives a new array a journal of `blocks` 4 KiB blocks at byte `offset` of `device`,
// formatted before any superblock is written. Composes with add_bitmap().
void add_stripe_journal(ArrayOptions& options, Member& device, uint64_t offset, uint64_t blocks);

// Opens arrays with their journal on `device` (which must outlive the array).
void use_stripe_journal(OpenOptions& options, Member& device);

}  // namespace stripefs
