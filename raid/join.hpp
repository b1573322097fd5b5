// Joining asynchronous parts without blocking: the count-down that member batches, Volume
// reads and writes, and flushes share.
#pragma once

#include <atomic>
#include <cstddef>
#include <functional>
#include <memory>
#include <mutex>
#include <optional>

#include "raid/result.hpp"

namespace stripefs {

// Parts that each finish exactly once, on any thread. The last part to finish runs `done`,
// on its own thread, with the first error any part reported (or success); `done` runs once,
// and what it holds is released then. Parts may be added while at least one is unfinished
// (a part may add more before it finishes itself).
class Join {
 public:
  using Done = std::function<void(Result<void>)>;
  static std::shared_ptr<Join> start(size_t parts, Done done) {
    return std::make_shared<Join>(parts, std::move(done));
  }
  Join(size_t parts, Done done) : remaining_(parts), done_(std::move(done)) {}

  void add(size_t parts) { remaining_.fetch_add(parts, std::memory_order_relaxed); }
  void finish(Result<void> result = {}) {
    if (!result) {
      std::lock_guard lock(mutex_);
      if (!error_) error_ = std::move(result.error());
    }
    if (remaining_.fetch_sub(1, std::memory_order_acq_rel) != 1) return;
    Done done = std::move(done_);
    std::optional<Error> error;
    {
      std::lock_guard lock(mutex_);
      error = std::move(error_);
    }
    if (error) {
      done(fail(std::move(*error)));
    } else {
      done({});
    }
  }

 private:
  std::atomic<size_t> remaining_;
  std::mutex mutex_;
  std::optional<Error> error_;
  Done done_;
};

}  // namespace stripefs
