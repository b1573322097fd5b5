// The metadata block cache and its transactions, over the metadata journal.
//
// Metadata blocks are changed only in memory, inside the running transaction; a commit
// writes the images of every block the transaction changed to the journal (after a volume
// flush, so the data those blocks point at is durable first: ordered mode), and a checkpoint
// later writes the committed images to their home blocks and releases the journal space. A
// crash therefore leaves the metadata as of some commit, never half of one.
//
// Not thread-safe except where noted: the filesystem calls it under its lock, and runs the
// commit and checkpoint I/O steps (write_snapshot, checkpoint) outside that lock, one at a
// time (under its commit lock).
#pragma once
#include <absl/container/flat_hash_map.h>

#include <array>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <unordered_map>
#include <unordered_set>
#include <vector>
#include "fs/core/format.hpp"
#include "journal/journal.hpp"
#include "raid/aligned_buffer.hpp"
#include "raid/volume.hpp"
#include "raid/wait.hpp"

namespace stripefs::fs {

using BlockImage = std::shared_ptr<AlignedBuffer>;

struct MetaStats {
  uint64_t commits = 0;
  uint64_t committed_blocks = 0;
  uint64_t checkpoints = 0;
  uint64_t checkpointed_blocks = 0;
  uint64_t block_reads = 0;
  uint64_t healed_blocks = 0;           // failed their check as read, recovered from redundancy
  uint64_t journal_blocks_written = 0;  // descriptors, images, commits and padding
  uint64_t journal_padding_blocks = 0;  // written to end commits on a stripe boundary
};

class MetaStore {
 public:
  MetaStore(Volume& volume, Journal& journal, size_t cache_limit_blocks);

  // The cached image of `block`, read from the volume on a miss (blocking). Nothing is
  // evicted except by trim(), so the span stays valid for the whole operation.
  Result<std::span<std::byte, kBlockSize>> read(uint64_t block);
  // read(), and the image checked by `good` (once: for blocks that are always checked the
  // same way; what this program writes into a block is right by construction). One that
  // fails is healed (below).
  Result<std::span<std::byte, kBlockSize>> read_checked(uint64_t block,
                                                        const Volume::BlockCheck& good);
  // `block`'s cached image failed `good` as read from the volume: the contents are looked
  // for in the array's redundancy (Volume::recover_block, which rewrites the wrong chunk)
  // and replace the image. Metadata heals as file data does. EUCLEAN, naming the block,
  // when nothing passes, or when the image is this program's own (a transaction's).
  Result<std::span<std::byte, kBlockSize>> heal(uint64_t block, const Volume::BlockCheck& good);
  // read(), then `decode(image)` (a Result); a block that does not decode is healed and
  // decoded again. What a decoder refuses as read is the error when healing fails.
  template <class Decode>
  auto read_as(uint64_t block, Decode&& decode)
      -> decltype(decode(std::declval<std::span<const std::byte, kBlockSize>>()));
  // The image of `block` for changing: it joins the running transaction. Read through on a
  // miss; should that read fail, failed() says so and the next commit refuses.
  std::span<std::byte, kBlockSize> modify(uint64_t block);
  // Drops clean blocks down to half the cache limit. Call between operations only.
  void trim();
  const std::optional<Error>& failed() const { return failed_; }
  // A newly allocated metadata block: zeroed, in the running transaction, never read.
  std::span<std::byte, kBlockSize> fresh(uint64_t block);
  // Keeps `block` cached for good (allocation bitmaps: changed often, never re-read).
  void pin(uint64_t block) { pinned_.insert(block); }
  // Blocks [first, first + count) are read_checked() on every data read (the checksum
  // table): their checked images are also found by index, without hashing the block number
  // (two dependent cache misses fewer per read of a file whose blocks are scattered). A
  // block cached and checked before the call is still found, by hash.
  void index_blocks(uint64_t first, uint64_t count);
  // The block was freed: its cached image goes (it may become file data).
  void forget(uint64_t block);

  size_t dirty_blocks() const { return dirty_.size(); }
  // The running transaction's blocks in [first, end), ascending.
  std::vector<uint64_t> dirty_in(uint64_t first, uint64_t end) const;
  // Whether `block`'s home on the volume may be older than its image here: changed in the
  // running transaction, or committed and not yet checkpointed. A home that is not behind
  // holds the last image written, sealed (what a scrub may check it against).
  bool home_behind(uint64_t block) const;
  // The running transaction's number: frees made now are safe to reuse once a checkpoint
  // covers it.
  uint64_t running() const { return running_; }

  struct Snapshot {
    uint64_t transaction = 0;
    std::vector<std::pair<uint64_t, BlockImage>> blocks;
    std::vector<uint32_t> sealed;  // each image's journal checksum as copied
  };
  // Copies the running transaction's blocks and starts the next transaction.
  Snapshot take_snapshot();
  // Without the filesystem lock: flushes the volume, then commits the images to the journal.
  Result<uint64_t> write_snapshot(const Snapshot& snapshot);
  // Under the lock again: the images wait for the checkpoint (reads see them meanwhile).
  void committed(const Snapshot& snapshot, uint64_t sequence);
  // Without the filesystem lock: writes every committed image home, flushes, and releases
  // the journal. Returns the last transaction it covers (frees made in it may be reused).
  Result<uint64_t> checkpoint();
  bool checkpoint_due() const;

  MetaStats stats() const;

 private:
  struct Cached {
    AlignedBuffer image;
    bool checked = false;  // read_checked() passed it (or healed it)
  };
  // index_blocks(): the image of every checked, cached block of the range, by its place in
  // it (null: not cached, or not checked), in pages of kIndexPage made on first use. An
  // image's bytes never move while it is cached (AlignedBuffer), so only its leaving the
  // cache (trim, forget) or losing its check (fresh) clears its entry.
  static constexpr size_t kIndexPage = 512;
  using IndexPage = std::array<std::byte*, kIndexPage>;
  std::byte** index_slot(uint64_t block, bool make);
  void unindex(uint64_t block) {
    if (std::byte** slot = index_slot(block, false)) *slot = nullptr;
  }
  uint64_t index_first_ = 0, index_count_ = 0;
  std::vector<std::unique_ptr<IndexPage>> index_;
  Volume& volume_;
  Journal& journal_;
  size_t cache_limit_;
  // Open addressing: a checked read of a checksum table (every data read) finds its image
  // in one probe. Entries move on rehash; their images' bytes do not (AlignedBuffer).
  absl::flat_hash_map<uint64_t, Cached> cache_;
  std::unordered_set<uint64_t> pinned_;
  std::map<uint64_t, bool> dirty_;  // blocks of the running transaction (sorted for I/O)
  uint64_t running_ = 1;

  // Committed images not yet home; shared with the checkpoint, which runs without the
  // filesystem lock.
  mutable std::mutex images_mutex_;
  std::unordered_map<uint64_t, BlockImage> images_;
  // Images of the commit in flight: readable (they are newer than home), but not yet in
  // images_, which a checkpoint may write home only once they are durable in the journal.
  std::unordered_map<uint64_t, BlockImage> committing_;
  std::optional<Error> failed_;
  AlignedBuffer scratch_{kBlockSize};  // what modify() hands out after a failed read
  uint64_t last_sequence_ = 0;
  uint64_t last_transaction_ = 0;
  MetaStats stats_;
};

template <class Decode>
auto MetaStore::read_as(uint64_t block, Decode&& decode)
    -> decltype(decode(std::declval<std::span<const std::byte, kBlockSize>>())) {
  auto image = read(block);
  if (!image) return fail(image.error());
  auto decoded = decode(std::span<const std::byte, kBlockSize>(*image));
  if (decoded) return decoded;
  auto healed = heal(block, [&](std::span<const std::byte> candidate) {
    return decode(std::span<const std::byte, kBlockSize>(candidate.data(), kBlockSize)).has_value();
  });
  if (!healed) return decoded;
  return decode(std::span<const std::byte, kBlockSize>(*healed));
}

}  // namespace stripefs::fs
