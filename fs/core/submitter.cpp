#include "fs/core/submitter.hpp"

namespace stripefs::fs {

void Submitter::start() {
  thread_ = std::thread([this] { run(); });
}

void Submitter::submit(std::vector<VolumePiece> pieces, Volume::Callback done) {
  {
    std::lock_guard lock(mutex_);
    queue_.push_back({std::move(pieces), std::move(done)});
  }
  cv_.notify_one();
}

void Submitter::stop() {
  {
    std::lock_guard lock(mutex_);
    stopping_ = true;
  }
  cv_.notify_all();
  if (thread_.joinable()) thread_.join();
}

void Submitter::run() {
  for (;;) {
    Write write;
    {
      std::unique_lock lock(mutex_);
      cv_.wait(lock, [&] { return stopping_ || !queue_.empty(); });
      if (queue_.empty()) return;
      write = std::move(queue_.front());
      queue_.pop_front();
    }
    volume_.write(std::move(write.pieces), std::move(write.done));
  }
}

}  // namespace stripefs::fs
