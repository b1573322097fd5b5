// Plugging the write-ahead journal into raid/'s array lifecycle, as the stripe log that
// closes the RAID5/6 write hole. The journal lives either on a separate device (pmem or
// NVMe in production, as md's journal device does) or, by default, in an area reserved
// before the data on the members, kept in parity_chunks + 1 copies (the first members by
// role), so it survives every failure the level survives. It never lives on the volume
// itself: a log there would have to pad every logged 4 KiB write to a whole stripe to stay
// off the write hole.
//
// add_stripe_journal and add_member_journal refuse, before anything is written, a level
// other than RAID5/6 and a journal smaller than min_stripe_journal_blocks().
#pragma once

#include "journal/mirrored_area.hpp"
#include "journal/stripe_journal.hpp"
#include "raid/array.hpp"

namespace stripefs {

constexpr uint64_t kMemberJournalOffset = 1 << 20;  // after the superblock and the bitmap

// The smallest journal that holds two worst-case partial stripes (every chunk of a stripe),
// so one can be logged while the other is checkpointed.
uint64_t min_stripe_journal_blocks(unsigned member_count, uint32_t chunk_size);

// A member journal's size for members of `member_size` bytes: 1/64 of a member within
// [16 MiB, 64 MiB], at least four worst-case partial stripes, in whole MiB.
uint64_t default_member_journal_blocks(unsigned member_count, uint32_t chunk_size,
                                       uint64_t member_size);

// Gives a new array a journal of `blocks` 4 KiB blocks at byte `offset` of `device`,
// formatted before any superblock is written. Composes with add_bitmap().
void add_stripe_journal(ArrayOptions& options, Member& device, uint64_t offset, uint64_t blocks);

// Gives a new array a journal of `blocks` blocks on its members, at kMemberJournalOffset;
// moves the data offset past it (to a whole MiB). Composes with add_bitmap().
void add_member_journal(ArrayOptions& options, uint64_t blocks);

// Opens arrays with a journal: on `device` (which must outlive the array) when the array
// keeps it on a separate device, on the members when it keeps it there (`device` null);
// the wrong one is refused. Once a crash (or `force`) may have left the members' copies
// different, the freshest copy is copied over the others before replay.
// A damaged journal (on the members: no live copy readable) is refused, naming the device
// and field ("force rebuilds the journal"); a damaged copy beside a good one is repaired.
// With `force`, any failure but EIO formats it again, empty: its records are lost, so
// lost_records() is true and an unclean array is resynced whole, while a degraded one keeps
// whatever stripes were torn.
// The log is checkpointed when half full, when a full stripe waits for it, and at least
// every `idle_checkpoint` (crash tests that keep records in the log set it long).
void use_stripe_journal(OpenOptions& options, Member* device,
                        std::chrono::milliseconds idle_checkpoint = kIdleCheckpoint);

// What use_stripe_journal opens for a member journal: the copies on the members that are
// live in `volume`, the freshest first (reads come from it); when they may differ (an
// unclean array, `force`, or copies found to differ), the others made equal to it first. A
// copy that fails is taken out of `volume`. `sb` gives the level, the area and the UUID.
// Each copy's log is read on its own: the freshest reaches furthest (newest durable
// transaction), then was checkpointed furthest (a copy that missed a checkpoint could
// replay records over full-stripe writes made since, which bypass the log). A copy that
// cannot be read counts as the stalest; with none readable the open is refused, unless
// `force`.
Result<std::unique_ptr<MirroredArea>> open_member_journal_area(Volume& volume, const Superblock& sb,
                                                               bool force);

}  // namespace stripefs
