// An array's life once created: opening it (assembly, the Volume, the stripe log and the
// bitmap, re-add, resync), keeping the members' records true while it runs, and a clean
// close. Creation is in array_create.cpp, assembly in assembly.cpp, re-add in
// array_readd.cpp, resync in array_resync.cpp.
#include "raid/array.hpp"

#include <algorithm>
#include <bit>
#include <cstring>

#include "raid/aligned_buffer.hpp"
#include "raid/array_opening.hpp"
#include "raid/log.hpp"

namespace stripefs {

namespace {

// The Volume over the members the assembly chose, with the returning ones in it but held
// out until they are re-added (when the bitmap can tell what they missed).
Result<void> start_volume(ArrayOpening& a) {
  const Superblock& sb = a.sb();
  auto geometry =
      Geometry::create(sb.level, sb.member_count, sb.chunk_size, sb.data_size, sb.layout);
  if (!geometry) return fail(geometry.error());
  const bool can_readd =
      a.options.write_intent && sb.bitmap_size != 0 && geometry->redundancy() > 0;
  std::vector<Member*> in_volume = a.assembly.by_role;
  for (auto& r : a.assembly.returning) {
    if (can_readd) {
      in_volume[r.role] = r.member;
      a.returning.push_back(r);
    } else {
      a.assembly.notes.push_back(r.note);
    }
  }
  auto volume = Volume::create(*geometry, in_volume, sb.data_offset);
  for (const auto& r : a.returning) {
    if (volume) (*volume)->hold_out(r.role);
  }
  if (volume && (*volume)->failed()) {
    volume = fail(ENODEV, "{} of {} members missing; {} tolerates {}", (*volume)->missing_members(),
                  geometry->members(), to_string(sb.level), geometry->redundancy());
  }
  if (!volume) {
    std::string why = volume.error().message;
    for (const auto& note : a.assembly.notes) why += "; " + note;
    for (const auto& r : a.returning) why += "; " + r.note;
    return fail(volume.error().code, "array {}: cannot start: {}", format_uuid(sb.array_uuid), why);
  }
  a.volume = std::move(*volume);
  // Members being rebuilt rejoin in sync below their checkpoint; the rebuild resumes there.
  for (const auto& r : a.assembly.recovering) {
    const uint64_t stripes = r.checkpoint >= geometry->member_data_size()
                                 ? geometry->stripes()
                                 : a.volume->stripes_of(r.checkpoint, r.checkpoint + 1).first;
    a.volume->start_recovery(r.role, r.member, stripes);
    a.assembly.by_role[r.role] = r.member;
  }
  return {};
}

// The stripe log, replayed before anything else: torn stripes get their logged contents back.
Result<void> start_stripe_log(ArrayOpening& a) {
  const Superblock& sb = a.sb();
  if (sb.journal_size == 0) return {};
  if (!a.options.stripe_log) {
    return fail(EINVAL,
                "array {} keeps a write-ahead journal ({} bytes at byte {} of {}): open it "
                "with its journal",
                format_uuid(sb.array_uuid), sb.journal_size, sb.journal_offset,
                is_zero(sb.journal_device_uuid) ? "its members" : "its journal device");
  }
  auto made = a.options.stripe_log(*a.volume, sb, a.options.force);
  if (!made) return fail(made.error());
  a.stripe_log = std::move(*made);
  auto replayed = a.stripe_log->replay(*a.volume);
  if (!replayed) return fail(replayed.error());
  if (*replayed > 0) {
    raid_log().warn("array {}: replayed {} logged stripe writes", format_uuid(sb.array_uuid),
                    *replayed);
  }
  if (a.options.log_partial_stripes) a.volume->set_stripe_log(a.stripe_log.get());
  return {};
}

// The write-intent bitmap, plugged in before the first write.
Result<void> start_write_intent(ArrayOpening& a) {
  const Superblock& sb = a.sb();
  if (sb.bitmap_size != 0 && !a.options.write_intent && !a.options.ignore_bitmap) {
    // Writes it did not record would be missing from it when a member is re-added later.
    return fail(EINVAL, "array {} keeps a write-intent bitmap: open it with its bitmap",
                format_uuid(sb.array_uuid));
  }
  if (a.options.write_intent && sb.bitmap_size != 0) {
    auto made = a.options.write_intent(*a.volume, sb, a.options.force);
    if (!made) return fail(made.error());
    a.intent = std::move(*made);
    a.volume->set_write_intent(a.intent.get());
  }
  return {};
}

}  // namespace

Result<std::unique_ptr<Array>> Array::open(std::span<Member* const> members,
                                           const OpenOptions& options) {
  auto assembly = assemble(members, options.force);
  if (!assembly) return fail(assembly.error());
  ArrayOpening a{options, std::move(*assembly)};
  const Superblock& sb = a.sb();
  if (auto r = start_volume(a); !r) return fail(r.error());
  resume_replaces(a);
  const bool degraded = a.volume->missing_members() > 0;
  if (auto r = start_stripe_log(a); !r) return fail(r.error());
  // Without a stripe log (or after a run that did not use it), a crash may have torn
  // stripes that a missing member's chunk can no longer be rebuilt from. A mirror's chunk is
  // a copy of another: nothing to tear.
  const bool parity = a.volume->geometry().has_parity();
  if (!sb.clean() && degraded && parity && !options.force && !(a.stripe_log && !sb.unlogged())) {
    return fail(EUCLEAN,
                "array {}: was not shut down cleanly and is degraded, so parity may not match "
                "the data; refusing to start (force to accept)",
                format_uuid(sb.array_uuid));
  }
  if (auto r = start_write_intent(a); !r) return fail(r.error());
  recopy_replaced(a);
  readd_returning(a);
  std::vector<std::pair<uint64_t, uint64_t>> to_resync = stripes_to_resync(a);
  std::vector<Uuid> uuids(sb.member_count);
  for (unsigned role = 0; role < sb.member_count; ++role) {
    Member* m = a.assembly.by_role[role];
    if (m == nullptr) continue;
    auto own = read_superblock(*m);
    if (!own) return fail(own.error());
    uuids[role] = own->member_uuid;
  }
  std::unique_ptr<Array> array(new Array(sb, a.assembly.by_role, std::move(uuids),
                                         std::move(a.volume), std::move(a.assembly.notes)));
  array->spares_ = a.assembly.spares;
  array->adopt_replaces(a);
  // Read errors healed from now on are told (the first, then every doubling of a device's
  // count), before the resync and rebuild threads start reading.
  array->volume_->set_read_error_policy(
      array->volume_->max_read_errors(),
      [raw = array.get()](unsigned member, uint64_t corrected, uint64_t member_offset) {
        if (!std::has_single_bit(corrected)) return;
        Member* device = raw->volume_->member(member);
        raw->emit({ArrayEvent::Kind::device_errors, member, device != nullptr ? device->name() : "",
                   fmt::format("{} read errors corrected (failed beyond {}); the last at member "
                               "byte {}",
                               corrected, raw->volume_->max_read_errors(), member_offset)});
      });
  array->intent_ = std::move(a.intent);
  array->stripe_log_ = std::move(a.stripe_log);
  array->logging_ = options.log_partial_stripes;
  array->speed_min_ = options.speed_min;
  array->speed_max_ = options.speed_max;
  array->checkpoint_every_ = options.checkpoint_every;
  std::vector<unsigned> recovering;
  for (const auto& r : a.assembly.recovering) {
    array->checkpoints_[r.role] = r.checkpoint;
    recovering.push_back(r.role);
  }
  if (auto r = array->record_running(a.readded, a.broken); !r) {
    array->closed_ = true;
    return fail(r.error());
  }
  // Replay keeps its records when it failed a member; recorded now, they may go.
  if (array->stripe_log_) {
    if (auto c = array->stripe_log_->checkpoint(); !c) {
      array->closed_ = true;
      return fail(c.error());
    }
  }
  // Degraded too (a re-added member whose superblock write failed is out again, say): the
  // resync checks what redundancy the members in sync still have.
  if (!to_resync.empty()) {
    array->start_resync(std::move(to_resync));
  }
  for (const ResumedReplace& r : a.replaces) recovering.push_back(r.role);
  if (!recovering.empty()) array->start_rebuilds(std::move(recovering));
  return array;
}

// Running: dirty until closed, missing and failed roles recorded, re-added members written
// too and then back in service.
Result<void> Array::record_running(const std::vector<unsigned>& readded,
                                   const std::vector<unsigned>& broken) {
  std::lock_guard lock(mutex_);
  for (unsigned role : readded) master_.member_states[role] = MemberState::active;
  for (unsigned role : broken) master_.member_states[role] = MemberState::faulty;
  rejoining_ = readded;  // their superblocks are written too, then they serve I/O
  for (unsigned role = 0; role < master_.member_count; ++role) {
    if (by_role_[role] == nullptr && master_.member_states[role] == MemberState::active) {
      master_.member_states[role] = MemberState::missing;
    }
    // Failed before the failure listener was installed (during replay): recorded here,
    // before the superblocks are written, so it can never come back as current.
    if (by_role_[role] != nullptr && !volume_->active(role) && !rejoining(role) &&
        master_.member_states[role] == MemberState::active) {
      master_.member_states[role] = MemberState::faulty;
      raid_log().error("array {}: role {} ({}) failed while the array was starting",
                       format_uuid(master_.array_uuid), role, by_role_[role]->name());
    }
  }
  master_.set_clean(false);
  // Kept from an unlogged run that crashed until a clean shutdown (its torn stripes are
  // resynced meanwhile); set for this run if it does not log.
  if (stripe_log_ && !logging_) master_.set_unlogged(true);
  ++master_.events;
  if (auto w = write_superblocks(); !w) return w;
  for (unsigned role : rejoining_) volume_->restore_member(role);
  rejoining_.clear();
  return {};
}

Array::Array(Superblock master, std::vector<Member*> by_role, std::vector<Uuid> member_uuids,
             std::unique_ptr<Volume> volume, std::vector<std::string> notes)
    : master_(std::move(master)),
      by_role_(std::move(by_role)),
      member_uuids_(std::move(member_uuids)),
      volume_(std::move(volume)),
      notes_(std::move(notes)) {
  checkpoints_.fill(kNotRebuilding);
  rebuild_.total = volume_->geometry().stripes();
  recorder_ = std::thread([this] { record_loop(); });
  volume_->set_failure_listener(
      [this](unsigned role, const Error& why) { on_member_failed(role, why); });
}

Array::~Array() {
  close_scrub();
  stop_rebuild();
  wait_resync();
  if (!closed_) {
    if (auto c = close(); !c) raid_log().error("closing the array: {}", c.error().message);
  }
  volume_->set_failure_listener(nullptr);
  {
    std::lock_guard lock(queue_mutex_);
    stopping_ = true;
  }
  queue_cv_.notify_all();
  recorder_.join();
}

Superblock Array::superblock() const {
  std::lock_guard lock(mutex_);
  return master_;
}

Result<void> Array::record_spare(Member& device, bool spare) {
  if (!spare) {
    AlignedBuffer blank(kSuperblockSize);
    std::memset(blank.data(), 0, blank.size());
    return member_write(device, kSuperblockOffset, blank.span(), /*fua=*/true);
  }
  if (auto f = fits(device); !f) return f;
  Superblock sb = superblock();
  sb.role = kSpareRole;
  sb.member_uuid = generate_uuid();
  sb.rebuild_checkpoint = kNotRebuilding;
  return write_superblock(device, sb);
}

Result<void> Array::write_superblocks() {
  master_.updated = superblock_time();
  if (intent_) intent_->set_events(master_.events);
  // Hot replaces' new devices first, so a crash between these writes never leaves one behind
  // a member that is current (assembly would think its copy stale). One that cannot take the
  // record gets nothing more: the replace stops.
  for (unsigned role = 0; role < master_.member_count; ++role) {
    ReplacingMember* copy = replacing_[role].get();
    if (copy == nullptr || by_role_[role] == &copy->replacement() || copy->replacement_failed()) {
      continue;
    }
    if (auto w = write_superblock(copy->replacement(), replacement_record(role)); !w) {
      copy->fail_replacement(Error{
          w.error().code, fmt::format("{}: {}", copy->replacement().name(), w.error().message)});
    }
  }
  // Re-added members first: one that cannot take the record stays out (faulty), and the
  // others record that instead of its return; the re-added ones written before it are
  // written again, so no superblock says it is back.
  for (bool again = true; again;) {
    again = false;
    for (auto it = rejoining_.begin(); it != rejoining_.end();) {
      Superblock mine = master_;
      mine.role = static_cast<uint16_t>(*it);
      mine.member_uuid = member_uuids_[*it];
      if (auto w = write_superblock(*by_role_[*it], mine); !w) {
        raid_log().error("re-adding role {}: {}", *it, w.error().message);
        master_.member_states[*it] = MemberState::faulty;
        notes_.push_back(fmt::format("member {} (role {}) could not take its superblock; kept out",
                                     by_role_[*it]->name(), *it));
        it = rejoining_.erase(it);
        again = !rejoining_.empty();  // the others, with its failure recorded
        continue;
      }
      ++it;
    }
  }
  std::optional<Error> last;
  unsigned written = 0;
  for (unsigned role = 0; role < master_.member_count; ++role) {
    Member* m = by_role_[role];
    if (m == nullptr || !(volume_->active(role) || volume_->recovering(role))) continue;
    Superblock mine = master_;
    mine.role = static_cast<uint16_t>(role);
    mine.member_uuid = member_uuids_[role];
    mine.rebuild_checkpoint = checkpoints_[role];
    if (auto w = write_superblock(*m, mine); !w) {
      // A member that cannot take the array's record must not take its data either.
      last = w.error();
      volume_->fail_member(role, w.error());
      continue;
    }
    ++written;
  }
  if (last) {
    return fail(last->code, "superblock update reached {} of the active members: {}", written,
                last->message);
  }
  return {};
}

void Array::on_member_failed(unsigned role, const Error& why) {
  {
    std::lock_guard lock(queue_mutex_);
    failed_roles_.push_back({role, volume_->failed_incarnation(role), why.message});
    ++failures_queued_;
  }
  queue_cv_.notify_one();
}

const char* to_string(ArrayEvent::Kind kind) {
  switch (kind) {
    case ArrayEvent::Kind::member_failed:
      return "member-failed";
    case ArrayEvent::Kind::rebuild_started:
      return "rebuild-started";
    case ArrayEvent::Kind::rebuild_finished:
      return "rebuild-finished";
    case ArrayEvent::Kind::rebuild_failed:
      return "rebuild-failed";
    case ArrayEvent::Kind::replace_started:
      return "replace-started";
    case ArrayEvent::Kind::replace_finished:
      return "replace-finished";
    case ArrayEvent::Kind::replace_failed:
      return "replace-failed";
    case ArrayEvent::Kind::device_errors:
      return "device-errors";
    case ArrayEvent::Kind::scrub_finished:
      return "scrub-finished";
  }
  return "unknown";
}

void Array::set_event_listener(EventListener listener) {
  std::lock_guard lock(event_mutex_);
  events_ = std::move(listener);
}

// Under event_mutex_, so set_event_listener(nullptr) waits out a call in progress and the
// listener's owner may go once it returns.
void Array::emit(ArrayEvent event) {
  std::lock_guard lock(event_mutex_);
  if (events_) events_(event);
}

Member* Array::member_device(unsigned role) const {
  std::lock_guard lock(mutex_);
  return role < by_role_.size() ? by_role_[role] : nullptr;
}

bool Array::runs_without(unsigned role) const {
  const Level::Active others = [this, role](unsigned m) { return m != role && volume_->active(m); };
  return Level::create(volume_->geometry())->survives(others);
}

Result<void> Array::fits(const Member& device) const {
  std::lock_guard lock(mutex_);
  const uint64_t needed = master_.data_offset + master_.data_size;
  if (device.size() < needed) {
    return fail(ENOSPC, "{}: {} bytes is too small (a member needs at least {})", device.name(),
                device.size(), needed);
  }
  for (unsigned r = 0; r < master_.member_count; ++r) {
    if (by_role_[r] == nullptr || !volume_->active(r)) continue;
    if (device.limits().logical_block != by_role_[r]->limits().logical_block) {
      return fail(EINVAL, "{}: logical block size {} differs from the array's {}", device.name(),
                  device.limits().logical_block, by_role_[r]->limits().logical_block);
    }
    break;
  }
  return {};
}

Result<void> Array::fail_member(unsigned role) {
  const Geometry& g = volume_->geometry();
  if (role >= g.members()) {
    return fail(EINVAL, "role {}: the array has {} members", role, g.members());
  }
  if (!volume_->active(role) && !volume_->recovering(role)) {
    return fail(EINVAL, "role {} is out of service already", role);
  }
  if (volume_->active(role) && !runs_without(role)) {
    return fail(EBUSY, "role {} cannot be failed: the array cannot run without it", role);
  }
  volume_->fail_member(role, Error{ECANCELED, "failed on request"});
  std::unique_lock lock(queue_mutex_);
  const uint64_t target = failures_queued_;
  recorded_cv_.wait(lock, [&] { return failures_recorded_ >= target || stopping_; });
  return {};
}

void Array::record_loop() {
  std::unique_lock lock(queue_mutex_);
  for (;;) {
    queue_cv_.wait(lock, [this] { return stopping_ || !failed_roles_.empty(); });
    if (failed_roles_.empty()) return;
    const Failure failure = failed_roles_.front();
    const unsigned role = failure.role;
    failed_roles_.pop_front();
    lock.unlock();
    std::string device;
    {
      std::lock_guard state(mutex_);
      // A role given to a new device since (rebuild) no longer records the old one's
      // failure: the new one is what the role holds now.
      if (failure.incarnation == volume_->incarnation(role)) {
        master_.member_states[role] = MemberState::faulty;
      }
      if (by_role_[role] != nullptr) device = by_role_[role]->name();
      ++master_.events;
      if (auto w = write_superblocks(); !w) {
        // Members that could not take the record were failed in turn (and are queued here).
        raid_log().error("recording the failure of role {}: {}", role, w.error().message);
      }
    }
    // Held writes may go on: survivors hold the record, or every member that missed it has
    // been failed too, so nothing that lacks the record serves data.
    volume_->failure_recorded(role);
    emit({ArrayEvent::Kind::member_failed, role, device, failure.why});
    lock.lock();
    ++failures_recorded_;
    recorded_cv_.notify_all();
  }
}

Result<void> Array::close() {
  if (closed_) return {};
  close_scrub();   // its checkpoint recorded: resume_scrub() after the next open
  stop_rebuild();  // its checkpoint recorded: the next open resumes it
  // Clean means consistent: an unfinished resync must complete first.
  const ResyncProgress resync = wait_resync();
  auto flushed = volume_->flush();
  if (flushed && stripe_log_) flushed = stripe_log_->checkpoint();
  std::lock_guard lock(mutex_);
  closed_ = true;
  if (!flushed) return fail(flushed.error());
  // A hot replace under way: what it copied is flushed with the rest (its writes mirrored),
  // so its checkpoint goes up to there; the next open resumes it.
  for (unsigned role = 0; role < master_.member_count; ++role) {
    if (ReplacingMember* copy = replacing_[role].get(); copy != nullptr) {
      replace_checkpoints_[role] = copy->copied();
    }
  }
  if (resync.error) return fail(*resync.error);
  master_.set_clean(true);
  master_.set_unlogged(false);
  ++master_.events;
  return write_superblocks();
}

}  // namespace stripefs
