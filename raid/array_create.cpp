// Creating an array: every member checked first, nothing written unless all pass, then the
// superblocks and the initial sync.
#include <set>

#include "raid/array.hpp"
#include "raid/level.hpp"

namespace stripefs {

Result<Superblock> create_array(std::span<Member* const> members, const ArrayOptions& options) {
  const unsigned count = static_cast<unsigned>(members.size());
  if (count == 0) return fail(EINVAL, "no members given");
  if (count < Level::min_members(options.level)) {
    return fail(EINVAL, "{} needs at least {} members, got {}", to_string(options.level),
                Level::min_members(options.level), count);
  }
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
  sb.created = sb.updated = superblock_time();
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
    // A member the sync had to fail (a chunk it could not read and could not take back)
    // would be recorded clean with stripes never synced: the creation fails instead.
    for (unsigned role = 0; role < count; ++role) {
      if (!(*volume)->active(role)) {
        return fail(EIO, "member {}: failed during the initial sync; the array is left dirty",
                    members[role]->name());
      }
    }
    if (auto f = (*volume)->flush(); !f) return fail(f.error());
    for (unsigned role = 0; role < count; ++role) {
      written[role].set_clean(true);
      written[role].events = 2;
      written[role].updated = superblock_time();
      if (auto w = write_superblock(*members[role], written[role]); !w) return fail(w.error());
    }
  }
  return written[0];
}

}  // namespace stripefs
