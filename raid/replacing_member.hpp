// A role's device while it is hot-replaced (md's --replace): stands in the Volume for the old
// device, which keeps serving every read, and mirrors each write onto the replacement once
// the range it touches has been copied there. copy() moves the copied part up, a piece at a
// time, so the replacement is a full copy when it reaches the end and never lags behind
// what was written: there is no moment at which the array has less redundancy than before.
//
// A piece is copied without stripe locks: writes that overlap it and arrive meanwhile wait
// here (queued, not blocked) until it is copied, and the copy waits for the writes already in
// flight over it, so the replacement never gets a stale copy of bytes written meanwhile. Two
// pieces are under way at once (the next read from the old device while this one is written
// to the replacement), so on devices the copy goes at one device's rate.
// Writes elsewhere go on. This covers the whole device from `begin` (the metadata areas,
// the write-intent bitmap and the journal, as well as the data), so their copies on the
// replacement are as current as the data's.
//
// The handover (hand_over): every request then goes to the replacement alone, and drain()
// waits out the ones sent to both before, so the array can check that the replacement
// missed none. Abandoned (hand_over_back), everything goes to the old device alone.
//
// Failures: a write or flush the old device fails is reported to the caller as the old
// device's result (the Volume then fails the role, and the replace stops). A write the
// replacement fails marks the replacement failed: nothing more goes to it, and the caller
// still gets the old device's result.
//
// Lock order: mutex_ is a leaf; nothing is submitted under it.
#pragma once

#include <condition_variable>
#include <cstdint>
#include <functional>
#include <mutex>
#include <optional>
#include <string>
#include <vector>

#include "raid/aligned_buffer.hpp"
#include "raid/member.hpp"
#include "raid/result.hpp"

namespace stripefs {

class ReplacingMember final : public Member {
 public:
  // `old` and `replacement` must outlive this wrapper, and so must it every request
  // submitted through it. Bytes [begin, end) of `old` are to be copied (the superblock below
  // `begin` is each device's own); `copied`, if given, is where a copy cut short got to (a
  // resume: bytes below it are taken as copied, and mirrored from the start).
  ReplacingMember(Member& old, Member& replacement, uint64_t begin, uint64_t end,
                  std::optional<uint64_t> copied = std::nullopt);

  void submit(MemberRequest request) override;
  uint64_t count_corrected() override;
  uint64_t count_checksum_error() override;

  // The handover: from now on every request goes to the replacement alone, with its own
  // result (the role is the replacement's). Requests already sent to both still finish.
  void hand_over();
  // The replace abandoned: from now on every request goes to the old device alone.
  void hand_over_back();
  // Waits until no request it forwarded is in flight. Blocking.
  void drain();

  // Copies [copied(), min(copied() + length, end)) from the old device onto the
  // replacement and mirrors writes below it from then on. Blocking; one caller at a time.
  // An error says which device failed: old_failed() or replacement_failed() tells.
  // `piece_done`, if given, is called with copied() after each piece; false stops the copy
  // there (the next piece's read, under way, is let finish and not written).
  Result<void> copy(uint64_t length,
                    const std::function<bool(uint64_t copied)>& piece_done = nullptr);

  // Copies [begin, end) below copied() onto the replacement again, from the old device (what
  // a crash may have left different on the two): writes over each piece wait meanwhile, and
  // the piece waits for the writes in flight over it, as copy()'s do. Not while copy() runs.
  // Blocking; an error says which device failed, as copy()'s does.
  Result<void> recopy(uint64_t begin, uint64_t end);

  Member& old_device() const { return old_; }
  Member& replacement() const { return replacement_; }
  uint64_t begin() const { return begin_; }
  uint64_t end() const { return end_; }
  uint64_t copied() const;
  bool complete() const { return copied() >= end_; }
  // The replacement refused a write or a flush (or the copy's write): it gets nothing more.
  std::optional<Error> replacement_failed() const;
  // From now on the replacement gets nothing more, and copy() fails with `why`.
  void fail_replacement(const Error& why) { note_replacement_failure(why); }
  // The copy could not read the old device.
  bool old_failed() const;

 private:
  struct Writing {
    uint64_t id;
    uint64_t begin, end;
  };

  // Forwards `request` (a write or flush) to the old device and, when `mirror`, to the
  // replacement; `id` is its entry in writing_ (0: none).
  void forward(MemberRequest request, bool mirror, uint64_t id);
  void finished(uint64_t id);
  void note_replacement_failure(const Error& why);
  // The piece is copied: copying_ becomes `still`, and the writes that waited go on.
  void release_piece(std::optional<std::pair<uint64_t, uint64_t>> still);
  bool overlaps_writing(uint64_t begin, uint64_t end) const;  // under mutex_

  Member& old_;
  Member& replacement_;
  const uint64_t begin_, end_;

  mutable std::mutex mutex_;
  std::condition_variable drained_;
  uint64_t copied_;                                       // bytes below it are mirrored
  std::optional<std::pair<uint64_t, uint64_t>> copying_;  // the piece being copied
  std::vector<Writing> writing_;                          // writes in flight (from begin_ on)
  std::vector<MemberRequest> waiting_;  // writes over the piece, until it is copied
  uint64_t next_id_ = 1;
  Member* alone_ = nullptr;  // after a handover (either way): the one device requests go to
  uint64_t in_flight_ = 0;   // forwarded writes and flushes not yet answered
  std::optional<Error> replacement_error_;
  bool old_failed_ = false;
  AlignedBuffer buffer_;  // copy()'s, allocated by its first call
};

}  // namespace stripefs
