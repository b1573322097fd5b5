#include "fs/core/inode_table.hpp"

#include <ctime>

#include "fs/core/fs_log.hpp"

namespace stripefs::fs {

uint64_t monotonic_ns() {
  timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return static_cast<uint64_t>(ts.tv_sec) * 1000000000ull + static_cast<uint64_t>(ts.tv_nsec);
}

Inode* InodeTable::find(uint64_t ino) const {
  auto it = inodes_.find(ino);
  return it == inodes_.end() ? nullptr : it->second.get();
}

Result<Inode*> InodeTable::get(uint64_t ino) {
  if (Inode* cached = find(ino)) return cached;
  if (ino == 0 || ino > count_) return fail(ESTALE, "inode {}: out of range", ino);
  if (!slots_.busy(ino - 1)) return fail(ESTALE, "inode {}: not in use", ino);
  (void)check_block(ino, 0);   // damage elsewhere in the block is not this inode's
  uint32_t slot_checksum = 0;  // of the slot that decoded (perhaps after a heal)
  auto disk = meta_.read_as(block_of(ino), [&](std::span<const std::byte, kBlockSize> image) {
    const auto slot = image.subspan(offset_of(ino), kInodeSize);
    slot_checksum = stored_inode_checksum(slot);
    return decode_inode(slot, ino);
  });
  if (!disk) {
    fs_log().error("{}", disk.error().message);
    return fail(EIO, "{}", disk.error().message);
  }
  if (disk->mode == 0) return fail(ESTALE, "inode {}: not in use", ino);
  auto inode = std::make_unique<Inode>();
  inode->ino = ino;
  inode->disk = std::move(*disk);
  inode->stored_size = inode->disk.size;
  inode->slot_checksum = slot_checksum;
  Inode* raw = inode.get();
  inodes_.emplace(ino, std::move(inode));
  return raw;
}

Result<Inode*> InodeTable::create(uint32_t mode, uint32_t uid, uint32_t gid, uint64_t parent,
                                  Timespec now) {
  auto run = slots_.reserve(1, 0, 1);
  if (!run) return fail(ENOSPC, "no free inodes");
  const uint64_t ino = run->first + 1;
  (void)check_block(ino, ino);  // (its own slot is free: whatever it holds)
  auto block = meta_.read(block_of(ino));
  if (!block) {
    slots_.unreserve(run->first, 1);
    return fail(block.error());
  }
  // The slot keeps its generation across uses, so an old NFS handle goes stale. A damaged
  // free slot only loses its generation; bump from the block's raw value regardless.
  auto old = decode_inode(block->subspan(offset_of(ino), kInodeSize), ino);
  slots_.mark_used(meta_, run->first, 1);
  auto inode = std::make_unique<Inode>();
  inode->ino = ino;
  DiskInode& d = inode->disk;
  d.mode = mode;
  d.uid = uid;
  d.gid = gid;
  d.nlink = 1;
  d.atime = d.mtime = d.ctime = now;
  d.generation = (old ? old->generation : static_cast<uint32_t>(ino)) + 1;
  d.parent = parent;
  inode->extents_loaded = true;
  inode->dirty = true;
  Inode* raw = inode.get();
  inodes_[ino] = std::move(inode);
  mark_dirty(ino);
  return raw;
}

Result<void> InodeTable::check_block(uint64_t ino, uint64_t except) {
  const uint64_t block = block_of(ino);
  const uint64_t first = (block - start_) * kInodesPerBlock + 1;
  auto checked = meta_.read_checked(block, [&](std::span<const std::byte> image) {
    for (uint64_t n = first; n < first + kInodesPerBlock && n <= count_; ++n) {
      if (n == except || !slots_.busy(n - 1)) continue;
      if (!decode_inode(image.subspan(offset_of(n), kInodeSize), n)) return false;
    }
    return true;
  });
  if (!checked) return fail(checked.error());
  return {};
}

Result<void> InodeTable::write(uint64_t ino, const DiskInode& disk) {
  // Damage in the block that cannot be healed stays as it is: only this slot changes.
  (void)check_block(ino, ino);
  auto block = meta_.read(block_of(ino));
  if (!block) return fail(block.error());
  auto out = meta_.modify(block_of(ino));
  const auto slot = std::span(out).subspan(offset_of(ino), kInodeSize);
  encode_inode(disk, slot);
  if (Inode* inode = find(ino)) inode->slot_checksum = stored_inode_checksum(slot);
  return {};
}

Result<void> InodeTable::check_slots(uint64_t block) {
  auto image = meta_.read(block);
  if (!image) return fail(image.error());
  const uint64_t first = (block - start_) * kInodesPerBlock + 1;
  for (uint64_t n = first; n < first + kInodesPerBlock && n <= count_; ++n) {
    const Inode* inode = find(n);
    if (inode == nullptr || !inode->slot_checksum) continue;
    const uint32_t held = stored_inode_checksum(image->subspan(offset_of(n), kInodeSize));
    if (held != *inode->slot_checksum) {
      return fail(EIO,
                  "inode table block {}: the slot of inode {} holds bytes this program did not "
                  "write there (checksum {:08x}, last written {:08x})",
                  block, n, held, *inode->slot_checksum);
    }
  }
  return {};
}

void InodeTable::release(uint64_t ino) {
  slots_.release(meta_, ino - 1, 1);
  inodes_.erase(ino);
}

std::vector<uint64_t> InodeTable::take_dirty() {
  std::vector<uint64_t> taken(dirty_.begin(), dirty_.end());
  dirty_.clear();
  return taken;
}

}  // namespace stripefs::fs
