#include "journal/stripe_journal.hpp"

#include <cstring>

#include "journal/journal_log.hpp"
#include "journal/mirrored_area.hpp"
#include "raid/aligned_buffer.hpp"

namespace stripefs {

namespace {
constexpr uint64_t kSector = 512;
}  // namespace

// A transaction's blocks, owned until the journal says it is durable.
struct StripeJournal::Waiting {
  uint64_t stripe = 0;
  std::vector<AlignedBuffer> images;
  std::vector<JournalBlock> blocks;
  std::function<void(Result<uint64_t>)> logged;
};

// member (8 bits) | sectors in the block (8 bits) | offset in sectors (48 bits: 128 PiB)
uint64_t StripeJournal::encode_target(unsigned member, uint64_t offset, uint32_t length) {
  return (uint64_t{member} << 56) | (uint64_t{length / kSector} << 48) | (offset / kSector);
}

void StripeJournal::decode_target(uint64_t target, unsigned& member, uint64_t& offset,
                                  uint32_t& length) {
  member = static_cast<unsigned>(target >> 56);
  length = static_cast<uint32_t>((target >> 48) & 0xff) * kSector;
  offset = (target & ((uint64_t{1} << 48) - 1)) * kSector;
}

StripeJournal::StripeJournal(std::unique_ptr<Journal> journal, Volume& volume,
                             std::unique_ptr<Member> device,
                             std::chrono::milliseconds idle_checkpoint)
    : device_(std::move(device)),
      journal_(std::move(journal)),
      volume_(volume),
      idle_checkpoint_(idle_checkpoint) {
  checkpointer_ = std::thread([this] { checkpoint_loop(); });
}

Result<void> StripeJournal::member_returned(unsigned role) {
  if (auto* area = dynamic_cast<MirroredArea*>(device_.get())) return area->copy_to(role);
  return {};
}

StripeJournal::~StripeJournal() {
  {
    std::lock_guard lock(mutex_);
    stopping_ = true;
  }
  cv_.notify_all();
  checkpointer_.join();
  // The journal first: its destructor waits for commits in flight, whose callbacks use us.
  journal_.reset();
  std::vector<std::shared_ptr<Waiting>> waiting;
  std::vector<std::pair<uint64_t, std::function<void(Result<void>)>>> bypasses;
  {
    std::lock_guard lock(mutex_);
    waiting = std::exchange(waiting_, {});
    bypasses = std::exchange(bypasses_, {});
  }
  for (auto& w : waiting) w->logged(fail(ESHUTDOWN, "stripe journal closed"));
  for (auto& [needed, go] : bypasses) go(fail(ESHUTDOWN, "stripe journal closed"));
}

void StripeJournal::log(uint64_t stripe, std::vector<StripeLogWrite> writes,
                        std::function<void(Result<uint64_t>)> logged) {
  auto waiting = std::make_shared<Waiting>();
  waiting->stripe = stripe;
  waiting->logged = std::move(logged);
  uint64_t bytes = 0;
  for (const StripeLogWrite& w : writes) {
    for (uint64_t at = 0; at < w.data.size(); at += kJournalBlockSize) {
      const uint64_t length = std::min<uint64_t>(kJournalBlockSize, w.data.size() - at);
      AlignedBuffer image(kJournalBlockSize);
      std::memcpy(image.data(), w.data.data() + at, length);
      std::memset(image.data() + length, 0, kJournalBlockSize - length);
      waiting->blocks.push_back(
          {encode_target(w.member, w.offset + at, static_cast<uint32_t>(length)),
           {image.data(), kJournalBlockSize}});
      waiting->images.push_back(std::move(image));
      bytes += length;
    }
  }
  {
    std::lock_guard lock(mutex_);
    ++stats_.stripes_logged;
    stats_.bytes_logged += bytes;
  }
  commit(std::move(waiting));
}

void StripeJournal::commit(std::shared_ptr<Waiting> waiting) {
  journal_->commit(waiting->blocks, [this, waiting](Result<uint64_t> sequence) {
    const uint64_t count = waiting->blocks.size();
    const uint64_t needed = count + (count + kMaxDescriptorEntries - 1) / kMaxDescriptorEntries + 1;
    if (!sequence && sequence.error().code == ENOSPC && needed <= journal_->capacity_blocks()) {
      // Space comes back as stripes in flight complete and a checkpoint releases them:
      // wait for the checkpointer, then try again. (A transaction larger than the whole log
      // can never fit: that ENOSPC is final.)
      std::lock_guard lock(mutex_);
      waiting_.push_back(waiting);
      wanted_ = true;
      ++stats_.waits_for_space;
      cv_.notify_all();
      return;
    }
    if (sequence) {
      std::lock_guard lock(mutex_);
      in_flight_.insert(*sequence);
      last_logged_ = std::max(last_logged_, *sequence);
      logged_stripes_[waiting->stripe] = *sequence;
    }
    waiting->logged(sequence);
  });
}

void StripeJournal::before_bypass(std::vector<uint64_t> stripes,
                                  std::function<void(Result<void>)> go) {
  {
    std::lock_guard lock(mutex_);
    uint64_t needed = 0;
    for (uint64_t stripe : stripes) {
      auto it = logged_stripes_.find(stripe);
      if (it != logged_stripes_.end()) needed = std::max(needed, it->second);
    }
    if (needed > last_checkpoint_) {
      // Replay could still bring an older version of these stripes back over the full-stripe
      // write: it waits until a checkpoint has released those transactions.
      bypasses_.emplace_back(needed, std::move(go));
      ++stats_.bypass_waits;
      wanted_ = true;
      cv_.notify_all();
      return;
    }
  }
  go({});
}

std::vector<std::function<void(Result<void>)>> StripeJournal::released_bypasses_locked() {
  std::vector<std::function<void(Result<void>)>> ready;
  std::erase_if(bypasses_, [&](auto& b) {
    if (b.first > last_checkpoint_) return false;
    ready.push_back(std::move(b.second));
    return true;
  });
  std::erase_if(logged_stripes_, [&](auto& e) { return e.second <= last_checkpoint_; });
  return ready;
}

void StripeJournal::written(uint64_t token) {
  std::lock_guard lock(mutex_);
  in_flight_.erase(token);
  // Ask for a checkpoint once half the log is in use, or when a full stripe waits for one.
  if (!bypasses_.empty() || journal_->used_blocks() * 2 > journal_->capacity_blocks()) {
    wanted_ = true;
    cv_.notify_all();
  }
}

Result<void> StripeJournal::checkpoint() {
  uint64_t upto;
  {
    std::lock_guard lock(mutex_);
    upto = in_flight_.empty() ? last_logged_ : *in_flight_.begin() - 1;
    if (upto <= last_checkpoint_) return {};
  }
  // The in-place writes of everything up to `upto` completed; make them durable first.
  if (auto f = volume_.flush(); !f) return f;
  if (auto c = journal_->checkpoint(upto); !c) return c;
  std::lock_guard lock(mutex_);
  last_checkpoint_ = std::max(last_checkpoint_, upto);
  ++stats_.checkpoints;
  return {};
}

void StripeJournal::checkpoint_loop() {
  std::unique_lock lock(mutex_);
  for (;;) {
    cv_.wait_for(lock, idle_checkpoint_, [this] { return stopping_ || wanted_; });
    if (stopping_) return;
    wanted_ = false;
    const uint64_t before = last_checkpoint_;
    lock.unlock();
    auto checkpointed = checkpoint();
    lock.lock();
    if (!checkpointed) {
      // The log cannot advance (the array or the journal device failed): fail what waits on
      // it rather than strand it.
      journal_log().error("stripe journal checkpoint: {}", checkpointed.error().message);
      auto waiting = std::exchange(waiting_, {});
      auto bypasses = std::exchange(bypasses_, {});
      lock.unlock();
      for (auto& w : waiting) w->logged(fail(checkpointed.error()));
      for (auto& [needed, go] : bypasses) go(fail(checkpointed.error()));
      lock.lock();
      continue;
    }
    auto retry = std::exchange(waiting_, {});
    auto released = released_bypasses_locked();
    const bool progress = last_checkpoint_ != before;
    if (!bypasses_.empty()) wanted_ = true;  // older stripes still in flight: go again
    lock.unlock();
    for (auto& go : released) go({});
    for (auto& w : retry) commit(w);
    if (!progress && (wanted_ || !retry.empty())) {
      // Nothing could be released yet (writes in flight): do not spin.
      std::this_thread::sleep_for(std::chrono::milliseconds(1));
    }
    lock.lock();
  }
}

Result<uint64_t> StripeJournal::replay(Volume& volume) {
  uint64_t replayed = 0;
  bool failed_member = false;
  auto last =
      journal_->replay([&](uint64_t target, std::span<const std::byte> data) -> Result<void> {
        unsigned member;
        uint64_t offset;
        uint32_t length;
        decode_target(target, member, offset, length);
        if (member >= volume.geometry().members() || length == 0 || length > data.size()) {
          return fail(EUCLEAN,
                      "stripe journal: block for member {} at byte {} of {} bytes is "
                      "impossible for this array",
                      member, offset, length);
        }
        ++replayed;
        if (!volume.active(member) || volume.member(member) == nullptr) return {};
        auto w = member_write(*volume.member(member), offset, data.first(length));
        if (!w) {
          // As md does: the member is failed and replay goes on, if the array can run
          // without it (Array::open records the failure in the survivors' superblocks).
          volume.fail_member(member, w.error());
          failed_member = true;
          if (volume.failed()) {
            return fail(w.error().code,
                        "stripe journal replay: {}; the array cannot run "
                        "without that member",
                        w.error().message);
          }
        }
        return {};
      });
  if (!last) return fail(last.error());
  // Rewritten in place: make it durable, then the log may forget it. Not while a member
  // failed here is unrecorded: the log is all that says what it missed, so the caller
  // records the failure first and then checkpoints (Array::open does).
  if (*last != 0 && !failed_member) {
    if (auto f = volume.flush(); !f) return fail(f.error());
    if (auto c = journal_->checkpoint(*last); !c) return fail(c.error());
  }
  std::lock_guard lock(mutex_);
  last_logged_ = *last;
  last_checkpoint_ = failed_member ? 0 : *last;
  logged_stripes_.clear();
  return replayed;
}

StripeJournalStats StripeJournal::stats() const {
  std::lock_guard lock(mutex_);
  return stats_;
}

}  // namespace stripefs
