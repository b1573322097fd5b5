#include "fs/core/worker.hpp"

namespace stripefs::fs {

void Worker::start() {
  thread_ = std::thread([this] { run(); });
}

bool Worker::post(std::function<void()> task) {
  {
    std::lock_guard lock(mutex_);
    if (ended_) return false;
    tasks_.push_back(std::move(task));
  }
  cv_.notify_one();
  return true;
}

void Worker::stop() {
  std::vector<std::function<void()>> unrun;
  {
    std::lock_guard lock(mutex_);
    stopping_ = true;
    if (!thread_.joinable() && !ended_) {
      // Never started: what was posted runs here, and nothing after.
      ended_ = true;
      unrun.swap(tasks_);
    }
  }
  for (auto& task : unrun) task();
  cv_.notify_all();
  if (thread_.joinable()) thread_.join();
}

void Worker::run() {
  for (;;) {
    std::vector<std::function<void()>> tasks;
    {
      std::unique_lock lock(mutex_);
      cv_.wait_for(lock, period_, [&] { return stopping_ || !tasks_.empty(); });
      if (stopping_ && tasks_.empty()) {
        ended_ = true;  // under the lock: no task is queued after this one looked
        return;
      }
      tasks.swap(tasks_);
    }
    for (auto& task : tasks) task();
    tick_();
  }
}

}  // namespace stripefs::fs
