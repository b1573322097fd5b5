#include "fs/core/worker.hpp"

namespace stripefs::fs {

void Worker::start() {
  thread_ = std::thread([this] { run(); });
}

void Worker::post(std::function<void()> task) {
  {
    std::lock_guard lock(mutex_);
    tasks_.push_back(std::move(task));
  }
  cv_.notify_one();
}

void Worker::stop() {
  {
    std::lock_guard lock(mutex_);
    stopping_ = true;
  }
  cv_.notify_all();
  if (thread_.joinable()) thread_.join();
}

void Worker::run() {
  for (;;) {
    std::vector<std::function<void()>> tasks;
    {
      std::unique_lock lock(mutex_);
      cv_.wait_for(lock, period_, [&] { return stopping_ || !tasks_.empty(); });
      if (stopping_ && tasks_.empty()) return;
      tasks.swap(tasks_);
    }
    for (auto& task : tasks) task();
    tick_();
  }
}

}  // namespace stripefs::fs
