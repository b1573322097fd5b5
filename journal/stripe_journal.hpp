// The Volume's stripe log (raid/stripe_log.hpp) on the write-ahead journal: each partial
// stripe's writes become one journal transaction, durable before the in-place writes; a
// checkpointer releases log space once the in-place writes are durable too.
#pragma once

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

class StripeJournal final : public StripeLog {
 public:
  // `journal` is open (not yet replayed). `volume` must outlive this object. `device`, if
  // given, is the journal's device, kept until the journal is gone.
  StripeJournal(std::unique_ptr<Journal> journal, Volume& volume,
                std::unique_ptr<Member> device = nullptr);
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
  std::condition_variable cv_;
  std::thread checkpointer_;
};

}  // namespace stripefs
