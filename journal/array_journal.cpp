#include "journal/array_journal.hpp"

#include <algorithm>

#include "journal/journal_log.hpp"
#include "journal/mirrored_area.hpp"
#include "journal/stripe_journal.hpp"
#include "raid/units.hpp"

namespace stripefs {

uint64_t min_stripe_journal_blocks(unsigned member_count, uint32_t chunk_size) {
  const uint64_t stripe_blocks = uint64_t{member_count} * chunk_size / kJournalBlockSize;
  const uint64_t worst =
      stripe_blocks + (stripe_blocks + kMaxDescriptorEntries - 1) / kMaxDescriptorEntries + 1;
  return 2 * worst + 1;
}

uint64_t default_member_journal_blocks(unsigned member_count, uint32_t chunk_size,
                                       uint64_t member_size) {
  constexpr uint64_t kMiB = 1 << 20;
  const uint64_t wanted = std::clamp<uint64_t>(member_size / 64, 16 * kMiB, 64 * kMiB);
  const uint64_t four_stripes = 2 * min_stripe_journal_blocks(member_count, chunk_size);
  const uint64_t bytes = std::max(wanted, four_stripes * kJournalBlockSize);
  return (bytes + kMiB - 1) / kMiB * kMiB / kJournalBlockSize;
}

namespace {

Result<void> check_level_and_size(const Superblock& sb, uint64_t blocks) {
  if (sb.level != RaidLevel::raid5 && sb.level != RaidLevel::raid6) {
    return fail(EINVAL, "a write-ahead journal closes the RAID5/6 write hole; {} has none",
                to_string(sb.level));
  }
  const uint64_t needed = min_stripe_journal_blocks(sb.member_count, sb.chunk_size);
  if (blocks < needed) {
    return fail(EINVAL,
                "a write-hole journal of {} ({} blocks) cannot hold two partial stripes of this "
                "array; give it at least {} ({} blocks)",
                format_size(blocks * kJournalBlockSize), blocks,
                format_size(needed * kJournalBlockSize), needed);
  }
  return {};
}

// The members that keep a copy of a member journal: one more than the level can lose.
std::vector<MirroredArea::Copy> member_copies(const Superblock& sb,
                                              const std::function<Member*(unsigned)>& member) {
  const unsigned count = sb.level == RaidLevel::raid6 ? 3 : 2;
  std::vector<MirroredArea::Copy> copies;
  for (unsigned role = 0; role < count && role < sb.member_count; ++role) {
    copies.push_back({role, member(role)});
  }
  return copies;
}

// Opens the journal on `device`; with `force`, a damaged one is formatted again (its records
// are lost, so an unclean array is resynced whole).
Result<std::unique_ptr<StripeLog>> open_on(Member& device, uint64_t offset, const Superblock& sb,
                                           std::chrono::milliseconds idle_checkpoint, bool force,
                                           Volume& volume, std::unique_ptr<Member> owned) {
  auto journal = Journal::open(device, offset, sb.array_uuid);
  bool rebuilt = false;
  if (!journal && force && journal.error().code != EIO) {
    journal_log().warn("{}; rebuilding the journal{}", journal.error().message,
                       sb.clean() ? "" : " (its records are lost: full resync)");
    if (auto f =
            Journal::format(device, offset, sb.journal_size / kJournalBlockSize, sb.array_uuid);
        !f) {
      return fail(f.error());
    }
    journal = Journal::open(device, offset, sb.array_uuid);
    rebuilt = true;
  }
  if (!journal) {
    return fail(journal.error().code, "{} (force rebuilds the journal)", journal.error().message);
  }
  auto log = std::make_unique<StripeJournal>(std::move(*journal), volume, std::move(owned),
                                             idle_checkpoint);
  if (rebuilt) log->set_rebuilt();
  return std::unique_ptr<StripeLog>(std::move(log));
}

}  // namespace

Result<std::unique_ptr<MirroredArea>> open_member_journal_area(Volume& volume, const Superblock& sb,
                                                               bool force) {
  auto live = [&volume](unsigned role) { return volume.active(role); };  // false if absent
  auto area = std::make_unique<MirroredArea>(
      member_copies(sb, [&volume](unsigned role) { return volume.member(role); }),
      sb.journal_offset, sb.journal_size, live,
      [&volume](unsigned role, const Error& why) { volume.fail_member(role, why); });
  // A rebuild gives a role a new device: the copy follows the role, not the old device.
  area->set_resolve([&volume](unsigned role) { return volume.member(role); });
  // Each live copy read on its own: the one whose log reaches furthest is the freshest, and
  // of those, the one checkpointed furthest (a stale copy would replay records that later
  // full-stripe writes, which are not logged, have overwritten). A copy that cannot be read
  // at all counts as the stalest.
  using Progress = std::pair<uint64_t, uint64_t>;  // (newest durable, tail sequence)
  std::optional<size_t> best;
  Progress best_progress{};
  bool differ = false;
  std::optional<Error> first_error;
  std::optional<Progress> seen;
  for (size_t i = 0; i < area->copies().size(); ++i) {
    const MirroredArea::Copy copy = area->copies()[i];
    if (!live(copy.role)) continue;
    MirroredArea single({copy}, sb.journal_offset, sb.journal_size);
    auto journal = Journal::open(single, 0, sb.array_uuid);
    Result<uint64_t> newest = journal ? (*journal)->newest_durable() : fail(journal.error());
    if (!newest) {
      journal_log().warn("write-hole journal copy on {}: {}", copy.member->name(),
                         newest.error().message);
      if (!first_error) first_error = newest.error();
      differ = true;
      continue;
    }
    const Progress progress{*newest, (*journal)->tail_sequence()};
    if (seen && *seen != progress) differ = true;
    seen = progress;
    if (!best || progress > best_progress) best = i, best_progress = progress;
  }
  if (!best) {
    if (first_error && !force) {
      return fail(first_error->code, "{} (force rebuilds the journal)", first_error->message);
    }
    return area;  // nothing readable: open_on refuses, or with force rebuilds
  }
  area->prefer(*best);
  if (differ || force || !sb.clean()) {
    if (differ) {
      journal_log().warn("write-hole journal: copying the copy on {} over the others",
                         area->copies()[0].member->name());
    }
    if (auto c = area->copy_from(0); !c) return fail(c.error());
  }
  return area;
}

void add_stripe_journal(ArrayOptions& options, Member& device, uint64_t offset, uint64_t blocks) {
  options.validate = [previous = std::move(options.validate), &device, blocks](
                         std::span<Member* const> members, const Superblock& sb) -> Result<void> {
    if (previous) {
      if (auto r = previous(members, sb); !r) return r;
    }
    if (auto r = check_level_and_size(sb, blocks); !r) return r;
    for (Member* m : members) {
      if (m == &device) return fail(EINVAL, "the journal device {} is also a member", m->name());
    }
    return {};
  };
  options.prepare = [previous = std::move(options.prepare), &device, offset, blocks](
                        std::span<Member* const> members, Superblock& sb) -> Result<void> {
    if (previous) {
      if (auto r = previous(members, sb); !r) return r;
    }
    if (auto f = Journal::format(device, offset, blocks, sb.array_uuid); !f) return f;
    sb.journal_offset = offset;
    sb.journal_size = blocks * kJournalBlockSize;
    sb.journal_device_uuid = sb.array_uuid;  // non-zero: the journal is on a separate device
    return {};
  };
}

void add_member_journal(ArrayOptions& options, uint64_t blocks) {
  constexpr uint64_t kMiB = 1 << 20;
  options.journal_offset = kMemberJournalOffset;
  options.journal_size = blocks * kJournalBlockSize;
  const uint64_t end = kMemberJournalOffset + options.journal_size;
  options.data_offset = std::max(options.data_offset, (end + kMiB - 1) / kMiB * kMiB);
  options.validate = [previous = std::move(options.validate), blocks](
                         std::span<Member* const> members, const Superblock& sb) -> Result<void> {
    if (previous) {
      if (auto r = previous(members, sb); !r) return r;
    }
    return check_level_and_size(sb, blocks);
  };
  options.prepare = [previous = std::move(options.prepare), blocks](
                        std::span<Member* const> members, Superblock& sb) -> Result<void> {
    if (previous) {
      if (auto r = previous(members, sb); !r) return r;
    }
    MirroredArea area(member_copies(sb, [&](unsigned role) { return members[role]; }),
                      sb.journal_offset, sb.journal_size);
    return Journal::format(area, 0, blocks, sb.array_uuid);
  };
}

void use_stripe_journal(OpenOptions& options, Member* device,
                        std::chrono::milliseconds idle_checkpoint) {
  options.stripe_log = [device, idle_checkpoint](Volume& volume, const Superblock& sb,
                                                 bool force) -> Result<std::unique_ptr<StripeLog>> {
    if (!is_zero(sb.journal_device_uuid)) {
      if (device == nullptr) {
        return fail(EINVAL,
                    "array {} keeps its write-hole journal on a separate device; give that "
                    "device (journal_device=PATH)",
                    format_uuid(sb.array_uuid));
      }
      return open_on(*device, sb.journal_offset, sb, idle_checkpoint, force, volume, nullptr);
    }
    if (device != nullptr) {
      return fail(EINVAL, "array {} keeps its write-hole journal on its members, not on {}",
                  format_uuid(sb.array_uuid), device->name());
    }
    auto area = open_member_journal_area(volume, sb, force);
    if (!area) return fail(area.error());
    Member& on = **area;
    return open_on(on, 0, sb, idle_checkpoint, force, volume, std::move(*area));
  };
}

}  // namespace stripefs
