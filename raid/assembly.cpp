#include "raid/assembly.hpp"

#include <algorithm>
#include <optional>

#include "raid/geometry.hpp"

namespace stripefs {

namespace {

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

Result<Assembly> assemble(std::span<Member* const> members, bool force) {
  if (members.empty()) return fail(EINVAL, "no members given");
  struct Found {
    Member* member;
    Superblock sb;
  };
  std::vector<Found> found, spares, replacements;
  std::vector<std::string> notes;
  for (Member* m : members) {
    auto sb = read_superblock(*m);
    if (!sb) {
      // No superblock at all: perhaps a device named by mistake, so refused, unless forced
      // (a member whose superblock was wiped: the array starts without it, as any missing).
      if (sb.error().code == ENODATA && !force) {
        return fail(ENODATA, "{} (force starts the array without it)", sb.error().message);
      }
      // Damaged or unreadable: the member cannot vouch for itself; leave it out and say so.
      notes.push_back(fmt::format("{} (kept out)", sb.error().message));
      continue;
    }
    if (sb->spare()) {
      spares.push_back({m, *sb});
      continue;
    }
    if (sb->replacement()) {
      replacements.push_back({m, *sb});
      continue;
    }
    found.push_back({m, *sb});
  }
  if (found.empty() && !(spares.empty() && replacements.empty())) {
    return fail(EIO, "only spares or replacements given: no member holds a role");
  }
  if (found.empty()) return fail(EIO, "no member has a readable superblock");
  // The freshest superblock speaks for the array.
  const Found& freshest = *std::max_element(
      found.begin(), found.end(), [](auto& a, auto& b) { return a.sb.events < b.sb.events; });
  Assembly out;
  out.superblock = freshest.sb;
  const Superblock& master = out.superblock;
  // Members and spares alike must be of this array, with its geometry.
  auto foreign = [&](const Found& f, const char* what) -> Result<void> {
    if (f.sb.array_uuid != master.array_uuid) {
      return fail(EINVAL, "{} {}: array_uuid {} differs from {} of member {}", what,
                  f.member->name(), format_uuid(f.sb.array_uuid), format_uuid(master.array_uuid),
                  freshest.member->name());
    }
    if (auto field = geometry_mismatch(f.sb, master)) {
      return fail(EINVAL, "{} {}: {} differs from member {}", what, f.member->name(), *field,
                  freshest.member->name());
    }
    return {};
  };
  for (const Found& s : spares) {
    if (auto r = foreign(s, "spare"); !r) return fail(r.error());
    out.spares.push_back(s.member);
  }
  out.by_role.assign(master.member_count, nullptr);
  std::vector<const Found*> claimed(master.member_count, nullptr);
  // Devices that held a role another device took over since (a hot replace, a rebuild onto a
  // new device): older by events than the role's holder, and left out.
  std::vector<const Found*> superseded;
  auto is_superseded = [&](const Found& f) {
    return std::find(superseded.begin(), superseded.end(), &f) != superseded.end();
  };
  for (const Found& f : found) {
    if (auto r = foreign(f, "member"); !r) return fail(r.error());
    // Two devices with one role (a copy of a member, say): which holds the array's data
    // cannot be chosen silently.
    if (f.sb.role >= master.member_count) {
      return fail(EINVAL, "member {}: role {} but the array has {} members", f.member->name(),
                  f.sb.role, master.member_count);
    }
    if (const Found* other = claimed[f.sb.role]; other != nullptr) {
      // Which holds the array's data cannot be chosen silently when neither is newer (a copy
      // of a member, say).
      if (other->sb.events == f.sb.events) {
        return fail(EINVAL, "members {} and {} both claim role {}; give only one of them",
                    other->member->name(), f.member->name(), f.sb.role);
      }
      const Found* older = other->sb.events < f.sb.events ? other : &f;
      const Found* newer = older == other ? &f : other;
      superseded.push_back(older);
      notes.push_back(
          fmt::format("member {} (role {}, events {}) was replaced by {} (events {}); kept out",
                      older->member->name(), f.sb.role, older->sb.events, newer->member->name(),
                      newer->sb.events));
      claimed[f.sb.role] = newer;
      continue;
    }
    claimed[f.sb.role] = &f;
  }
  for (const Found& f : found) {
    if (is_superseded(f)) continue;
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
  // A hot replace's new device resumes its copy beside the device it copies, if that holds
  // the role and the copy missed no write: it was written with every superblock update,
  // first, so it is never behind a current member. Otherwise its copy is stale: kept out,
  // or, when its role has no device, kept as a spare (a rebuild may use it).
  auto pair_replacements = [&]() -> Result<void> {
    for (const Found& r : replacements) {
      if (auto x = foreign(r, "replacement"); !x) return fail(x.error());
      const unsigned role = r.sb.role;
      if (role >= master.member_count) {
        return fail(EINVAL, "replacement {}: role {} but the array has {} members",
                    r.member->name(), role, master.member_count);
      }
      const Found* holder = nullptr;
      for (const Found& f : found) {
        if (f.member == out.by_role[role]) holder = &f;
      }
      const bool taken = std::any_of(out.replacing.begin(), out.replacing.end(),
                                     [&](const Assembly::Replacing& p) { return p.role == role; });
      if (holder == nullptr) {
        out.spares.push_back(r.member);
        notes.push_back(fmt::format(
            "replacement {} was copying role {}, which has no device now; kept as a spare",
            r.member->name(), role));
      } else if (holder->sb.member_uuid != r.sb.replaces || r.sb.events < master.events || taken) {
        notes.push_back(fmt::format(
            "replacement {} of role {} is stale (events {} of {}{}); kept out: run the replace "
            "again",
            r.member->name(), role, r.sb.events, master.events,
            holder->sb.member_uuid != r.sb.replaces ? ", copying another device"
            : taken                                 ? ", the role has another replacement"
                                                    : ""));
      } else {
        out.replacing.push_back({role, r.member, r.sb.member_uuid, r.sb.rebuild_checkpoint});
        notes.push_back(fmt::format("replacement {} of role {} ({}): resuming the copy at byte {}",
                                    r.member->name(), role, holder->member->name(),
                                    r.sb.rebuild_checkpoint));
      }
    }
    return {};
  };
  std::vector<const Found*> stale;   // behind the freshest
  std::vector<const Found*> failed;  // recorded as failed by the freshest
  for (const Found& f : found) {
    if (is_superseded(f)) continue;
    if (master.member_states[f.sb.role] == MemberState::rebuilding) {
      // Its own checkpoint says how far it got; one that missed events since is rebuilt
      // whole (what it missed below its checkpoint is unknown).
      const bool current = f.sb.events + 1 >= master.events && f.sb.rebuilding();
      out.recovering.push_back({f.sb.role, f.member, current ? f.sb.rebuild_checkpoint : 0});
      notes.push_back(
          fmt::format("member {} (role {}) is being rebuilt; resuming at member byte {}",
                      f.member->name(), f.sb.role, out.recovering.back().checkpoint));
      continue;
    }
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
  if (auto r = pair_replacements(); !r) return fail(r.error());
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

}  // namespace stripefs
