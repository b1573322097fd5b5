#include "raid/array.hpp"

#include <algorithm>
#include <ctime>
#include <set>

#include "raid/aligned_buffer.hpp"
#include "raid/log.hpp"

namespace stripefs {

namespace {

uint64_t now() {
  return static_cast<uint64_t>(std::time(nullptr));
}

// The fields every member of one array must agree on; the first that differs, by name.
std::optional<std::string> geometry_mismatch(const Superblock& a, const Superblock& b) {
  if (a.level != b.level) return "level";
  if (a.layout != b.layout) return "layout";
  if (a.member_count != b.member_count) return "member_count";
  if (a.chunk_size != b.chunk_size) return "chunk_size";
  if (a.data_offset != b.data_offset) return "data_offset";
  if (a.data_size != b.data_size) return "data_size";
  return std::nullopt;
}

}  // namespace

Result<Superblock> create_array(std::span<Member* const> members, const ArrayOptions& options) {
  const unsigned count = static_cast<unsigned>(members.size());
  if (count == 0) return fail(EINVAL, "no members given");
  // Probe the geometry first so level/count/chunk errors come before any member is read.
  if (auto g = Geometry::create(options.level, count, options.chunk_size, options.chunk_size,
                                options.layout);
      !g) {
    return fail(g.error());
  }
  if (options.data_offset % 4096 != 0 ||
      options.data_offset < kSuperblockOffset + kSuperblockSize) {
    return fail(EINVAL, "data offset {} must be a multiple of 4096 after the superblock",
                options.data_offset);
  }
  if (options.journal_size != 0 &&
      (options.journal_offset % 4096 != 0 || options.journal_size % 4096 != 0 ||
       options.journal_offset < kSuperblockOffset + kSuperblockSize ||
       options.journal_offset > options.data_offset ||
       options.journal_size > options.data_offset - options.journal_offset)) {
    return fail(EINVAL,
                "journal area [{}, +{}) must be 4096-aligned, after the superblock and "
                "before the data offset {}",
                options.journal_offset, options.journal_size, options.data_offset);
  }
  uint64_t smallest = UINT64_MAX;
  const uint32_t block = members[0]->limits().logical_block;
  for (Member* m : members) {
    if (m->limits().logical_block != block) {
      return fail(EINVAL, "member {}: logical block size {} differs from {} of {}", m->name(),
                  m->limits().logical_block, block, members[0]->name());
    }
    const uint64_t needed = options.data_offset + options.chunk_size;
    if (m->size() < needed) {
      return fail(ENOSPC, "member {}: {} bytes is too small (needs at least {})", m->name(),
                  m->size(), needed);
    }
    smallest = std::min(smallest, m->size());
    auto existing = read_superblock(*m);
    if (existing && !options.force) {
      return fail(EEXIST, "member {}: holds array {} ('{}', role {}); force to overwrite it",
                  m->name(), format_uuid(existing->array_uuid), existing->label, existing->role);
    }
    if (!existing && existing.error().code != ENODATA && existing.error().code != EUCLEAN &&
        existing.error().code != EINVAL) {
      return fail(existing.error());  // could not even read it
    }
  }
  std::set<Member*> distinct(members.begin(), members.end());
  if (distinct.size() != members.size()) return fail(EINVAL, "a member is given twice");

  const uint64_t data_size =
      (smallest - options.data_offset) / options.chunk_size * options.chunk_size;
  auto geometry =
      Geometry::create(options.level, count, options.chunk_size, data_size, options.layout);
  if (!geometry) return fail(geometry.error());

  Superblock sb;
  sb.array_uuid = is_zero(options.uuid) ? generate_uuid() : options.uuid;
  sb.label = options.label;
  sb.created = sb.updated = now();
  sb.level = options.level;
  sb.layout = options.layout;
  sb.member_count = static_cast<uint16_t>(count);
  sb.chunk_size = options.chunk_size;
  sb.data_offset = options.data_offset;
  sb.data_size = data_size;
  sb.journal_offset = options.journal_offset;
  sb.journal_size = options.journal_size;
  sb.events = 1;
  sb.set_clean(options.assume_clean);  // dirty until the initial sync completes
  if (sb.label.size() > kLabelSize) {
    return fail(EINVAL, "label '{}' is longer than {} bytes", sb.label, kLabelSize);
  }
  if (options.validate) {
    if (auto valid = options.validate(members, sb); !valid) return fail(valid.error());
  }
  if (options.prepare) {
    if (auto prepared = options.prepare(members, sb); !prepared) return fail(prepared.error());
  }
  std::vector<Superblock> written(count, sb);
  for (unsigned role = 0; role < count; ++role) {
    written[role].role = static_cast<uint16_t>(role);
    written[role].member_uuid = generate_uuid();
    if (auto w = write_superblock(*members[role], written[role]); !w) return fail(w.error());
  }
  if (!options.assume_clean) {
    // Initial sync: parity (or mirrors) made consistent with whatever the members hold,
    // then the array is recorded clean. Until then a crash leaves it dirty, so the next
    // assembly syncs again.
    auto volume = Volume::create(*geometry, {members.begin(), members.end()}, sb.data_offset);
    if (!volume) return fail(volume.error());
    auto synced = (*volume)->check_stripes(0, geometry->stripes(), true);
    if (!synced) return fail(synced.error());
    if (auto f = (*volume)->flush(); !f) return fail(f.error());
    for (unsigned role = 0; role < count; ++role) {
      written[role].set_clean(true);
      written[role].events = 2;
      written[role].updated = now();
      if (auto w = write_superblock(*members[role], written[role]); !w) return fail(w.error());
    }
  }
  return written[0];
}

Result<Assembly> assemble(std::span<Member* const> members, bool force) {
  if (members.empty()) return fail(EINVAL, "no members given");
  struct Found {
    Member* member;
    Superblock sb;
  };
  std::vector<Found> found;
  std::vector<std::string> notes;
  for (Member* m : members) {
    auto sb = read_superblock(*m);
    if (!sb) {
      if (sb.error().code == ENODATA) return fail(sb.error());  // not a member of any array
      // Damaged: the member cannot vouch for itself; leave it out and say so.
      notes.push_back(fmt::format("{} (kept out)", sb.error().message));
      continue;
    }
    found.push_back({m, *sb});
  }
  if (found.empty()) return fail(EIO, "no member has a readable superblock");
  // The freshest superblock speaks for the array.
  const Found& freshest = *std::max_element(
      found.begin(), found.end(), [](auto& a, auto& b) { return a.sb.events < b.sb.events; });
  Assembly out;
  out.superblock = freshest.sb;
  const Superblock& master = out.superblock;
  out.by_role.assign(master.member_count, nullptr);
  std::vector<const Found*> claimed(master.member_count, nullptr);
  for (const Found& f : found) {
    if (f.sb.array_uuid != master.array_uuid) {
      return fail(EINVAL, "member {}: array_uuid {} differs from {} of member {}", f.member->name(),
                  format_uuid(f.sb.array_uuid), format_uuid(master.array_uuid),
                  freshest.member->name());
    }
    if (auto field = geometry_mismatch(f.sb, master)) {
      return fail(EINVAL, "member {}: {} differs from member {}", f.member->name(), *field,
                  freshest.member->name());
    }
    // Two devices with one role (a copy of a member, say): which holds the array's data
    // cannot be chosen silently.
    if (f.sb.role >= master.member_count) {
      return fail(EINVAL, "member {}: role {} but the array has {} members", f.member->name(),
                  f.sb.role, master.member_count);
    }
    if (claimed[f.sb.role] != nullptr) {
      return fail(EINVAL, "members {} and {} both claim role {}; give only one of them",
                  claimed[f.sb.role]->member->name(), f.member->name(), f.sb.role);
    }
    claimed[f.sb.role] = &f;
  }
  for (const Found& f : found) {
    // Split brain: both were run (fresh) without the other. Neither history can be chosen
    // silently.
    if (&f != &freshest && f.sb.events + 1 >= master.events &&
        master.member_states[f.sb.role] != MemberState::active &&
        f.sb.member_states[master.role] != MemberState::active) {
      return fail(EUCLEAN,
                  "members {} and {} were each run without the other (events {} and {}); "
                  "assemble only the one whose data to keep",
                  freshest.member->name(), f.member->name(), master.events, f.sb.events);
    }
  }
  std::vector<const Found*> stale;   // behind the freshest
  std::vector<const Found*> failed;  // recorded as failed by the freshest
  for (const Found& f : found) {
    if (master.member_states[f.sb.role] != MemberState::active) {
      failed.push_back(&f);
      continue;
    }
    // One event behind is the same state: superblocks are written one member after another,
    // and a crash between two of those writes must not cost the array a member.
    if (f.sb.events + 1 < master.events) {
      stale.push_back(&f);
      continue;
    }
    out.by_role[f.sb.role] = f.member;
  }
  if (force) {
    // md's --force: bring stale or failed members back (events forced up, faulty flag
    // cleared), freshest first, while the array cannot start without them.
    stale.insert(stale.end(), failed.begin(), failed.end());
    failed.clear();
    std::sort(stale.begin(), stale.end(),
              [](const Found* a, const Found* b) { return a->sb.events > b->sb.events; });
    auto missing_count = [&] {
      return static_cast<unsigned>(std::count(out.by_role.begin(), out.by_role.end(), nullptr));
    };
    auto level = Geometry::create(master.level, master.member_count, master.chunk_size,
                                  master.data_size, master.layout);
    const unsigned tolerated = level ? level->redundancy() : 0;
    while (!stale.empty() && missing_count() > tolerated) {
      const Found* f = stale.front();
      stale.erase(stale.begin());
      out.by_role[f->sb.role] = f->member;
      out.superblock.member_states[f->sb.role] = MemberState::active;
      notes.push_back(fmt::format("member {} (role {}) is stale (events {} < {}) but forced in",
                                  f->member->name(), f->sb.role, f->sb.events, master.events));
    }
  }
  // A member recorded missing, or merely behind, left without failing: it may return.
  auto keep_out = [&](const Found* f) {
    const MemberState state = master.member_states[f->sb.role];
    std::string note =
        state == MemberState::active
            ? fmt::format("member {} (role {}) is stale: events {} < {}; kept out",
                          f->member->name(), f->sb.role, f->sb.events, master.events)
            : fmt::format("member {} (role {}) is recorded as {} (events {} of {}); kept out",
                          f->member->name(), f->sb.role,
                          state == MemberState::faulty ? "failed" : "missing", f->sb.events,
                          master.events);
    if (state == MemberState::faulty) {
      notes.push_back(std::move(note));
    } else {
      out.returning.push_back({f->sb.role, f->member, f->sb.events, std::move(note)});
    }
  };
  for (const Found* f : failed) keep_out(f);
  for (const Found* f : stale) keep_out(f);
  // A member whose last run shared no current member with it (each ran without the other:
  // a split brain) may hold writes the others never saw: re-adding it would silently drop
  // them. Kept out, as mdadm ignores such a member; assembling it alone keeps its data.
  // (If its last run had a current member, that member carried its writes on: a linear
  // history, however it recorded the others.)
  std::erase_if(out.returning, [&](const Assembly::Returning& r) {
    const Found& f = *std::find_if(found.begin(), found.end(),
                                   [&](const Found& x) { return x.member == r.member; });
    for (unsigned role = 0; role < master.member_count; ++role) {
      if (role != r.role && out.by_role[role] != nullptr &&
          f.sb.member_states[role] == MemberState::active) {
        return false;
      }
    }
    notes.push_back(fmt::format(
        "member {} (role {}) ran without member {} (events {} and {}); kept out, not re-added "
        "(assemble it alone to keep its data)",
        r.member->name(), r.role, freshest.member->name(), f.sb.events, master.events));
    return true;
  });
  std::vector<unsigned> missing;
  for (unsigned role = 0; role < master.member_count; ++role) {
    if (out.by_role[role] == nullptr) missing.push_back(role);
  }
  for (unsigned role : missing) {
    const bool said =
        std::any_of(found.begin(), found.end(), [&](const Found& f) { return f.sb.role == role; });
    if (!said)
      notes.push_back(
          fmt::format("role {} of array {} is missing", role, format_uuid(master.array_uuid)));
  }
  out.notes = std::move(notes);
  return out;
}

Result<std::unique_ptr<Array>> Array::open(std::span<Member* const> members,
                                           const OpenOptions& options) {
  auto assembly = assemble(members, options.force);
  if (!assembly) return fail(assembly.error());
  Superblock& sb = assembly->superblock;
  auto geometry =
      Geometry::create(sb.level, sb.member_count, sb.chunk_size, sb.data_size, sb.layout);
  if (!geometry) return fail(geometry.error());
  // Members that left without failing come back when the bitmap can tell what they missed
  // (md's re-add): they join the Volume held out, and are rebuilt below.
  const bool can_readd = options.write_intent && sb.bitmap_size != 0 && geometry->redundancy() > 0;
  std::vector<Member*> in_volume = assembly->by_role;
  std::vector<Assembly::Returning> returning;
  for (auto& r : assembly->returning) {
    if (can_readd) {
      in_volume[r.role] = r.member;
      returning.push_back(r);
    } else {
      assembly->notes.push_back(r.note);
    }
  }
  auto volume = Volume::create(*geometry, in_volume, sb.data_offset);
  for (const auto& r : returning) {
    if (volume) (*volume)->hold_out(r.role);
  }
  if (volume && (*volume)->failed()) {
    volume = fail(ENODEV, "{} of {} members missing; {} tolerates {}", (*volume)->missing_members(),
                  geometry->members(), to_string(sb.level), geometry->redundancy());
  }
  if (!volume) {
    std::string why = volume.error().message;
    for (const auto& note : assembly->notes) why += "; " + note;
    for (const auto& r : returning) why += "; " + r.note;
    return fail(volume.error().code, "array {}: cannot start: {}", format_uuid(sb.array_uuid), why);
  }
  const bool degraded = (*volume)->missing_members() > 0;
  std::unique_ptr<StripeLog> stripe_log;
  if (sb.journal_size != 0) {
    if (!options.stripe_log) {
      return fail(EINVAL,
                  "array {} keeps a write-ahead journal ({} bytes at byte {} of {}): open it "
                  "with its journal",
                  format_uuid(sb.array_uuid), sb.journal_size, sb.journal_offset,
                  is_zero(sb.journal_device_uuid) ? "its members" : "its journal device");
    }
    auto made = options.stripe_log(**volume, sb, options.force);
    if (!made) return fail(made.error());
    stripe_log = std::move(*made);
    // Before anything else: torn stripes get their logged contents back.
    auto replayed = stripe_log->replay(**volume);
    if (!replayed) return fail(replayed.error());
    if (*replayed > 0) {
      raid_log().warn("array {}: replayed {} logged stripe writes", format_uuid(sb.array_uuid),
                      *replayed);
    }
    if (options.log_partial_stripes) (*volume)->set_stripe_log(stripe_log.get());
  }
  // Without a stripe log (or after a run that did not use it), a crash may have torn
  // stripes that a missing member's chunk can no longer be rebuilt from.
  if (!sb.clean() && degraded && !options.force && !(stripe_log && !sb.unlogged())) {
    return fail(EUCLEAN,
                "array {}: was not shut down cleanly and is degraded, so parity may not match "
                "the data; refusing to start (force to accept)",
                format_uuid(sb.array_uuid));
  }
  std::unique_ptr<WriteIntent> intent;
  if (sb.bitmap_size != 0 && !options.write_intent && !options.ignore_bitmap) {
    // Writes it did not record would be missing from it when a member is re-added later.
    return fail(EINVAL, "array {} keeps a write-intent bitmap: open it with its bitmap",
                format_uuid(sb.array_uuid));
  }
  if (options.write_intent && sb.bitmap_size != 0) {
    auto made = options.write_intent(**volume, sb, options.force);
    if (!made) return fail(made.error());
    intent = std::move(*made);
    (*volume)->set_write_intent(intent.get());
  }
  // Re-add: each returning member gets what it missed rebuilt from the others, where the
  // bitmap recorded writes (it is never cleared while a member is away).
  std::vector<unsigned> readded;
  std::vector<unsigned> broken;  // returning members that failed their own writes
  for (const auto& r : returning) {
    Result<void> rebuilt;
    uint64_t stripes = 0;
    bool own_fault = false;
    for (auto [begin, end] : intent->ranges_missed_since(r.events)) {
      auto [first, last] = (*volume)->stripes_of(begin, end);
      rebuilt = (*volume)->rebuild_member(r.role, first, last - first + 1, &own_fault);
      if (!rebuilt) break;
      stripes += last - first + 1;
    }
    // Everything from here on writes to the member itself.
    if (rebuilt && !(rebuilt = member_flush(*r.member))) own_fault = true;
    if (rebuilt && !(rebuilt = intent->member_returned(*r.member))) own_fault = true;
    // (A failed journal copy may be the source's fault: not held against the member.)
    if (rebuilt && stripe_log) rebuilt = stripe_log->member_returned(r.role);
    if (!rebuilt) {
      // Its own I/O error: recorded failed, not retried at every mount.
      if (own_fault) broken.push_back(r.role);
      assembly->notes.push_back(fmt::format("{}: re-adding it failed{}: {}", r.note,
                                            own_fault ? " (recorded failed)" : "",
                                            rebuilt.error().message));
      continue;
    }
    readded.push_back(r.role);
    assembly->by_role[r.role] = r.member;
    assembly->notes.push_back(fmt::format(
        "member {} (role {}) was away; re-added, {} stripes rebuilt where the bitmap recorded "
        "writes",
        r.member->name(), r.role, stripes));
    raid_log().warn("array {}: {}", format_uuid(sb.array_uuid), assembly->notes.back());
  }
  // What an unclean shutdown may have left inconsistent: the bitmap's ranges, or all.
  std::vector<std::pair<uint64_t, uint64_t>> to_resync;
  // A member that failed during replay is out too: resync needs every member.
  if (!sb.clean() && (*volume)->missing_members() == readded.size()) {
    if (intent && !(stripe_log && stripe_log->lost_records())) {
      for (auto [begin, end] : intent->ranges_to_resync()) {
        to_resync.push_back((*volume)->stripes_of(begin, end));
      }
    } else {
      to_resync.emplace_back(0, (*volume)->geometry().stripes() - 1);
    }
    raid_log().warn("array {}: not shut down cleanly; resyncing {} stripe range(s){}",
                    format_uuid(sb.array_uuid), to_resync.size(),
                    intent ? " recorded in the bitmap" : " (no bitmap: everything)");
  }
  std::vector<Uuid> uuids(sb.member_count);
  for (unsigned role = 0; role < sb.member_count; ++role) {
    Member* m = assembly->by_role[role];
    if (m == nullptr) continue;
    auto own = read_superblock(*m);
    if (!own) return fail(own.error());
    uuids[role] = own->member_uuid;
  }
  std::unique_ptr<Array> array(new Array(sb, assembly->by_role, std::move(uuids),
                                         std::move(*volume), std::move(assembly->notes)));
  array->intent_ = std::move(intent);
  array->stripe_log_ = std::move(stripe_log);
  array->logging_ = options.log_partial_stripes;
  // Running: dirty until closed, missing roles recorded.
  {
    std::lock_guard lock(array->mutex_);
    for (unsigned role : readded) array->master_.member_states[role] = MemberState::active;
    for (unsigned role : broken) array->master_.member_states[role] = MemberState::faulty;
    array->rejoining_ = readded;  // their superblocks are written too, then they serve I/O
    for (unsigned role = 0; role < sb.member_count; ++role) {
      if (array->by_role_[role] == nullptr &&
          array->master_.member_states[role] == MemberState::active) {
        array->master_.member_states[role] = MemberState::missing;
      }
      // Failed before the failure listener was installed (during replay): recorded here,
      // before the superblocks are written, so it can never come back as current.
      if (array->by_role_[role] != nullptr && !array->volume_->active(role) &&
          !array->rejoining(role) && array->master_.member_states[role] == MemberState::active) {
        array->master_.member_states[role] = MemberState::faulty;
        raid_log().error("array {}: role {} ({}) failed while the array was starting",
                         format_uuid(sb.array_uuid), role, array->by_role_[role]->name());
      }
    }
    array->master_.set_clean(false);
    // Kept from an unlogged run that crashed until a clean shutdown (its torn stripes are
    // resynced meanwhile); set for this run if it does not log.
    if (array->stripe_log_ && !options.log_partial_stripes) array->master_.set_unlogged(true);
    ++array->master_.events;
    if (auto w = array->write_superblocks(); !w) {
      array->closed_ = true;
      return fail(w.error());
    }
    for (unsigned role : array->rejoining_) array->volume_->restore_member(role);
    array->rejoining_.clear();
  }
  // Replay keeps its records when it failed a member; recorded now, they may go.
  if (array->stripe_log_) {
    if (auto c = array->stripe_log_->checkpoint(); !c) {
      array->closed_ = true;
      return fail(c.error());
    }
  }
  // (A re-added member whose superblock write failed is out again: no resync then.)
  if (!to_resync.empty() && array->volume_->missing_members() == 0) {
    uint64_t total = 0;
    for (auto [first, last] : to_resync) total += last - first + 1;
    array->resync_ = ResyncProgress{0, total, 0, false, std::nullopt};
    array->resync_thread_ =
        std::thread([raw = array.get(), ranges = std::move(to_resync)]() mutable {
          raw->resync(std::move(ranges));
        });
  }
  return array;
}

Array::Array(Superblock master, std::vector<Member*> by_role, std::vector<Uuid> member_uuids,
             std::unique_ptr<Volume> volume, std::vector<std::string> notes)
    : master_(std::move(master)),
      by_role_(std::move(by_role)),
      member_uuids_(std::move(member_uuids)),
      volume_(std::move(volume)),
      notes_(std::move(notes)) {
  recorder_ = std::thread([this] { record_loop(); });
  volume_->set_failure_listener([this](unsigned role, const Error&) { on_member_failed(role); });
}

Array::~Array() {
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

void Array::resync(std::vector<std::pair<uint64_t, uint64_t>> stripe_ranges) {
  // In steps, so writes to the same stripes wait for one step at most.
  constexpr uint64_t kStep = 64;
  for (auto [first, last] : stripe_ranges) {
    for (uint64_t at = first; at <= last; at += kStep) {
      const uint64_t count = std::min(kStep, last - at + 1);
      auto repaired = volume_->check_stripes(at, count, /*repair=*/true);
      std::lock_guard lock(resync_mutex_);
      if (!repaired) {
        resync_.error = repaired.error();
        resync_.finished = true;
        raid_log().error("resync: {}", repaired.error().message);
        return;
      }
      resync_.done += count;
      resync_.repaired += *repaired;
    }
    if (intent_) {
      auto [begin, end] = volume_->member_range(first, last);
      intent_->resynced(begin, std::min(end, volume_->geometry().member_data_size()));
    }
  }
  std::lock_guard lock(resync_mutex_);
  resync_.finished = true;
  raid_log().info("resync done: {} stripes checked, {} repaired", resync_.done, resync_.repaired);
}

ResyncProgress Array::resync_progress() const {
  std::lock_guard lock(resync_mutex_);
  return resync_;
}

ResyncProgress Array::wait_resync() {
  if (resync_thread_.joinable()) resync_thread_.join();
  return resync_progress();
}

Superblock Array::superblock() const {
  std::lock_guard lock(mutex_);
  return master_;
}

Result<void> Array::write_superblocks() {
  master_.updated = now();
  if (intent_) intent_->set_events(master_.events);
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
    if (m == nullptr || !volume_->active(role)) continue;
    Superblock mine = master_;
    mine.role = static_cast<uint16_t>(role);
    mine.member_uuid = member_uuids_[role];
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

void Array::on_member_failed(unsigned role) {
  {
    std::lock_guard lock(queue_mutex_);
    failed_roles_.push_back(role);
  }
  queue_cv_.notify_one();
}

void Array::record_loop() {
  std::unique_lock lock(queue_mutex_);
  for (;;) {
    queue_cv_.wait(lock, [this] { return stopping_ || !failed_roles_.empty(); });
    if (failed_roles_.empty()) return;
    const unsigned role = failed_roles_.front();
    failed_roles_.pop_front();
    lock.unlock();
    {
      std::lock_guard state(mutex_);
      master_.member_states[role] = MemberState::faulty;
      ++master_.events;
      if (auto w = write_superblocks(); !w) {
        // Members that could not take the record were failed in turn (and are queued here).
        raid_log().error("recording the failure of role {}: {}", role, w.error().message);
      }
    }
    // Held writes may go on: survivors hold the record, or every member that missed it has
    // been failed too, so nothing that lacks the record serves data.
    volume_->failure_recorded(role);
    lock.lock();
  }
}

Result<void> Array::close() {
  if (closed_) return {};
  // Clean means consistent: an unfinished resync must complete first.
  const ResyncProgress resync = wait_resync();
  auto flushed = volume_->flush();
  if (flushed && stripe_log_) flushed = stripe_log_->checkpoint();
  std::lock_guard lock(mutex_);
  closed_ = true;
  if (!flushed) return fail(flushed.error());
  if (resync.error) return fail(*resync.error);
  master_.set_clean(true);
  master_.set_unlogged(false);
  ++master_.events;
  return write_superblocks();
}

}  // namespace stripefs
