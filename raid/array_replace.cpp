// Hot replace (md's --replace): a member in service is copied onto a new device while it keeps
// serving, and hands its role over only once the copy is complete. The copy runs on the
// rebuild thread, in turn with rebuilds, paced by the same limits; the ReplacingMember that
// stands in the Volume meanwhile keeps the copied part current.
#include <cstring>

#include "raid/aligned_buffer.hpp"
#include "raid/array.hpp"
#include "raid/log.hpp"

namespace stripefs {

Result<void> Array::replace(unsigned role, Member* device) {
  const Geometry& g = volume_->geometry();
  if (role >= g.members()) {
    return fail(EINVAL, "role {}: the array has {} members", role, g.members());
  }
  if (device == nullptr) return fail(EINVAL, "no device given for role {}", role);
  if (!volume_->active(role)) {
    return fail(
        EBUSY, "role {} is not in service: {}", role,
        volume_->recovering(role) ? "it is being rebuilt" : "add a device to rebuild it instead");
  }
  Member* old = nullptr;
  uint64_t end = 0;
  {
    std::lock_guard lock(mutex_);
    if (replacing_[role]) {
      return fail(EBUSY, "role {} is being replaced already (by {})", role,
                  replacing_[role]->replacement().name());
    }
    for (unsigned r = 0; r < g.members(); ++r) {
      if (by_role_[r] == device) {
        return fail(EINVAL, "{} is a member of this array already", device->name());
      }
      if (replacing_[r] && &replacing_[r]->replacement() == device) {
        return fail(EINVAL, "{} is replacing role {} already", device->name(), r);
      }
    }
    old = by_role_[role];
    end = master_.data_offset + master_.data_size;
  }
  if (auto f = fits(*device); !f) return f;
  {
    // Its replacement superblock first: whatever identity it had goes, and a replace cut
    // short resumes from it.
    std::lock_guard lock(mutex_);
    if (replacing_[role] || !volume_->active(role)) {
      return fail(EBUSY, "role {} changed meanwhile; try again", role);
    }
    const uint64_t begin = kSuperblockOffset + kSuperblockSize;
    replace_uuids_[role] = generate_uuid();
    replace_checkpoints_[role] = begin;
    if (auto w = write_superblock(*device, replacement_record(role)); !w) {
      return fail(w.error().code, "{}: {}", device->name(), w.error().message);
    }
    replacing_[role] = std::make_unique<ReplacingMember>(*old, *device, begin, end);
    volume_->swap_member(role, replacing_[role].get());
  }
  raid_log().warn("array {}: replacing role {} ({}) by {}", format_uuid(superblock().array_uuid),
                  role, old->name(), device->name());
  emit({ArrayEvent::Kind::replace_started, role, device->name(), old->name()});
  start_rebuilds({role});
  return {};
}

Member* Array::replacement(unsigned role) const {
  std::lock_guard lock(mutex_);
  return role < replacing_.size() && replacing_[role] ? &replacing_[role]->replacement() : nullptr;
}

std::vector<std::pair<Member*, Member*>> Array::replaces() const {
  std::lock_guard lock(mutex_);
  std::vector<std::pair<Member*, Member*>> out;
  for (const auto& copy : retired_) out.emplace_back(&copy->old_device(), &copy->replacement());
  for (const auto& copy : replacing_) {
    if (copy) out.emplace_back(&copy->old_device(), &copy->replacement());
  }
  return out;
}

Result<void> Array::cancel_replace(unsigned role) {
  {
    std::lock_guard lock(mutex_);
    if (role >= replacing_.size() || !replacing_[role]) {
      return fail(EINVAL, "role {} is not being replaced", role);
    }
    if (by_role_[role] == &replacing_[role]->replacement()) {
      // The copy is complete and the role is being handed over: too late to stop it, and a
      // failure now would fail the role. Once the handover ends, it fails as a member.
      return fail(EBUSY, "role {} is being handed over to {}; try again to fail it as a member",
                  role, replacing_[role]->replacement().name());
    }
    replacing_[role]->fail_replacement(Error{ECANCELED, "the replace was stopped on request"});
  }
  return {};  // the copy sees it at its next step
}

Result<void> Array::replace_role(unsigned role) {
  ReplacingMember* copy = nullptr;
  {
    std::lock_guard lock(mutex_);
    copy = replacing_[role].get();
  }
  if (copy == nullptr) return fail(EINVAL, "role {} is not being replaced", role);
  const auto started = std::chrono::steady_clock::now();
  const uint64_t total = copy->end() - copy->begin();
  {
    std::lock_guard lock(rebuild_mutex_);
    rebuild_.current = role;
    rebuild_.replace = true;
    rebuild_.done = copy->copied() - copy->begin();  // a resumed copy starts part done
    rebuild_.total = total;
    rebuild_.bytes = 0;
    rebuild_.written = 0;
    rebuild_.seconds = 0;
  }
  Pacing pacing = start_pacing();
  Round round{started};
  auto checkpointed = started;
  while (!copy->complete()) {
    if (!start_round(pacing, round)) {
      // The array closes: the copy stays in the Volume, mirroring, and close() records how
      // far it got once the members are flushed; the next open resumes it there.
      return fail(ECANCELED,
                  "the array closed before the copy was complete; it resumes at "
                  "the next open");
    }
    if (!volume_->active(role)) {
      return abandon_replace(
          role, *copy,
          Error{EIO, fmt::format("role {} ({}) failed", role, copy->old_device().name())});
    }
    uint64_t reached = copy->copied();
    const uint64_t length = round.limited ? step_bytes() : copy->end() - reached;
    std::optional<Error> checkpoint_failed;
    const Result<void> step = copy->copy(length, [&](uint64_t copied) {
      const uint64_t moved = copied - reached;
      reached = copied;
      if (std::chrono::steady_clock::now() - checkpointed >= checkpoint_every_) {
        if (auto r = record_replace_checkpoint(role, *copy); !r) {
          checkpoint_failed = r.error();
          return false;
        }
        checkpointed = std::chrono::steady_clock::now();
      }
      return round_progress(pacing, round, copied - copy->begin(), moved, moved) &&
             volume_->active(role);
    });
    if (!step) return abandon_replace(role, *copy, step.error());
    if (checkpoint_failed) return abandon_replace(role, *copy, *checkpoint_failed);
    pace(pacing, round.limited ? round.bytes : 0);  // an unlimited round owes nothing
  }
  if (auto r = finish_replace(role, *copy); !r) return abandon_replace(role, *copy, r.error());
  raid_log().warn(
      "array {}: role {} replaced by {} in {:.1f} s", format_uuid(superblock().array_uuid), role,
      copy->replacement().name(),
      std::chrono::duration<double>(std::chrono::steady_clock::now() - started).count());
  return {};
}

// Every byte is on the replacement and every write since went to both: it takes the role.
// Its superblock first (a crash from then on assembles it, a full copy, in the role); then
// every request goes to it alone, and the writes already sent to both are waited for: if it
// failed one of them it is not a full copy after all, and the role fails (redundancy holds
// the write) rather than serve stale bytes.
Result<void> Array::finish_replace(unsigned role, ReplacingMember& copy) {
  Member& device = copy.replacement();
  if (auto f = member_flush(device); !f) return f;
  if (auto failed = copy.replacement_failed()) return fail(*failed);
  {
    std::lock_guard lock(mutex_);
    if (!volume_->active(role)) return fail(EIO, "role {} failed at the end of the copy", role);
    // Again under mutex_, which cancel_replace takes: a stop asked for until here ends the
    // replace as asked, never the handover that follows.
    if (auto failed = copy.replacement_failed()) return fail(*failed);
    by_role_[role] = &device;
    member_uuids_[role] = generate_uuid();
    ++master_.events;
    // Its own first: a crash before the others' leaves it ahead of the old device (which
    // assembly then takes for the replaced one), never a replacement behind them, which
    // assembly would take for a stale copy.
    Superblock mine = master_;
    mine.role = static_cast<uint16_t>(role);
    mine.member_uuid = member_uuids_[role];
    if (auto w = write_superblock(device, mine); !w) {
      volume_->fail_member(role, w.error());
      return w;
    }
    if (auto w = write_superblocks(); !w) return w;
    copy.hand_over();
    volume_->swap_member(role, &device);
    retired_.push_back(std::move(replacing_[role]));
  }
  copy.drain();
  if (auto failed = copy.replacement_failed()) {
    volume_->fail_member(role, Error{EIO, fmt::format("{} missed a write during the handover: {}",
                                                      device.name(), failed->message)});
    return fail(EIO, "{} missed a write during the handover; the role is failed", device.name());
  }
  if (!volume_->active(role)) {
    return fail(EIO, "role {} ({}) failed during the handover", role, device.name());
  }
  // A second record puts the old device two events behind, so an assembly given both tells
  // which one holds the role.
  std::lock_guard lock(mutex_);
  ++master_.events;
  return write_superblocks();
}

// Cut short: the old device serves alone again. If it is the one that failed, the role is
// rebuilt onto the replacement instead, as md does.
Result<void> Array::abandon_replace(unsigned role, ReplacingMember& copy, const Error& why) {
  Member& old = copy.old_device();
  Member& device = copy.replacement();
  {
    std::lock_guard lock(mutex_);
    if (by_role_[role] == &device) {
      // The handover was under way: the role is the replacement's, whatever came of it (a
      // failed superblock write failed a member; a failed handover, the role).
      if (replacing_[role]) {
        copy.hand_over();
        volume_->swap_member(role, &device);
        retired_.push_back(std::move(replacing_[role]));
      }
      return fail(why);
    }
    copy.hand_over_back();
    volume_->swap_member(role, &old);
    retired_.push_back(std::move(replacing_[role]));
    // Its replacement superblock falls behind the others (and is wiped below, unless the
    // role is rebuilt onto it), so no assembly resumes a copy that stopped being current.
    ++master_.events;
    if (auto w = write_superblocks(); !w) {
      raid_log().error("role {}: recording the replace's end: {}", role, w.error().message);
    }
  }
  if (copy.old_failed() && volume_->active(role)) {
    // The copy could not read the old device. Failed if the array can do without it (and
    // then rebuilt onto the replacement, below); never if that would fail the array.
    if (!runs_without(role)) {
      return fail(why.code, "{}; the array cannot do without {}, which serves on", why.message,
                  old.name());
    }
    volume_->fail_member(role, Error{EIO, fmt::format("{}: read failed while it was copied onto {}",
                                                      old.name(), device.name())});
  }
  const bool old_failed = !volume_->active(role);
  if (old_failed && !copy.replacement_failed()) {
    raid_log().warn("role {}: {} failed while it was replaced; rebuilding onto {}", role,
                    old.name(), device.name());
    if (auto r = rebuild(role, &device); !r) {
      return fail(why.code, "{}; rebuilding onto {} instead: {}", why.message, device.name(),
                  r.error().message);
    }
    return fail(why.code, "{}; rebuilding onto {} instead", why.message, device.name());
  }
  AlignedBuffer blank(kSuperblockSize);
  std::memset(blank.data(), 0, blank.size());
  if (auto w = member_write(device, kSuperblockOffset, blank.span(), /*fua=*/true); !w) {
    raid_log().warn("role {}: wiping the superblock of {} after the replace: {}", role,
                    device.name(), w.error().message);
  }
  return fail(why);
}

Superblock Array::replacement_record(unsigned role) const {
  Superblock mine = master_;
  mine.role = static_cast<uint16_t>(role);
  mine.member_uuid = replace_uuids_[role];
  mine.replaces = member_uuids_[role];
  mine.set_replacement(true);
  mine.rebuild_checkpoint = replace_checkpoints_[role];
  return mine;
}

Result<void> Array::record_replace_checkpoint(unsigned role, ReplacingMember& copy) {
  const uint64_t reached = copy.copied();
  if (auto f = member_flush(copy.replacement()); !f) {
    copy.fail_replacement(f.error());
    return f;
  }
  // A mirrored write it failed is missing from it: no checkpoint may vouch for it.
  if (auto failed = copy.replacement_failed()) return fail(*failed);
  std::lock_guard lock(mutex_);
  replace_checkpoints_[role] = reached;
  if (auto w = write_superblock(copy.replacement(), replacement_record(role)); !w) {
    copy.fail_replacement(w.error());
    return fail(w.error().code, "{}: {}", copy.replacement().name(), w.error().message);
  }
  return {};
}

}  // namespace stripefs
