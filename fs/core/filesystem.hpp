// The filesystem core: inodes, extents, directories, xattrs, the daemon's buffer cache and
// writeback, on a Volume. The FUSE layer (fs/daemon/fuse_ops.cpp) only translates into
// these calls. Filesystem is a facade over pieces that are built and tested alone:
//   MetaStore (metadata blocks and their transactions), BitmapAllocator (blocks, inodes),
//   InodeTable (inodes in memory and their slots), DirectoryIndex (a directory's names), and
//   per inode a FileCache (its data not yet on the members) and an ExtentMap (its blocks);
//   plan_writeback, the Submitter and the Worker.
// Its own files: mount.cpp, commit.cpp, inodes.cpp, file_extents.cpp, namespace_ops.cpp,
// xattr.cpp, file_data.cpp (read, write), writeback.cpp, space_ops.cpp.
//
// The write path, in order: write() copies the payload once into a fresh buffer (outside
// the lock) and puts it in the inode's FileCache (insert_range; delayed allocation only
// promises blocks, reserve_delalloc); start_writeback plans the job (plan_writeback: freeze,
// allocate stripe-aligned), the Submitter hands its pieces to Volume::write, which splits
// them by stripe for the level (full stripes: parity from these very buffers); the
// completion posts to the Worker, which runs writeback_done (extents settled, ranges out of
// the cache).
//
// Locks, in the order they may be taken (never the other way):
//   1. commit_mutex_   serializes commits and checkpoints.
//   2. mutex_          the filesystem lock: every in-memory structure below that is not
//                      atomic, and everything it owns (the InodeTable, inodes with their
//                      FileCache and ExtentMap, the allocators, the MetaStore's cache and
//                      running transaction, DirectoryIndex work). Held for metadata work, which may
//                      read metadata blocks (blocking), and while a write reads the rest of
//                      its partially written first and last blocks (fill_from_volume: the
//                      edges must not change under it); never across data writeback, file
//                      reads or journal commits.
//   3. leaves, taken alone and calling nothing under them: MetaStore::images_mutex_ (its
//      committed images, shared with a checkpoint running without mutex_), the Worker's
//      and the Submitter's queue locks, DataBuffers' pool lock.
// I/O completions never wait for mutex_: they post work to the Worker, which takes it (a
// finished read only tries it, to release the frees it held back). Reads in flight are
// counted in atomics, not under a lock.
//
// Stable pages: file data lives in immutable buffers. A write copies its payload once into
// a new buffer that replaces (in the inode's cache) whatever covered that range; a buffer in
// flight to the members is therefore never modified, and the Volume computes parity straight
// from it.
#pragma once

#include <absl/container/inlined_vector.h>
#include <sys/stat.h>

#include <array>
#include <atomic>
#include <condition_variable>
#include <deque>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <thread>
#include <unordered_map>
#include <unordered_set>
#include <vector>
#include "fs/core/allocator.hpp"
#include "fs/core/data_buffers.hpp"
#include "fs/core/directory_index.hpp"
#include "fs/core/format.hpp"
#include "fs/core/inode_table.hpp"
#include "fs/core/meta_store.hpp"
#include "fs/core/orphan_list.hpp"
#include "fs/core/owned_mutex.hpp"
#include "fs/core/submitter.hpp"
#include "fs/core/volume_device.hpp"
#include "fs/core/worker.hpp"
#include "fs/core/writeback_plan.hpp"
#include "fs/core/xattr_format.hpp"
#include "journal/journal.hpp"
#include "raid/aligned_buffer.hpp"
#include "raid/scrub_check.hpp"
#include "raid/volume.hpp"

namespace stripefs::fs {

struct FsOptions {
  bool read_only = false;
  double writeback_delay_s = 5.0;           // dirty data older than this is written back
  double commit_interval_s = 5.0;           // metadata commit period
  uint64_t cache_bytes = 256ull << 20;      // dirty + in-flight file data
  size_t metadata_cache_blocks = 1u << 16;  // 256 MiB of metadata blocks
};

struct Attr {
  uint64_t ino = 0;
  uint32_t mode = 0, nlink = 0, uid = 0, gid = 0;
  uint64_t size = 0, blocks512 = 0, rdev = 0;
  Timespec atime, mtime, ctime;
  uint32_t generation = 0;
};

struct Caller {
  uint32_t uid = 0, gid = 0;
  uint32_t umask = 0;  // a create's, applied here only with POSIX ACLs on (enable_posix_acls)
};

// Whether the caller may keep set-group-ID on a node of group `gid` it changes: root, or a
// member of `gid` (the kernel's in_group_or_capable). Empty: it may.
using KeepsSgid = std::function<bool(uint32_t gid)>;

// What a change of a file's data, size or owner takes from it when the kernel leaves that
// to the filesystem: with FUSE_HANDLE_KILLPRIV_V2 all of it, and a direct write's
// FUSE_WRITE_KILL_SUIDGID always (kill_privs.cpp).
inline constexpr std::string_view kFcapsName = "security.capability";  // file capabilities

struct KillPrivs {
  // The changer lacks CAP_FSETID: set-user-ID goes; set-group-ID goes where group execute
  // is set, and without it unless the changer is in the file's group (`who.gid`, or
  // `in_group(gid)` for its other groups), as Linux 6.2 and later (setattr_should_drop_sgid).
  bool suid_sgid = false;
  // When suid_sgid is false: decides it instead, asked only for a file with set-id bits
  // (what it costs is paid only then).
  std::function<bool()> lacks_fsetid;
  Caller who;
  std::function<bool(uint32_t gid)> in_group;
  bool caps = false;    // the security.capability attribute goes
  bool killed = false;  // out: the mode or the attributes changed (a cached mode is stale)
};

// setattr's changes: each optional field is changed when set.
struct SetAttr {
  std::optional<uint32_t> mode, uid, gid;
  std::optional<uint64_t> size;
  std::optional<Timespec> atime, mtime;  // nsec == kTimeNow: now
  static constexpr uint32_t kTimeNow = 0x3fffffff;
};

struct FsStatfs {
  uint64_t blocks = 0, blocks_free = 0, files = 0, files_free = 0;
  uint32_t block_size = kBlockSize, name_max = kMaxNameLength;
};

struct FsStats {
  uint64_t checksum_recovered = 0;      // blocks read that failed their checksum, recovered
  uint64_t checksum_unrecoverable = 0;  // ... with no good copy left (the read got EIO)
  uint64_t bytes_copied_in = 0;         // copies of file data into the cache (the one copy)
  uint64_t bytes_shared = 0;            // copy_file_range blocks that took the source's buffer
  uint64_t read_copy_bytes = 0;         // cached bytes copied into a buffer being read into (a read
                                        // partly in the cache, or a write's partial block); a read
                                        // within one cached range is answered from it, uncopied
  uint64_t edge_copy_bytes = 0;         // bytes copied into a write's buffer to complete its first
                                        // and last blocks
  uint64_t edge_fill_bytes = 0;         // extra reads to complete partially written blocks
  uint64_t writeback_bytes = 0;         // data handed to the Volume
  uint64_t writeback_done_bytes = 0;    // ... and written
  uint64_t writebacks = 0;
  uint64_t full_stripe_writebacks = 0;  // started because a full stripe was dirty
  // Extent tree blocks commits wrote: leaves (changed, split or packed) and index blocks.
  uint64_t extent_leaves_written = 0;
  uint64_t extent_index_blocks_written = 0;
  // The mount after a crash: inodes it looked at for no links or blocks past their size
  // (those listed in the orphan list; every inode in use without one), and freed.
  uint64_t recovery_inodes_examined = 0;
  uint64_t recovery_inodes_freed = 0;
};

// A reply to read(): the bytes live in `buffers`; fragments are in file order. (Inline: a
// read answered from one buffer allocates no list.)
struct ReadReply {
  absl::InlinedVector<std::shared_ptr<AlignedBuffer>, 1> buffers;
  absl::InlinedVector<std::span<const std::byte>, 1> fragments;
  size_t size() const {
    size_t n = 0;
    for (auto f : fragments) n += f.size();
    return n;
  }
};

// Blocks of a file read from the volume into a buffer, to be checked against their
// checksums. Made (and the checksums looked up) under the filesystem lock, before the buffer
// exists: runs say where in it their blocks land.
struct ReadCheck {
  uint64_t ino = 0;
  struct Run {
    uint64_t volume_block;
    uint64_t file_offset;
    size_t at;        // in the buffer
    uint64_t length;  // whole blocks
  };
  // Inline for a read of up to 128 KiB in up to two runs: a 4 KiB read's check costs no
  // allocation of its own.
  absl::InlinedVector<Run, 2> runs;
  absl::InlinedVector<uint32_t, 32> expected;  // per block, in the runs' order
};

class Filesystem {
 public:
  // Opens the filesystem on `volume` (which must outlive it): replays the metadata journal,
  // loads the bitmaps, marks the superblock mounted. Refuses a damaged superblock or
  // journal, naming the block and field.
  static Result<std::unique_ptr<Filesystem>> mount(Volume& volume, FsOptions options);
  ~Filesystem();
  // Writes back every buffer, commits, checkpoints and marks the superblock clean.
  Result<void> unmount();

  const FsSuperblock& superblock() const { return sb_; }
  // From now on the kernel enforces POSIX ACLs and leaves the rest to this filesystem
  // (FUSE_CAP_POSIX_ACL with FUSE_CAP_DONT_MASK): a new node inherits its directory's
  // default ACL or has the caller's umask applied, chmod rewrites the access ACL, and
  // setting an access ACL rewrites the mode (acl_ops.cpp). Called once, before any request.
  void enable_posix_acls() { posix_acls_ = true; }
  bool posix_acls() const { return posix_acls_; }
  FsStats stats() const;
  MetaStats meta_stats() const { return meta_->stats(); }

  // ---- namespace ----
  Result<Attr> lookup(uint64_t parent, std::string_view name);  // counts a lookup
  void forget(uint64_t ino, uint64_t lookups);
  Result<Attr> getattr(uint64_t ino);
  Result<Attr> setattr(uint64_t ino, const SetAttr& change);
  // Takes from a regular file what `what` says (before a truncate or chown, after a
  // fallocate or a copy into it; a write does it itself), and sets `what.killed` when
  // anything went.
  Result<void> kill_privs(uint64_t ino, KillPrivs& what);
  Result<Attr> mknod(uint64_t parent, std::string_view name, uint32_t mode, uint64_t rdev,
                     const Caller& caller);  // regular files, fifos, sockets, devices, dirs
  // O_TMPFILE: a regular file made in `parent` (for its group and default ACL) with no name
  // and no link, on the orphan list until linkat(2) names it; counts a lookup, as mknod.
  Result<Attr> tmpfile(uint64_t parent, uint32_t mode, const Caller& caller);
  Result<Attr> symlink(uint64_t parent, std::string_view name, std::string_view target,
                       const Caller& caller);
  Result<std::string> readlink(uint64_t ino);
  Result<Attr> link(uint64_t ino, uint64_t parent, std::string_view name);
  Result<void> unlink(uint64_t parent, std::string_view name);
  Result<void> rmdir(uint64_t parent, std::string_view name);
  static constexpr unsigned kRenameNoReplace = 1, kRenameExchange = 2;
  Result<void> rename(uint64_t parent, std::string_view name, uint64_t new_parent,
                      std::string_view new_name, unsigned flags);
  // Calls `add(name, ino, dtype, next_cookie)` from `cookie` on until it returns false.
  // Cookies: 0 start, 1 after ".", 2 after "..", then entry keys + 3.
  using DirFiller =
      std::function<bool(std::string_view name, uint64_t ino, uint8_t type, uint64_t next)>;
  Result<void> readdir(uint64_t ino, uint64_t cookie, const DirFiller& add);

  // ---- files ----
  Result<void> open(uint64_t ino);
  void release(uint64_t ino);
  // Reads [offset, offset + size) and calls `done` once with the reply: at once for what
  // the cache holds, from the volume's completion for the rest. `done` must not take the
  // filesystem's lock (it may run on a member's completion thread). It never blocks on
  // member I/O itself, except to load an inode or extents not yet cached.
  using ReadDone = std::function<void(Result<ReadReply>)>;
  void read(uint64_t ino, uint64_t offset, size_t size, ReadDone done);
  Result<ReadReply> read(uint64_t ino, uint64_t offset, size_t size);  // blocking
  // Returns once every read started has replied: before the FUSE session goes.
  void wait_reads();
  // Copies `size` bytes of payload with `copy(dest)` (the only copy of the data) at `offset`.
  using CopyIn = std::function<Result<void>(std::span<std::byte> dest)>;
  // With `kill`, takes from the file what it says first (kill_privs), under the same lock.
  Result<size_t> write(uint64_t ino, uint64_t offset, size_t size, const CopyIn& copy,
                       KillPrivs* kill = nullptr);
  // Whole blocks at a block-aligned `offset` whose data is `buffer`'s from `buffer_offset`:
  // the buffer (immutable, as every cached one) joins the file's cache as it is, uncopied.
  Result<size_t> write_shared(uint64_t ino, uint64_t offset, size_t size,
                              std::shared_ptr<AlignedBuffer> buffer, size_t buffer_offset);
  Result<void> fsync(uint64_t ino, bool data_only);
  Result<void> fallocate(uint64_t ino, int mode, uint64_t offset, uint64_t length);
  Result<uint64_t> lseek(uint64_t ino, uint64_t offset, int whence);
  Result<size_t> copy_file_range(uint64_t in, uint64_t in_offset, uint64_t out, uint64_t out_offset,
                                 size_t length);
  Result<void> sync();  // everything: data, then metadata commit

  // ---- xattrs ----
  Result<void> setxattr(uint64_t ino, std::string_view name, std::string_view value, int flags,
                        const KeepsSgid& keeps_sgid = {});
  Result<std::string> getxattr(uint64_t ino, std::string_view name);
  Result<std::vector<std::string>> listxattr(uint64_t ino);
  Result<void> removexattr(uint64_t ino, std::string_view name);

  FsStatfs statfs();

  // ---- scrub (scrub_checks.cpp) ----
  // What the array's scrub checks the volume against (Array::set_scrub_checker): every
  // block of a regular file's written extents against its data checksum (when the
  // filesystem keeps them), and the metadata against its own checksums. It must leave the
  // array before the filesystem is unmounted.
  std::unique_ptr<ScrubChecker> scrub_checker();

 private:
  friend class FsScrubChecker;
  friend class ChecksumBatch;

  using Lock = std::unique_lock<OwnedMutex>;

  Filesystem(Volume& volume, FsOptions options, FsSuperblock sb);
  Result<void> start();

  // inodes (inode_table.cpp)
  Result<Inode*> get_inode(uint64_t ino);
  Result<Inode*> new_inode(uint32_t mode, const Caller& caller, uint64_t parent);
  // Its disk fields or extents changed: stored at the next commit.
  void dirty(Inode& inode) {
    inode.dirty = true;
    table_->mark_dirty(inode.ino);
  }
  Result<void> store_inode(Inode& inode);  // into its table block (at commit)
  uint64_t size_to_store(const Inode& inode) const;
  void restore_size_later(Inode& inode);  // dirty again if stored short of its size
  void maybe_evict(Inode& inode, Lock& lock);
  Result<void> destroy_inode(Inode& inode, Lock& lock);
  Attr attr_of(const Inode& inode) const;
  static Timespec now();

  // extents (extent_map.cpp)
  Result<void> load_extents(Inode& inode);
  Result<void> store_extents(Inode& inode);
  Result<uint64_t> map_block(Inode& inode, uint64_t file_block);     // 0: hole
  Result<uint64_t> ensure_block(Inode& inode, uint64_t file_block);  // metadata files
  // Room for `blocks` more blocks, promised to data (delayed allocation) or taken for
  // metadata a user's operation adds (a directory, symlink or attribute block): what is
  // free less the blocks promised to dirty data already and the reserve commits and
  // writeback take theirs from. Those may not be taken: writeback would then find no space
  // for data write() accepted, and the filesystem would turn read-only.
  bool room_for(uint64_t blocks) const {
    return blocks_->free_count() >= blocks + delalloc_reserved_ + metadata_reserve_;
  }
  void insert_extent(Inode& inode, Extent extent);
  Result<void> free_range(Inode& inode, uint64_t first, uint64_t end);  // file blocks
  // Blocks freed or allocated in one step of an operation done in steps: what an eighth of
  // the journal's bitmap blocks cover (plus one, for a run that straddles two).
  uint64_t step_blocks() const;
  // free_range in steps that each fit a transaction, committing in between: for ranges of
  // any size (a truncate of many TiB). The lock is released while committing.
  Result<void> free_range_in_steps(Inode& inode, uint64_t first, uint64_t end, Lock& lock);
  // Its steps, for a caller that holds the inode in steps (InSteps) itself.
  Result<void> free_range_steps(Inode& inode, uint64_t first, uint64_t end, Lock& lock);
  // After a crash in the middle of free_range_in_steps: the written extents left past a
  // regular file's size are freed (unwritten ones are preallocations, and stay).
  Result<void> free_past_eof(Inode& inode, Lock& lock);
  void wait_in_steps(Inode& inode, Lock& lock);
  // The inode is in steps for the guard's life (wait_in_steps first); on the way out the
  // mark goes and waiters wake.
  class InSteps {
   public:
    InSteps(Filesystem& fs, Inode& inode, Lock& lock);
    ~InSteps();
    InSteps(const InSteps&) = delete;
    InSteps& operator=(const InSteps&) = delete;

   private:
    Filesystem& fs_;
    Inode& inode_;
  };
  Result<void> free_unlinked(Inode& inode, Lock& lock);
  Result<void> destroy_inode_in_steps(Inode& inode, Lock& lock);
  void free_blocks(uint64_t first, uint64_t count);

  // directories (directory_index.hpp): the index of `dir`, for this operation
  DirectoryIndex directory(Inode& dir);

  // file data (file_data.cpp)
  Result<void> fill_from_volume(Inode& inode, uint64_t offset, std::span<std::byte> dest,
                                Lock& lock);
  void insert_range(Inode& inode, uint64_t offset, uint64_t length,
                    std::shared_ptr<AlignedBuffer> buffer, size_t buffer_offset);
  // Drops cached data of [offset, end); with `release`, dirty unallocated blocks give back
  // their reservation (not when new data replaces them at once).
  void drop_ranges(Inode& inode, uint64_t offset, uint64_t end, bool release = true);
  Result<void> start_writeback(Inode& inode, uint64_t offset, uint64_t end, Lock& lock);
  Result<void> writeback_inode(Inode& inode, Lock& lock);  // starts, then waits
  void writeback_done(std::shared_ptr<WritebackJob> job, Result<void> result);
  void wait_writeback(Inode& inode, Lock& lock);
  Result<void> truncate(Inode& inode, uint64_t size, Lock& lock);
  void maybe_full_stripe_writeback(Inode& inode, uint64_t offset, uint64_t end, Lock& lock);
  void throttle(Lock& lock);
  Result<void> reserve_delalloc(Inode& inode, uint64_t offset, uint64_t end, Lock& lock);
  Result<void> ensure_space(uint64_t blocks, Lock& lock);  // commits and checkpoints to find it
  Lock change_lock();  // the lock, after committing a running transaction grown large
  // write() and write_shared() share these three.
  Result<bool> start_write(uint64_t ino, uint64_t offset, size_t size, Lock& lock);
  Result<void> admit_write(Inode& inode, uint64_t begin, uint64_t end, Lock& lock);
  void place_write(Inode& inode, uint64_t begin, uint64_t length,
                   std::shared_ptr<AlignedBuffer> buffer, size_t buffer_offset, uint64_t file_end,
                   Lock& lock);
  // With the lock held: commits (releasing the lock meanwhile) while the running
  // transaction is past a quarter of the journal.
  Result<void> commit_while_large(Lock& lock);
  Result<std::shared_ptr<AlignedBuffer>> zero_range_in_cache(Inode& inode, uint64_t offset,
                                                             uint64_t end, Lock& lock);
  void settle_extents(Inode& inode, uint64_t first, uint64_t end, bool written);

  // data checksums (data_checksums.cpp), on a filesystem that keeps them
  // The checksum of every block of `pieces` (whole blocks), by volume block.
  static std::vector<std::pair<uint64_t, uint32_t>> data_checksums(
      const std::vector<VolumePiece>& pieces);
  // Into the checksum table, in the running transaction.
  Result<void> store_checksums(const std::vector<std::pair<uint64_t, uint32_t>>& checksums);
  // check.expected from the table (under the lock).
  Result<void> expect_checksums(ReadCheck& check);
  // The blocks (indices in run order) whose contents in `read` fail their checksum.
  static std::vector<size_t> failed_blocks(const ReadCheck& check, std::span<const std::byte> read);
  // Each failed block looked for in the array's redundancy (Volume::recover_block), the good
  // contents put in its place and counted; EIO naming the file offset when some block has
  // no good copy. Blocking: never on a completion (the healer thread, or under the lock).
  Result<void> recover_blocks(const ReadCheck& check, const std::vector<size_t>& failed,
                              std::span<std::byte> read);
  // The table block holding volume block `b`'s checksum, and the entry's offset in it.
  std::pair<uint64_t, size_t> checksum_slot(uint64_t b) const;
  uint64_t start_read_locked();      // with mutex_: the read's epoch, counted active
  void finish_read(uint64_t epoch);  // without mutex_ (it may be held by another thread)
  void release_checkpointed();

  // commit and background work (commit.cpp)
  Result<void> commit();
  Result<void> checkpoint();
  void tick();
  // (Dropped once the worker has ended: only a filesystem destroyed without an unmount,
  // whose completions are a crash's, posts then.)
  void post(std::function<void()> task) { (void)worker_.post(std::move(task)); }
  Result<void> check_writable() const;
  Result<void> kill_privs(Inode& inode, KillPrivs& what);  // kill_privs.cpp
  Result<void> write_superblock(FsState state);
  Result<void> free_orphans();
  // Looks at inode `ino` after a crash: frees it if no link is left, else its written
  // blocks past its size. Whether it was freed.
  Result<bool> recover_inode(uint64_t ino, Lock& lock);
  void fail_filesystem(const Error& why);

  // xattrs (xattr.cpp)
  Result<std::vector<Xattr>> load_xattrs(Inode& inode);
  Result<void> store_xattrs(Inode& inode, const std::vector<Xattr>& attrs);

  // POSIX ACLs (acl_ops.cpp), with posix_acls_ on
  // A node just made in `dir`: its directory's default ACL inherited (a directory keeps a
  // copy as its own default), or else the umask applied.
  Result<void> inherit_acls(Inode& dir, Inode& node, uint32_t umask);
  // chmod to `mode`: the access ACL, if any, follows it.
  Result<void> chmod_acl(Inode& node, uint32_t mode);
  // setxattr of system.posix_acl_access or _default: checked, the mode kept in step.
  Result<void> set_acl(Inode& node, std::string_view name, std::string_view value,
                       const KeepsSgid& keeps_sgid);

  Volume& volume_;
  FsOptions options_;
  FsSuperblock sb_;
  std::unique_ptr<VolumeDevice> journal_device_;
  std::unique_ptr<Journal> journal_;
  std::unique_ptr<MetaStore> meta_;
  std::unique_ptr<BitmapAllocator> blocks_;
  std::unique_ptr<BitmapAllocator> inodes_;
  std::unique_ptr<OrphanList> orphans_;  // null: a filesystem made without one (minor 0)
  std::atomic<bool> posix_acls_{false};  // enable_posix_acls

  std::mutex commit_mutex_;  // lock 1 (see the top of this file)
  // Lock 2: guards what follows, up to the background threads. Owned: finish_read(), on a
  // Volume completion, only tries it, and that may run on a thread holding it.
  mutable OwnedMutex mutex_;
  std::condition_variable_any writeback_cv_;  // with mutex_: writebacks finished
  std::unique_ptr<InodeTable> table_;         // the inodes in memory, and which changed
  uint64_t cached_bytes_ = 0;  // bytes of file data in cache maps (dirty and in flight)
  // Frees become reusable once a checkpoint covers them and every read that might still use
  // an older mapping (one that started before that checkpoint) is done.
  // Reads are counted in atomics, not under a lock of their own: eight FUSE workers taking
  // one twice per 4 KiB read made a tenth of them sleep on it. A read of epoch e counts in
  // slot e % kReadEpochSlots; checkpoint() keeps at most that many epochs with reads in
  // flight, so no two share a slot.
  static constexpr size_t kReadEpochSlots = 64;
  uint64_t epoch_ = 0;  // checkpoints so far; changed under mutex_
  std::array<std::atomic<uint64_t>, kReadEpochSlots> reads_in_flight_{};
  uint64_t oldest_read_epoch_ = 0;  // under mutex_: no read of an older epoch is in flight
  std::atomic<bool> releases_waiting_{false};           // releases_ is not empty
  std::atomic<uint64_t> reads_finishing_{0};            // reads not yet out of finish_read()
  std::deque<std::pair<uint64_t, uint64_t>> releases_;  // (epoch, transaction) waiting
  uint64_t next_job_ = 1;
  uint64_t delalloc_reserved_ = 0;  // blocks promised to dirty data not yet allocated
  uint64_t metadata_reserve_ = 0;   // blocks only metadata may take (commits must not fail)
  std::optional<Error> failed_;
  FsStats stats_;
  std::atomic<uint64_t> checksum_recovered_{0}, checksum_unrecoverable_{0};  // the healer's

  // Idle buffers the pool keeps. The cache and these are what the DataArena may grow to
  // (the constructor allows it): file data in registered memory, fixed buffers for io_uring.
  static constexpr size_t kIdleDataBuffers = 64u << 20;
  std::shared_ptr<DataBuffers> buffers_ = DataBuffers::create(kIdleDataBuffers);

  // Background threads (each with its own leaf lock): the submitter hands writeback jobs to
  // the Volume; the worker runs completions and the timers (tick). Both start at mount and
  // stop at unmount.
  Submitter submitter_{volume_};
  Worker worker_{std::chrono::milliseconds(200), [this] { tick(); }};
  // Reads whose blocks failed their checksums are recovered here (blocking, off the
  // completion threads), one after another.
  Worker healer_{std::chrono::hours(1), [] {}};
  uint64_t last_commit_ = 0;  // the worker's: when tick() last committed
  void stop_threads();
  bool draining_ = false;  // being destroyed without an unmount: no new writeback starts
};

}  // namespace stripefs::fs
