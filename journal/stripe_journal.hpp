// The Volume's stripe log (raid/stripe_log.hpp) on the write-ahead journal: each partial
// stripe's writes (new data and parity, cut into 4 KiB blocks: one copy of the bytes,
// counted in bytes_logged) become one journal transaction, durable before the in-place
// writes; a checkpointer releases log space once the in-place writes are durable too.
//
// The checkpointer runs when half the log is in use, when a full stripe waits at the
// before_bypass barrier, and at least every kIdleCheckpoint (200 ms). A transaction the journal
// refuses for space (ENOSPC) waits for it and is retried; one larger than the whole log fails. A
// checkpoint that fails fails what waits on it (transactions waiting for space, full
// stripes at the barrier).
//
// Known limit: full-stripe writes are not logged, so an unacknowledged full-stripe write torn
// by a crash, on an array that comes back degraded, can rebuild the missing member's chunk
// of that stripe as neither the old nor the new data. Acknowledged and flushed data is never
// affected: a full stripe overwrites every data chunk of its stripe.
#pragma once

#include <chrono>
#include <condition_variable>
#include <map>
#include <memory>
#include <mutex>
#include <set>
#include <thread>

#include "journal/journal.hpp"
#include "raid/stripe_log.hpp"
#include "raid/volume.hpp"

namespace stripefs {

struct StripeJournalStats {
  uint64_t stripes_logged = 0;
  uint64_t bytes_logged = 0;  // copied into journal blocks: the write hole's price
  uint64_t checkpoints = 0;
  uint64_t waits_for_space = 0;
  uint64_t bypass_waits = 0;  // full stripes that waited for a checkpoint of their stripe
};

// How often an idle stripe journal is checkpointed, at least.
constexpr std::chrono::milliseconds kIdleCheckpoint{200};

class StripeJournal final : public StripeLog {
 public:
  // `journal` is open (not yet replayed). `volume` must outlive this object. `device`, if
  // given, is the journal's device, kept until the journal is gone. Besides when asked, the
  // log is checkpointed at least every `idle_checkpoint`.
  StripeJournal(std::unique_ptr<Journal> journal, Volume& volume,
                std::unique_ptr<Member> device = nullptr,
                std::chrono::milliseconds idle_checkpoint = kIdleCheckpoint);
  ~StripeJournal() override;

  void log(uint64_t stripe, std::vector<StripeLogWrite> writes,
           std::function<void(Result<uint64_t>)> logged) override;
  void before_bypass(std::vector<uint64_t> stripes, std::function<void(Result<void>)> go) override;
  void written(uint64_t token) override;
  Result<uint64_t> replay(Volume& volume) override;
  bool lost_records() const override { return rebuilt_; }
  void set_rebuilt() { rebuilt_ = true; }

  // Releases the log up to the oldest stripe still being written, after a member flush.
  // Blocking; also runs on its own thread when the log fills up.
  Result<void> checkpoint() override;
  Result<void> member_returned(unsigned role) override;
  StripeJournalStats stats() const;
  Journal& journal() { return *journal_; }

  // A journal block's home: member, length and offset, packed into the block's target.
  static uint64_t encode_target(unsigned member, uint64_t offset, uint32_t length);
  static void decode_target(uint64_t target, unsigned& member, uint64_t& offset, uint32_t& length);

 private:
  struct Waiting;
  void commit(std::shared_ptr<Waiting> waiting);
  void checkpoint_loop();
  // With mutex_ held: the bypasses a checkpoint up to last_checkpoint_ released.
  std::vector<std::function<void(Result<void>)>> released_bypasses_locked();

  std::unique_ptr<Member> device_;  // destroyed after the journal on it
  std::unique_ptr<Journal> journal_;
  Volume& volume_;
  bool rebuilt_ = false;

  mutable std::mutex mutex_;      // guards everything below
  std::set<uint64_t> in_flight_;  // logged, not yet written in place
  uint64_t last_logged_ = 0;
  uint64_t last_checkpoint_ = 0;
  std::vector<std::shared_ptr<Waiting>> waiting_;  // refused for space: retried after a checkpoint
  std::map<uint64_t, uint64_t> logged_stripes_;    // stripe -> its newest logged sequence
  std::vector<std::pair<uint64_t, std::function<void(Result<void>)>>> bypasses_;  // (needed, go)
  StripeJournalStats stats_;
  bool stopping_ = false;
  bool wanted_ = false;  // a checkpoint was asked for
  std::chrono::milliseconds idle_checkpoint_;
  std::condition_variable cv_;
  std::thread checkpointer_;
};

}  // namespace stripefs
