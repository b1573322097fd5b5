// The filesystem's background thread: it runs posted tasks as they come (I/O completions,
// which may not wait for the filesystem lock on an I/O thread, post their work here), and
// after each batch of them, and at least every `period`, the tick (timed writeback, the
// periodic commit, a due checkpoint).
//
// Lock order: its mutex is a leaf; tasks and the tick run without it.
#pragma once

#include <chrono>
#include <condition_variable>
#include <functional>
#include <mutex>
#include <thread>
#include <vector>

namespace stripefs::fs {

class Worker {
 public:
  Worker(std::chrono::milliseconds period, std::function<void()> tick)
      : period_(period), tick_(std::move(tick)) {}
  ~Worker() { stop(); }
  Worker(const Worker&) = delete;
  Worker& operator=(const Worker&) = delete;

  void start();
  bool running() const { return thread_.joinable(); }
  // Runs `task` on the worker, soon. False once the thread has ended (stop()): the task is
  // dropped without running, and the caller answers for what it would have done.
  bool post(std::function<void()> task);
  // Runs what is posted, then ends the thread.
  void stop();

 private:
  void run();

  std::chrono::milliseconds period_;
  std::function<void()> tick_;
  std::thread thread_;
  std::mutex mutex_;  // guards tasks_, stopping_ and ended_
  std::condition_variable cv_;
  std::vector<std::function<void()>> tasks_;
  bool stopping_ = false;
  bool ended_ = false;  // the thread ran its last task (or none was started)
};

}  // namespace stripefs::fs
