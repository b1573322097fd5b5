#include "journal/log_format.hpp"

#include <algorithm>
#include <limits>
#include <utility>

#include "raid/ondisk.hpp"

namespace stripefs {

namespace {

namespace jl = journal_layout;
namespace jsb = journal_layout::superblock;
namespace jd = journal_layout::descriptor;
namespace jc = journal_layout::commit;

using Block = std::span<std::byte, kJournalBlockSize>;
using ConstBlock = std::span<const std::byte, kJournalBlockSize>;

using ondisk::get_le;
using ondisk::put_le;

// Descriptor and commit blocks are checked by one routine, which relies on this.
static_assert(jd::kMagic == jc::kMagic && jd::kSequence == jc::kSequence &&
              jd::kCount == jc::kCount);

constexpr ondisk::Sealed kSealed{jsb::kMagic, kJournalSuperblockMagic, jl::kChecksum};

void seal(Block out) {
  ondisk::seal(out, jl::kChecksum);
}

// The checks a descriptor and a commit block share, in the documented order: magic,
// checksum, count, sequence. `kind` is "descriptor" or "commit".
// A descriptor lists at most kMaxDescriptorEntries blocks; a commit counts every block of
// its transaction, which may chain several descriptors (`max_count` says which).
Result<void> check_record(ConstBlock in, std::string_view kind, uint32_t expected_magic,
                          uint64_t expected_sequence, uint32_t max_count) {
  const auto magic = get_le<uint32_t>(in, jd::kMagic);
  if (magic != expected_magic) {
    return fail(ENODATA, "journal {}: magic 0x{:08x} is not 0x{:08x} (not a {} block)", kind, magic,
                expected_magic, kind);
  }
  if (auto ok = ondisk::check_checksum(in, jl::kChecksum, fmt::format("journal {}", kind), "");
      !ok) {
    return ok;
  }
  const auto count = get_le<uint32_t>(in, jd::kCount);
  if (count == 0 || count > max_count) {
    return fail(EINVAL, "journal {}: count {} is not in [1, {}]", kind, count, max_count);
  }
  const auto sequence = get_le<uint64_t>(in, jd::kSequence);
  if (expected_sequence != 0 && sequence != expected_sequence) {
    return fail(EINVAL, "journal {}: sequence {}, expected {}", kind, sequence, expected_sequence);
  }
  return {};
}

}  // namespace

void encode_journal_superblock(const JournalSuperblock& sb,
                               std::span<std::byte, kJournalBlockSize> out) {
  std::ranges::fill(out, std::byte{0});
  put_le(out, jsb::kMagic, kJournalSuperblockMagic);
  put_le(out, jsb::kVersionMajor, kJournalMajor);
  put_le(out, jsb::kVersionMinor, kJournalMinor);
  ondisk::put_uuid(out, jsb::kArrayUuid, sb.array_uuid);
  put_le(out, jsb::kBlocks, sb.blocks);
  put_le(out, jsb::kTail, sb.tail);
  put_le(out, jsb::kTailSequence, sb.tail_sequence);
  put_le(out, jsb::kFlags, sb.flags);
  seal(out);
}

Result<JournalSuperblock> decode_journal_superblock(
    std::span<const std::byte, kJournalBlockSize> in, std::string_view where,
    const Uuid& expected_array_uuid) {
  // Magic first, so an area never written is reported as such, not as damaged.
  if (auto sealed = ondisk::check_sealed(in, kSealed, fmt::format("member {}", where), "journal");
      !sealed) {
    return fail(sealed.error());
  }
  const auto major = get_le<uint16_t>(in, jsb::kVersionMajor);
  const auto minor = get_le<uint16_t>(in, jsb::kVersionMinor);
  // Major 1 had no padding: its commit blocks' padding bytes were reserved, zero.
  if (major != kJournalMajor && major != 1) {
    return fail(EINVAL, "member {}: journal version {}.{} is not supported (major 1 or {})", where,
                major, minor, kJournalMajor);
  }

  JournalSuperblock sb;
  sb.array_uuid = ondisk::get_uuid(in, jsb::kArrayUuid);
  sb.blocks = get_le<uint64_t>(in, jsb::kBlocks);
  sb.tail = get_le<uint64_t>(in, jsb::kTail);
  sb.tail_sequence = get_le<uint64_t>(in, jsb::kTailSequence);
  sb.flags = get_le<uint32_t>(in, jsb::kFlags);
  if (sb.blocks < kJournalMinBlocks) {
    return fail(EINVAL, "member {}: journal blocks {} is less than {}", where, sb.blocks,
                kJournalMinBlocks);
  }
  if (sb.tail < 1 || sb.tail >= sb.blocks) {
    return fail(EINVAL, "member {}: journal tail {} is not in [1, {}) (blocks {})", where, sb.tail,
                sb.blocks, sb.blocks);
  }
  if (sb.tail_sequence == 0) {
    return fail(EINVAL, "member {}: journal tail_sequence {} is zero", where, sb.tail_sequence);
  }
  if (sb.array_uuid != expected_array_uuid) {
    return fail(EINVAL, "member {}: journal array_uuid {} does not match the array's {}", where,
                format_uuid(sb.array_uuid), format_uuid(expected_array_uuid));
  }
  return sb;
}

void encode_journal_descriptor(const JournalDescriptor& descriptor,
                               std::span<std::byte, kJournalBlockSize> out) {
  std::ranges::fill(out, std::byte{0});
  const size_t size = descriptor.entries.size();
  put_le(out, jd::kMagic, kJournalDescriptorMagic);
  put_le(out, jd::kSequence, descriptor.sequence);
  // Saturated, so an oversized vector can never be stored as a small, valid count.
  put_le(out, jd::kCount,
         static_cast<uint32_t>(std::min<size_t>(size, std::numeric_limits<uint32_t>::max())));
  const size_t stored = std::min<size_t>(size, kMaxDescriptorEntries);
  for (size_t i = 0; i < stored; ++i) {
    const JournalEntry& entry = descriptor.entries[i];
    const size_t at = jd::kEntries + i * jd::kEntrySize;
    put_le(out, at + jd::kEntryTarget, entry.target);
    put_le(out, at + jd::kEntryDataChecksum, entry.data_checksum);
    put_le(out, at + jd::kEntryFlags, entry.flags);
  }
  seal(out);
}

Result<JournalDescriptor> decode_journal_descriptor(
    std::span<const std::byte, kJournalBlockSize> in, uint64_t expected_sequence) {
  if (auto ok = check_record(in, "descriptor", kJournalDescriptorMagic, expected_sequence,
                             kMaxDescriptorEntries);
      !ok) {
    return fail(std::move(ok.error()));
  }
  JournalDescriptor descriptor;
  descriptor.sequence = get_le<uint64_t>(in, jd::kSequence);
  const auto count = get_le<uint32_t>(in, jd::kCount);
  descriptor.entries.resize(count);
  for (size_t i = 0; i < count; ++i) {
    JournalEntry& entry = descriptor.entries[i];
    const size_t at = jd::kEntries + i * jd::kEntrySize;
    entry.target = get_le<uint64_t>(in, at + jd::kEntryTarget);
    entry.data_checksum = get_le<uint32_t>(in, at + jd::kEntryDataChecksum);
    entry.flags = get_le<uint32_t>(in, at + jd::kEntryFlags);
  }
  return descriptor;
}

void encode_journal_commit(const JournalCommit& commit,
                           std::span<std::byte, kJournalBlockSize> out) {
  std::ranges::fill(out, std::byte{0});
  put_le(out, jc::kMagic, kJournalCommitMagic);
  put_le(out, jc::kSequence, commit.sequence);
  put_le(out, jc::kCount, commit.count);
  put_le(out, jc::kDescriptorChecksum, commit.descriptor_checksum);
  put_le(out, jc::kPadding, commit.padding);
  seal(out);
}

Result<JournalCommit> decode_journal_commit(std::span<const std::byte, kJournalBlockSize> in,
                                            uint64_t expected_sequence) {
  if (auto ok = check_record(in, "commit", kJournalCommitMagic, expected_sequence, UINT32_MAX);
      !ok) {
    return fail(std::move(ok.error()));
  }
  JournalCommit commit;
  commit.sequence = get_le<uint64_t>(in, jc::kSequence);
  commit.count = get_le<uint32_t>(in, jc::kCount);
  commit.descriptor_checksum = get_le<uint32_t>(in, jc::kDescriptorChecksum);
  commit.padding = get_le<uint32_t>(in, jc::kPadding);
  return commit;
}

uint32_t descriptor_checksum(std::span<const std::byte, kJournalBlockSize> encoded_descriptor) {
  return get_le<uint32_t>(encoded_descriptor, jl::kChecksum);
}

uint32_t data_block_checksum(std::span<const std::byte, kJournalBlockSize> data) {
  return ondisk::crc32c(data);
}

}  // namespace stripefs
