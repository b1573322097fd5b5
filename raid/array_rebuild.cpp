// Rebuilding members onto new devices while the array is in use (md's recovery): the device
// takes the role, a thread rebuilds it stripe by stripe (Volume::rebuild_member, which
// moves its recovery point up under each stripe's lock), rate-limited, its progress
// recorded in its superblock every few seconds, and puts it in service at the end.
#include <algorithm>
#include <chrono>
#include <thread>

#include "raid/array.hpp"
#include "raid/log.hpp"

namespace stripefs {

namespace {

// Member bytes per round between rate checks, under a limit (Volume::rebuild_member batches
// inside it).
constexpr uint64_t kStepBytes = 16u << 20;

double seconds_since(std::chrono::steady_clock::time_point t) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - t).count();
}

}  // namespace

Result<void> Array::rebuild(unsigned role, Member* device) {
  return recover_onto(role, device, std::nullopt);
}

Result<void> Array::readd(unsigned role, Member* device) {
  if (!intent_) return fail(EINVAL, "the array has no write-intent bitmap: rebuild instead");
  if (device == nullptr) return fail(EINVAL, "no device given for role {}", role);
  auto sb = read_superblock(*device);
  if (!sb)
    return fail(sb.error().code, "{} cannot be re-added: {}", device->name(), sb.error().message);
  const Superblock ours = superblock();
  if (sb->array_uuid != ours.array_uuid) {
    return fail(EINVAL, "{} is not a member of this array", device->name());
  }
  if (sb->replacement()) {
    // Its copy is complete only below its checkpoint: it never held the role's data.
    return fail(EINVAL, "{} is an unfinished replacement of role {}, not a member: add it",
                device->name(), sb->role);
  }
  if (sb->role != role) {
    return fail(EINVAL, "{} was role {}, not role {}", device->name(), sb->role, role);
  }
  if (sb->events > ours.events) {
    return fail(EINVAL, "{} is newer than the array (events {} > {}): it ran without it",
                device->name(), sb->events, ours.events);
  }
  return recover_onto(role, device, sb->events);
}

Result<void> Array::recover_onto(unsigned role, Member* device, std::optional<uint64_t> since) {
  const Geometry& g = volume_->geometry();
  if (role >= g.members()) {
    return fail(EINVAL, "role {}: the array has {} members", role, g.members());
  }
  if (device == nullptr) return fail(EINVAL, "no device given for role {}", role);
  if (volume_->active(role) || volume_->recovering(role)) {
    return fail(EBUSY, "role {} is {}; only a failed or missing role can be rebuilt", role,
                volume_->active(role) ? "in service" : "being rebuilt already");
  }
  Superblock record;
  {
    std::lock_guard lock(mutex_);
    // Its hot replace ends first, and rebuilds onto its new device itself if it can.
    if (replacing_[role]) {
      return fail(EBUSY, "role {} is being replaced (by {}); the replace ends first", role,
                  replacing_[role]->replacement().name());
    }
    for (unsigned r = 0; r < g.members(); ++r) {
      // A re-add brings back the role's own device (its failed one, say).
      if (by_role_[r] == device && !(since && r == role)) {
        return fail(EINVAL, "{} is a member of this array already", device->name());
      }
    }
    record = master_;
  }
  if (auto f = fits(*device); !f) return f;
  // The others must hold everything without it: nothing is written to a device that could
  // not be rebuilt.
  if (!runs_without(role)) {
    return fail(EIO, "role {} cannot be rebuilt: too many members are missing", role);
  }
  {
    std::lock_guard lock(mutex_);
    Superblock mine = master_;
    mine.role = static_cast<uint16_t>(role);
    mine.member_uuid = generate_uuid();
    mine.member_states[role] = MemberState::rebuilding;
    mine.rebuild_checkpoint = 0;
    if (auto w = write_superblock(*device, mine); !w) return fail(w.error());
    by_role_[role] = device;
    member_uuids_[role] = mine.member_uuid;
    checkpoints_[role] = 0;
    readd_since_[role] = since;
    master_.member_states[role] = MemberState::rebuilding;
    ++master_.events;
    volume_->start_recovery(role, device, 0);
    if (auto w = write_superblocks(); !w) return fail(w.error());
  }
  raid_log().warn("array {}: {} role {} onto {}", format_uuid(record.array_uuid),
                  since ? "re-adding" : "rebuilding", role, device->name());
  emit({ArrayEvent::Kind::rebuild_started, role, device->name(), ""});  // before its end
  start_rebuilds({role});
  return {};
}

void Array::start_rebuilds(std::vector<unsigned> roles) {
  std::lock_guard lock(rebuild_mutex_);
  if (rebuild_stopping_) return;  // closing: the superblocks say where to resume
  for (unsigned role : roles) {
    rebuild_queue_.push_back(role);
    rebuild_.roles.push_back(role);
  }
  // A running thread takes them in turn. One that ended is done with the lock (it marks
  // itself not running, under it, as its last act).
  if (!rebuild_.running) {
    if (rebuild_thread_.joinable()) rebuild_thread_.join();
    rebuild_.running = true;
    rebuild_.error.reset();
    rebuild_thread_ = std::thread([this] { rebuild_loop(); });
  }
  rebuild_cv_.notify_all();
}

void Array::rebuild_loop() {
  std::unique_lock lock(rebuild_mutex_);
  while (!rebuild_stopping_ && !rebuild_queue_.empty()) {
    const unsigned role = rebuild_queue_.front();
    lock.unlock();
    bool replace = false;
    Member* device = nullptr;
    {
      std::lock_guard state(mutex_);
      replace = replacing_[role] != nullptr;
      device = replace ? &replacing_[role]->replacement() : by_role_[role];
    }
    Result<void> done = replace ? replace_role(role) : rebuild_role(role);
    if (!replace) device = member_device(role);
    lock.lock();
    rebuild_queue_.pop_front();
    const bool stopped = rebuild_stopping_;
    if (!done && !stopped) {
      rebuild_.error = done.error();
      raid_log().error("{} of role {}: {}", replace ? "replace" : "rebuild", role,
                       done.error().message);
    }
    if (done || !stopped || replace) {
      // One entry: a replace whose old device failed queued the role again, as a rebuild.
      if (auto it = std::find(rebuild_.roles.begin(), rebuild_.roles.end(), role);
          it != rebuild_.roles.end()) {
        rebuild_.roles.erase(it);
      }
    }
    if (replace ? (done || !stopped) : (done ? volume_->active(role) : !stopped)) {
      using K = ArrayEvent::Kind;
      const K kind = replace ? (done ? K::replace_finished : K::replace_failed)
                             : (done ? K::rebuild_finished : K::rebuild_failed);
      lock.unlock();
      emit({kind, role, device != nullptr ? device->name() : "", done ? "" : done.error().message});
      lock.lock();
    }
  }
  rebuild_.running = false;
  rebuild_cv_.notify_all();
}

// One role, from its recovery point to the end.
Result<void> Array::rebuild_role(unsigned role) {
  const Geometry& g = volume_->geometry();
  const uint64_t stripes = g.stripes();
  const auto started = std::chrono::steady_clock::now();
  auto checkpointed = started;
  uint64_t stripe = volume_->recovered(role);
  {
    std::lock_guard lock(rebuild_mutex_);
    rebuild_.current = role;
    rebuild_.replace = false;
    rebuild_.done = stripe;
    rebuild_.total = stripes;
    rebuild_.bytes = 0;  // the rate (and so the ETA) is this role's
    rebuild_.written = 0;
    rebuild_.seconds = 0;
  }
  // A re-add rebuilds only what the bitmap recorded since the device was last current,
  // asked under each batch's locks.
  std::optional<uint64_t> since;
  {
    std::lock_guard lock(mutex_);
    since = readd_since_[role];
  }
  Volume::NeededStripes needed;
  if (since && intent_) {
    needed = [this, since] {
      std::vector<std::pair<uint64_t, uint64_t>> stripes;
      for (auto [begin, end] : intent_->ranges_missed_since(*since)) {
        stripes.push_back(volume_->stripes_of(begin, end));
      }
      return [stripes = std::move(stripes)](uint64_t stripe) {
        return std::any_of(stripes.begin(), stripes.end(), [stripe](const auto& r) {
          return stripe >= r.first && stripe <= r.second;
        });
      };
    };
  }
  Pacing pacing = start_pacing();
  Round round{started};
  while (stripe < stripes) {
    if (!start_round(pacing, round)) break;
    if (!volume_->recovering(role)) {
      return fail(EIO, "role {} ({}) failed while it was rebuilt", role, by_role_[role]->name());
    }
    const uint64_t count =
        round.limited
            ? std::min(std::max<uint64_t>(1, step_bytes() / g.chunk_size()), stripes - stripe)
            : stripes - stripe;
    uint64_t reached = stripe, rebuilt = 0, counted = 0;
    std::optional<Error> checkpoint_failed;
    const auto batch_done = [&](uint64_t end) {
      const uint64_t written = (end - reached) * g.chunk_size();
      reached = end;
      const bool goes_on =
          round_progress(pacing, round, end, written, (rebuilt - counted) * g.chunk_size());
      counted = rebuilt;
      if (std::chrono::steady_clock::now() - checkpointed >= checkpoint_every_) {
        if (auto r = record_checkpoint(role, end); !r) {
          checkpoint_failed = r.error();
          return false;
        }
        checkpointed = std::chrono::steady_clock::now();
      }
      return goes_on && volume_->recovering(role);
    };
    bool target_failed = false;
    if (auto r = volume_->rebuild_member(role, stripe, count, &target_failed, needed, &rebuilt,
                                         batch_done);
        !r) {
      return r;
    }
    if (checkpoint_failed) return fail(*checkpoint_failed);
    stripe = reached;
    pace(pacing, round.limited ? round.bytes : 0);  // an unlimited round owes nothing
  }
  if (stripe < stripes) return record_checkpoint(role, stripe);  // stopped: resumes from here
  // Every stripe rebuilt: durable on the device, with its copies of the array's metadata
  // areas (the write-intent bitmap, the write-hole journal), then in service, then recorded.
  // The areas are copied before it joins, so no open ever reads a blank copy from a member
  // in service, and again after, for what changed between the copy and its joining (until
  // then their writes skipped it).
  if (auto r = copy_member_areas(role); !r) return r;
  if (auto r = member_flush(*by_role_[role]); !r) {
    volume_->fail_member(role, r.error());
    return fail(r.error().code, "role {}: {}", role, r.error().message);
  }
  std::lock_guard lock(mutex_);
  volume_->finish_recovery(role);
  if (auto r = copy_member_areas(role); !r) return r;
  if (!volume_->active(role)) return fail(EIO, "role {} failed at the end of its rebuild", role);
  checkpoints_[role] = kNotRebuilding;
  readd_since_[role].reset();
  master_.member_states[role] = MemberState::active;
  ++master_.events;
  raid_log().warn("array {}: role {} ({}) rebuilt in {:.1f} s", format_uuid(master_.array_uuid),
                  role, by_role_[role]->name(), seconds_since(started));
  return write_superblocks();
}

uint64_t Array::step_bytes() const {
  // A slow task still moves (and can be stopped) in small steps, whole 64 KiB (aligned for
  // any device, and a replace's pieces stay so).
  constexpr uint64_t kUnit = 64 * 1024;
  const uint64_t limit =
      speed_max_.load() == 0 ? 0 : std::max(speed_min_.load(), speed_max_.load());
  const uint64_t bytes = limit == 0 ? kStepBytes : std::min(kStepBytes, limit / 4);
  return std::max(kUnit, bytes / kUnit * kUnit);
}

bool Array::start_round(Pacing& pacing, Round& round) {
  {
    std::lock_guard lock(rebuild_mutex_);
    if (rebuild_stopping_) return false;
    if (speed_generation_ != pacing.generation) {  // new limits: counted from now
      pacing.generation = speed_generation_;
      pacing.allowed = 0;
      pacing.paced = std::chrono::steady_clock::now();
    }
  }
  round.limited = current_rate(pacing) != 0;
  round.bytes = 0;
  return true;
}

bool Array::round_progress(const Pacing& pacing, Round& round, uint64_t done, uint64_t moved,
                           uint64_t written) {
  round.bytes += moved;
  bool stopping = false;
  {
    std::lock_guard lock(rebuild_mutex_);
    rebuild_.done = done;
    rebuild_.bytes += moved;
    rebuild_.written += written;
    rebuild_.seconds += seconds_since(round.window);
    stopping = rebuild_stopping_ || speed_generation_ != pacing.generation;
  }
  round.window = std::chrono::steady_clock::now();
  return !stopping && (round.limited || current_rate(pacing) == 0);
}

uint64_t Array::user_ios() const {
  const VolumeStats now = volume_->stats();
  return now.member_read_ios + now.member_write_ios;
}

void Array::discount_own_ios(Pacing& pacing, uint64_t before) const {
  pacing.user_ios += user_ios() - before;
}

Array::Pacing Array::start_pacing() {
  Pacing p;
  p.paced = std::chrono::steady_clock::now();
  p.user_ios = user_ios();
  std::lock_guard lock(rebuild_mutex_);
  p.generation = speed_generation_;
  return p;
}

uint64_t Array::current_rate(const Pacing& p) const {
  // md's speed limits: the minimum while the array has other I/O, up to the maximum when it
  // has none. The Volume counts only user I/O (a rebuild's and a scrub's go to the members
  // uncounted, and a scrub checker's reads are discounted: discount_own_ios).
  return user_ios() != p.user_ios ? speed_min_.load() : speed_max_.load();
}

// `allowed` is the seconds of work the limits allow since `paced`; a change of the limits
// (speed_generation_) starts the account afresh, and wakes a waiting task.
void Array::pace(Pacing& p, uint64_t written, const std::atomic<bool>* stop) {
  const uint64_t rate = current_rate(p);
  p.user_ios = user_ios();
  p.allowed += rate == 0 ? 0.0 : static_cast<double>(written) / static_cast<double>(rate);
  const double ahead = p.allowed - seconds_since(p.paced);
  if (ahead > 0) {
    std::unique_lock lock(rebuild_mutex_);
    rebuild_cv_.wait_for(lock, std::chrono::duration<double>(ahead), [&] {
      return rebuild_stopping_ || speed_generation_ != p.generation ||
             (stop != nullptr && stop->load());
    });
    if (speed_generation_ != p.generation) {
      p.generation = speed_generation_;
      p.allowed = 0;
      p.paced = std::chrono::steady_clock::now();
    }
  } else if (ahead < -1.0) {
    p.allowed = seconds_since(p.paced) - 1.0;  // no credit hoarded while slower than allowed
  }
}

Result<void> Array::copy_member_areas(unsigned role) {
  Result<void> copied;
  if (intent_) copied = intent_->member_returned(*by_role_[role]);
  if (copied && stripe_log_) copied = stripe_log_->member_returned(role);
  if (!copied) {
    volume_->fail_member(role, copied.error());
    return fail(copied.error().code, "role {}: copying the bitmap and journal onto {}: {}", role,
                by_role_[role]->name(), copied.error().message);
  }
  return {};
}

// The rebuilt part, recorded in the device's superblock: member bytes below the first stripe
// not rebuilt (what a resume starts from; on RAID10 a row may be done again). Flushed first:
// a checkpoint must never say rebuilt what a power cut can still take from the device.
Result<void> Array::record_checkpoint(unsigned role, uint64_t stripes) {
  const uint64_t bytes = volume_->member_range(stripes, stripes).first;
  if (Member* device = member_device(role); device != nullptr) {
    if (auto f = member_flush(*device); !f) {
      volume_->fail_member(role, f.error());
      return fail(f.error().code, "role {}: {}", role, f.error().message);
    }
  }
  std::lock_guard lock(mutex_);
  checkpoints_[role] = bytes;
  ++master_.events;
  return write_superblocks();
}

std::vector<unsigned> Array::resume_rebuilds() {
  std::vector<unsigned> roles;
  {
    std::lock_guard lock(rebuild_mutex_);
    for (unsigned role = 0; role < volume_->geometry().members(); ++role) {
      if (volume_->recovering(role) &&
          std::find(rebuild_queue_.begin(), rebuild_queue_.end(), role) == rebuild_queue_.end()) {
        roles.push_back(role);
      }
    }
  }
  if (!roles.empty()) start_rebuilds(roles);
  return roles;
}

RebuildProgress Array::rebuild_progress() const {
  std::lock_guard lock(rebuild_mutex_);
  return rebuild_;
}

RebuildProgress Array::wait_rebuild() {
  std::unique_lock lock(rebuild_mutex_);
  rebuild_cv_.wait(lock, [this] { return !rebuild_.running; });
  return rebuild_;
}

void Array::set_rebuild_speed(uint64_t min, uint64_t max) {
  {
    std::lock_guard lock(rebuild_mutex_);
    speed_min_.store(min);
    speed_max_.store(max);
    ++speed_generation_;
  }
  rebuild_cv_.notify_all();
}

void Array::stop_rebuild() {
  {
    std::lock_guard lock(rebuild_mutex_);
    rebuild_stopping_ = true;
  }
  rebuild_cv_.notify_all();
  if (rebuild_thread_.joinable()) rebuild_thread_.join();
}

}  // namespace stripefs
