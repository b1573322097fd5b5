// Healing read errors (md's fix_read_error): a member that fails a read while the array could
// do without it keeps its role if its bytes can be written back. The segment is read again
// alone first (its request may have failed for a neighbour's sake). Under the stripe's lock (no
// write may change the stripe meanwhile), the segment is read from another copy or rebuilt
// from parity into the caller's buffer, written to the member, and read back; a device that
// passes is counted a corrected error, one that does not is failed. The caller gets the good
// bytes either way.
#include <cstring>

#include "raid/aligned_buffer.hpp"
#include "raid/join.hpp"
#include "raid/log.hpp"
#include "raid/volume.hpp"

namespace stripefs {

struct Volume::Healing {
  VolumePiece segment;
  unsigned member;
  uint64_t member_offset;
  uint64_t stripe;
  Error why;  // the failed read
  Callback done;
  AlignedBuffer check;  // the read back
};

void Volume::read_failed(const VolumePiece& segment, unsigned member, uint64_t member_offset,
                         int error, Callback done) {
  Error why{error,
            fmt::format("read failed at member byte {}: {}", member_offset, std::strerror(error))};
  if (!healable(member)) {
    // As before healing: the member leaves, and the segment is read from what is left.
    members_.fail(member, why);
    auto join = Join::start(1, std::move(done));
    read_segments(join, {segment});
    join->finish();
    return;
  }
  auto healing = std::make_shared<Healing>();
  healing->segment = segment;
  healing->member = member;
  healing->member_offset = member_offset;
  healing->stripe = segment.offset / geometry_.stripe_data_size();
  healing->why = std::move(why);
  healing->done = std::move(done);
  // Read again, alone, first: a merged request fails every segment in it, and an error may
  // not repeat. Only a segment that fails on its own is healed (and counted).
  Member* device = members_[member];
  MemberRequest again;
  again.op = MemberOp::read;
  again.offset = member_offset;
  again.iov.push_back({segment.data.data(), segment.data.size()});
  again.done = [this, healing, device](int64_t got) {
    const uint64_t length = healing->segment.data.size();
    device->count(MemberOp::read, got >= 0 ? length : 0, got == static_cast<int64_t>(length));
    if (got == static_cast<int64_t>(length)) {
      Callback done = std::move(healing->done);
      return done({});
    }
    if (locks_.acquire(healing->stripe, [this, healing] { heal(healing); })) heal(healing);
  };
  VolumeCounters::add(stats_.member_read_ios, 1);
  device->start(std::move(again));
}

// Under the stripe's lock: the good bytes, then written back and read back.
void Volume::heal(std::shared_ptr<Healing> healing) {
  level_->reconstruct(io_, healing->segment, healing->member, [this, healing](Result<void> r) {
    if (!r) {
      // Nothing left to read it from: the member's failure stands, and so does the error.
      locks_.release(healing->stripe);
      members_.fail(healing->member, healing->why);
      Callback done = std::move(healing->done);
      done(std::move(r));
      return;
    }
    Member* device = members_[healing->member];
    const uint64_t length = healing->segment.data.size();
    MemberRequest write;
    write.op = MemberOp::write;
    write.offset = healing->member_offset;
    write.iov.push_back({healing->segment.data.data(), length});
    write.done = [this, healing, device, length](int64_t written) {
      device->count(MemberOp::write, written >= 0 ? length : 0,
                    written == static_cast<int64_t>(length));
      if (written != static_cast<int64_t>(length)) {
        return healed(healing, fail(written < 0 ? static_cast<int>(-written) : EIO,
                                    "writing the bytes back failed"));
      }
      healing->check = AlignedBuffer(length);
      MemberRequest read;
      read.op = MemberOp::read;
      read.offset = healing->member_offset;
      read.iov.push_back({healing->check.data(), length});
      read.done = [this, healing, device, length](int64_t got) {
        device->count(MemberOp::read, got >= 0 ? length : 0, got == static_cast<int64_t>(length));
        if (got != static_cast<int64_t>(length)) {
          return healed(healing,
                        fail(got < 0 ? static_cast<int>(-got) : EIO, "reading them back failed"));
        }
        if (std::memcmp(healing->check.data(), healing->segment.data.data(), length) != 0) {
          return healed(healing, fail(EIO, "they read back different"));
        }
        healed(healing, {});
      };
      device->start(std::move(read));
    };
    VolumeCounters::add(stats_.member_write_ios, 1);
    VolumeCounters::add(stats_.member_read_ios, 1);
    device->start(std::move(write));
  });
}

void Volume::healed(std::shared_ptr<Healing> healing, Result<void> rewritten) {
  locks_.release(healing->stripe);
  const unsigned member = healing->member;
  if (!rewritten) {
    members_.fail(member, Error{rewritten.error().code, fmt::format("{}; {}", healing->why.message,
                                                                    rewritten.error().message)});
  } else {
    note_corrected(member, healing->member_offset, healing->why.message);
  }
  Callback done = std::move(healing->done);
  done({});  // the caller's bytes came from redundancy
}

void Volume::note_corrected(unsigned member, uint64_t member_offset, const std::string& why) {
  Member* device = members_[member];
  const uint64_t corrected = device->count_corrected();
  const uint32_t max = max_read_errors_.load(std::memory_order_relaxed);
  raid_log().warn("member {} ({}): {}; rewritten from redundancy ({} corrected, at most {})",
                  member, device->name(), why, corrected, max);
  if (corrected_listener_) corrected_listener_(member, corrected, member_offset);
  if (corrected > max) {
    members_.fail(member, Error{EIO, fmt::format("{} read errors corrected: more than "
                                                 "max_read_errors ({})",
                                                 corrected, max)});
  }
}

bool Volume::rewrite_unreadable(unsigned member, uint64_t offset,
                                std::span<const std::byte> contents, std::span<std::byte> scratch,
                                const std::string& why) {
  Member& device = *members_[member];
  Result<void> healed = member_write(device, offset, contents);
  if (healed) healed = member_read(device, offset, scratch.first(contents.size()));
  if (healed && std::memcmp(scratch.data(), contents.data(), contents.size()) != 0) {
    healed = fail(EIO, "it reads back different");
  }
  if (!healed) {
    members_.fail(member, Error{EIO, fmt::format("{}; rewriting it failed: {}", why,
                                                 healed.error().message)});
    return false;
  }
  note_corrected(member, offset, why);
  return members_.active(member);  // not if that was one correction too many
}

bool Volume::healable(unsigned member) const {
  return max_read_errors_.load(std::memory_order_relaxed) > 0 && members_.active(member) &&
         level_->survives([this, member](unsigned m) { return m != member && members_.active(m); });
}

}  // namespace stripefs
