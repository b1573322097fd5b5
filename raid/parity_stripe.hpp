// The RAID5/6 parity engine: the I/O of the parity level (level_parity.cpp).
//
// - A full stripe: P (and Q) computed straight from the caller's buffers, which then go to
//   their members as they are; nothing is copied.
// - A partial stripe: read-modify-write or reconstruct-write, whichever reads less; with a
//   member missing, every surviving chunk's rows are read and the missing one rebuilt
//   first. When the array keeps a stripe log (the write hole closed), the new contents are
//   durable in the log before anything is written in place.
// - A chunk whose member is missing, read back: rebuilt from the rest of its stripe, under
//   the stripe's lock, straight into the caller's buffer.
//
// Every function is called with the stripe locked by the Volume (writes) or takes the lock
// itself (lost reads), and reports member failures to io.members.
#pragma once

#include <optional>
#include <vector>

#include "raid/io_batch.hpp"
#include "raid/stripe_io.hpp"

namespace stripefs::parity_stripe {

// Plans the member writes of full stripe `s`: its data, and P (and Q) in a parity buffer
// that `s` keeps until the writes complete.
void plan_full(StripeIo& io, StripeWrite& s, std::vector<PlannedIo>& ios);
// Writes partial stripe `s` and calls `done` once.
void write_partial(StripeIo& io, StripeWrite& s, IoDone done);
// Reads `segment` (within one data chunk) by rebuilding it, and calls `done` once.
void read_lost(StripeIo& io, VolumePiece segment, IoDone done);
// Rebuilds `segment` into its buffer from the rest of its stripe, without member `without`
// (its own, when it is the one that failed a read), under the stripe's lock, which the
// caller holds. Members that fail their reads are failed and the rebuild tried again.
void rebuild_segment(StripeIo& io, VolumePiece segment, std::optional<unsigned> without,
                     IoDone done);

}  // namespace stripefs::parity_stripe
