// A member wrapper for crash tests of the whole system (tests/check's power cuts): a device
// with a volatile write cache whose unflushed writes a power cut loses, torn at any 4 KiB
// block and in any order, while everything above it runs unchanged.
//
// Unlike FaultyMember's cache, writes go through to the inner device at once, so reads are
// always coherent with writes, whatever runs concurrently. What makes them volatile is an
// undo record: before a write that is not yet durable lands, the bytes it replaces are read
// and kept. A flush makes every earlier write durable (the records are dropped); a FUA write
// is durable when it completes. power_off() undoes what the cut loses and kills the device:
// every request after it fails with EIO and never reaches the medium, as after a real cut.
//
// Each request is done inline, under a per-device mutex, before submit() returns: the inner
// member must complete requests inline too (MemoryMember, or a FileMember on tmpfs,
// FileMember::inline_io()). `done` runs after the mutex is released, so it may submit again.
#pragma once

#include <cstdint>
#include <mutex>
#include <vector>

#include "raid/member.hpp"

namespace stripefs {

class PowerCutMember final : public Member {
 public:
  // `inner` must outlive this wrapper. The wrapper reports a volatile cache, so the array
  // above flushes it as it would a real disk's.
  explicit PowerCutMember(Member& inner);

  void submit(MemberRequest request) override;

  // The power is going: requests from now on are never answered and never reach the medium
  // (a dead disk does not fail requests, it just stops). Freezing every member of an array
  // first, then power_off() on each, cuts them all at once: no member fails beside the
  // others still running, so nothing records it failed.
  void freeze();
  // Before power_off(): the power stays after all. The requests freeze() held go on, in the
  // order they came (a test that froze at a moment it cannot use tries another).
  void thaw();
  // The power goes: of the writes since the last flush (FUA writes excepted), each 4 KiB
  // block survives with probability `survive` (0: all are lost), decided by `seed` per write
  // and block, so a newer write may survive where an older one is lost, or the reverse. The
  // device is dead from here on: requests fail with EIO (those held by freeze() stay
  // unanswered). Returns the number of 4 KiB blocks undone.
  size_t power_off(double survive = 0.0, uint64_t seed = 1);
  // After power_off(): the requests freeze() held are answered with EIO (never reaching the
  // medium), so an array above can give up and be closed in a test that lives on.
  void release_held();
  // Writes not yet durable, for tests.
  size_t volatile_writes() const;

 private:
  struct Undo {
    uint64_t offset = 0;
    uint64_t length = 0;
    std::vector<std::byte> old;  // the bytes the write replaced; empty for a durable write
    bool durable = false;        // a FUA write: survives the cut whole
  };

  int64_t write_through(const MemberRequest& request);

  Member& inner_;
  mutable std::mutex mutex_;
  std::vector<Undo> undo_;  // oldest first
  bool dead_ = false;
  bool frozen_ = false;
  std::vector<MemberRequest> unanswered_;  // arrived after freeze(); never answered
};

}  // namespace stripefs
