// Mounting and unmounting: the metadata journal replayed, the allocators loaded, the
// superblock marked mounted, the threads started; after a crash, the inodes unlinked while
// open freed. Unmount writes everything back and marks the superblock clean.
#include <cstring>

#include "fs/core/filesystem.hpp"
#include "fs/core/fs_log.hpp"

namespace stripefs::fs {

Filesystem::Filesystem(Volume& volume, FsOptions options, FsSuperblock sb)
    : volume_(volume), options_(options), sb_(std::move(sb)) {
  DataArena::shared().allow(options_.cache_bytes + kIdleDataBuffers);
}

Filesystem::~Filesystem() {
  if (worker_.running()) {
    // Completions post to the worker and touch this object: let the I/O in flight (and
    // queued for the submitter) finish, with the worker still running, and start no more.
    Lock lock(mutex_);
    draining_ = true;
    writeback_cv_.wait(lock, [&] {
      for (auto& [ino, inode] : *table_) {
        if (inode->writebacks > 0) return false;
      }
      return true;
    });
  }
  stop_threads();
}

void Filesystem::stop_threads() {
  worker_.stop();
  healer_.stop();
  submitter_.stop();
}

Result<std::unique_ptr<Filesystem>> Filesystem::mount(Volume& volume, FsOptions options) {
  AlignedBuffer block(kBlockSize);
  if (auto r = volume.read(0, block.span()); !r) return fail(r.error());
  auto sb = decode_fs_superblock(std::span<const std::byte, kBlockSize>(block.data(), kBlockSize));
  if (!sb) {
    // Wrong on one member, perhaps: the others (or parity) hold it, and it is rewritten
    // (unless read-only).
    auto healed = volume.recover_block(
        0, block.span(),
        [](std::span<const std::byte> bytes) {
          return decode_fs_superblock(
                     std::span<const std::byte, kBlockSize>(bytes.data(), kBlockSize))
              .has_value();
        },
        !options.read_only);
    if (healed) {
      fs_log().warn("filesystem superblock: {}; the right one came from redundancy",
                    sb.error().message);
      sb = decode_fs_superblock(std::span<const std::byte, kBlockSize>(block.data(), kBlockSize));
    }
  }
  if (!sb) return fail(sb.error());
  if (auto r = check_fits(*sb, volume.size()); !r) return fail(r.error());
  std::unique_ptr<Filesystem> fs(new Filesystem(volume, options, std::move(*sb)));
  if (auto r = fs->start(); !r) return fail(r.error());
  return fs;
}

Result<void> Filesystem::start() {
  // The device starts at volume byte 0, so the journal's alignment is the volume's.
  journal_device_ = std::make_unique<VolumeDevice>(
      volume_, 0, (sb_.journal_start + sb_.journal_blocks) * kBlockSize);
  auto journal = Journal::open(*journal_device_, sb_.journal_start * kBlockSize, sb_.uuid,
                               journal_alignment(volume_, sb_.journal_blocks));
  if (!journal) return fail(journal.error().code, "metadata journal: {}", journal.error().message);
  journal_ = std::move(*journal);
  uint64_t replayed = 0;
  auto last =
      journal_->replay([&](uint64_t target, std::span<const std::byte> data) -> Result<void> {
        if (auto r = check_journal_target(sb_, target); !r) return r;
        ++replayed;
        return volume_.write(target * kBlockSize, data);
      });
  if (!last) return fail(last.error().code, "metadata journal: {}", last.error().message);
  if (*last != 0) {
    if (auto r = volume_.flush(); !r) return r;
    if (auto r = journal_->checkpoint(*last); !r) return r;
    fs_log().info("metadata journal: replayed {} blocks up to transaction {}", replayed, *last);
  }
  meta_ = std::make_unique<MetaStore>(volume_, *journal_, options_.metadata_cache_blocks);
  if (sb_.has_checksums()) meta_->index_blocks(sb_.checksum_start, sb_.checksum_blocks);
  blocks_ = std::make_unique<BitmapAllocator>(sb_.block_bitmap_start, sb_.block_bitmap_blocks,
                                              sb_.total_blocks);
  if (auto r = blocks_->load(*meta_); !r) return r;
  inodes_ = std::make_unique<BitmapAllocator>(sb_.inode_bitmap_start, sb_.inode_bitmap_blocks,
                                              sb_.inode_count);
  if (auto r = inodes_->load(*meta_); !r) return r;
  if (sb_.has_orphan_list()) {
    orphans_ = std::make_unique<OrphanList>(sb_.orphan_start, sb_.orphan_blocks, sb_.inode_count);
    if (auto r = orphans_->load(*meta_); !r) return r;
  }
  table_ = std::make_unique<InodeTable>(*meta_, *inodes_, sb_.inode_table_start, sb_.inode_count);
  metadata_reserve_ = std::clamp<uint64_t>(sb_.total_blocks / 100, 64, 8192);
  {
    Lock lock(mutex_);
    auto root = get_inode(kRootInode);
    if (!root) return fail(root.error().code, "root directory: {}", root.error().message);
    if (!(*root)->is_dir())
      return fail(EUCLEAN, "inode 1: field mode: the root is not a directory");
  }
  const bool unclean = sb_.state == FsState::mounted;
  if (!options_.read_only) {
    ++sb_.mount_count;
    // Minor 2 adds only what a writer may now put down (xattr runs): a filesystem of minor
    // 1 says so from its first read-write mount on. (Minor 0 lacks the orphan list's blocks
    // and stays as it is.)
    if (sb_.minor == 1) sb_.minor = kFormatMinor;
    if (auto r = write_superblock(FsState::mounted); !r) return r;
  }
  last_commit_ = monotonic_ns();
  submitter_.start();
  worker_.start();
  healer_.start();
  if (unclean && !options_.read_only) {
    if (auto r = free_orphans(); !r) return r;
  }
  return {};
}

// After a crash, files that were unlinked while still open hold their blocks with no name
// left, and files may hold written blocks past their size (written back before their size
// was stored, or left by a truncate cut short). A clean unmount leaves neither. Here the
// inodes the orphan list names are looked at — or, on a filesystem made without one, every
// inode in use (a cost proportional to the inodes in use, paid only after a crash).
Result<void> Filesystem::free_orphans() {
  uint64_t examined = 0, freed = 0;
  {
    Lock lock(mutex_);
    if (orphans_) {
      for (uint64_t ino : orphans_->inodes()) {
        ++examined;
        if (!inodes_->busy(ino - 1)) {
          orphans_->set(*meta_, ino, false);  // listed, but free: nothing to do
          continue;
        }
        auto done = recover_inode(ino, lock);
        if (!done) return fail(done.error());
        freed += *done ? 1 : 0;
        // Each stored again: a transaction must not outgrow the journal.
        if (auto r = commit_while_large(lock); !r) return r;
        if (examined % 4096 == 0) meta_->trim();
      }
    } else {
      for (uint64_t index = 0; index < sb_.inode_count; ++index) {
        if (index % 4096 == 0) meta_->trim();  // the scan must not hold the whole table
        if (!inodes_->busy(index)) continue;
        ++examined;
        auto done = recover_inode(index + 1, lock);
        if (!done) return fail(done.error());
        freed += *done ? 1 : 0;
      }
    }
    stats_.recovery_inodes_examined = examined;
    stats_.recovery_inodes_freed = freed;
  }
  if (freed > 0) fs_log().info("freed {} inodes unlinked while open at the crash", freed);
  if (auto r = commit(); !r) return r;
  return checkpoint();
}

Result<bool> Filesystem::recover_inode(uint64_t ino, Lock& lock) {
  auto inode = get_inode(ino);
  if (!inode) {
    fs_log().warn("after the crash: inode {}: {}", ino, inode.error().message);
    return false;
  }
  if ((*inode)->disk.nlink == 0) {
    if (auto r = destroy_inode_in_steps(**inode, lock); !r) return fail(r.error());
    return true;
  }
  if (auto r = free_past_eof(**inode, lock); !r) return fail(r.error());
  // Stored again, so that the list says what is true of it now.
  if (orphans_ && orphans_->listed(ino)) dirty(**inode);
  maybe_evict(**inode, lock);
  return false;
}

Result<void> Filesystem::write_superblock(FsState state) {
  sb_.state = state;
  AlignedBuffer block(kBlockSize);
  encode_fs_superblock(sb_, std::span<std::byte, kBlockSize>(block.data(), kBlockSize));
  if (auto r = volume_.write(0, block.span()); !r) return r;
  return volume_.flush();
}

Result<void> Filesystem::unmount() {
  if (options_.read_only) return {};
  if (auto r = sync(); !r) return r;
  {
    // Files unlinked while open are freed now that nothing holds them.
    Lock lock(mutex_);
    std::vector<uint64_t> orphans;
    for (auto& [ino, inode] : *table_) {
      if (inode->disk.nlink == 0) orphans.push_back(ino);
    }
    for (uint64_t ino : orphans) {
      // A commit of an earlier one may have freed this one already (maybe_evict).
      Inode* inode = table_->find(ino);
      if (inode == nullptr) continue;
      inode->lookups = 0;
      inode->opens = 0;
      if (auto r = destroy_inode_in_steps(*inode, lock); !r) return r;
    }
  }
  if (auto r = commit(); !r) return r;
  if (auto r = checkpoint(); !r) return r;
  stop_threads();
  return write_superblock(FsState::clean);
}

}  // namespace stripefs::fs
