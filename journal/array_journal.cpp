#include "array_journal.hpp"

#include "journal_log.hpp"
#include "stripe_journal.hpp"

namespace stripefs {

void add_stripe_journal(ArrayOptions& options, Member& device, uint64_t offset, uint64_t blocks) {
  options.validate = [previous = std::move(options.validate), &device, blocks](
                         std::span<Member* const> members, const Superblock& sb) -> Result<void> {
    if (previous) {
      if (auto r = previous(members, sb); !r) return r;
    }
    if (sb.level != RaidLevel::raid5 && sb.level != RaidLevel::raid6) {
      return fail(EINVAL, "a write-ahead journal closes the RAID5/6 write hole; {} has none",
                  to_string(sb.level));
    }
    for (Member* m : members) {
      if (m == &device) return fail(EINVAL, "the journal device {} is also a member", m->name());
    }
    // Room for at least two worst-case partial stripes (every chunk of a stripe), so one can
    // be logged while the other is checkpointed.
    const uint64_t stripe_blocks = uint64_t{sb.member_count} * sb.chunk_size / kJournalBlockSize;
    const uint64_t worst =
        stripe_blocks + (stripe_blocks + kMaxDescriptorEntries - 1) / kMaxDescriptorEntries + 1;
    if (blocks < 2 * worst + 1) {
      return fail(EINVAL,
                  "a journal of {} blocks cannot hold two partial stripes of this array "
                  "({} blocks each); give it at least {}",
                  blocks, worst, 2 * worst + 1);
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

void use_stripe_journal(OpenOptions& options, Member& device) {
  options.stripe_log = [&device](Volume& volume, const Superblock& sb,
                                 bool force) -> Result<std::unique_ptr<StripeLog>> {
    auto journal = Journal::open(device, sb.journal_offset, sb.array_uuid);
    bool rebuilt = false;
    if (!journal && force && journal.error().code != EIO) {
      // Repair: an empty journal. Its records are gone, so an unclean array is resynced
      // whole (a degraded one cannot be: force accepts that its torn stripes stay torn).
      journal_log().warn("{}; rebuilding the journal{}", journal.error().message,
                         sb.clean() ? "" : " (its records are lost: full resync)");
      if (auto f = Journal::format(device, sb.journal_offset, sb.journal_size / kJournalBlockSize,
                                   sb.array_uuid);
          !f) {
        return fail(f.error());
      }
      journal = Journal::open(device, sb.journal_offset, sb.array_uuid);
      rebuilt = true;
    }
    if (!journal) {
      return fail(journal.error().code, "{} (force rebuilds the journal)", journal.error().message);
    }
    auto log = std::make_unique<StripeJournal>(std::move(*journal), volume);
    if (rebuilt) log->set_rebuilt();
    return std::unique_ptr<StripeLog>(std::move(log));
  };
}

}  // namespace stripefs
