// Hands writeback pieces to the Volume on a thread of its own, in the order they came: off
// the filesystem lock and off the FUSE threads (on members driven inline, Volume::write
// copies and computes parity on the thread that calls it).
//
// Lock order: its mutex is a leaf; nothing is called under it.
#pragma once

#include <condition_variable>
#include <deque>
#include <functional>
#include <mutex>
#include <thread>
#include <vector>

#include "raid/volume.hpp"

namespace stripefs::fs {

class Submitter {
 public:
  explicit Submitter(Volume& volume) : volume_(volume) {}
  ~Submitter() { stop(); }
  Submitter(const Submitter&) = delete;
  Submitter& operator=(const Submitter&) = delete;

  void start();
  // Queues a write of `pieces`, whose buffers stay live and unchanged until `done` runs.
  // `done` runs once, on the thread that completes the write (often an I/O thread): it must
  // not block.
  void submit(std::vector<VolumePiece> pieces, Volume::Callback done);
  // Submits what is queued, then ends the thread.
  void stop();

 private:
  struct Write {
    std::vector<VolumePiece> pieces;
    Volume::Callback done;
  };
  void run();

  Volume& volume_;
  std::thread thread_;
  std::mutex mutex_;  // guards queue_ and stopping_
  std::condition_variable cv_;
  std::deque<Write> queue_;
  bool stopping_ = false;
};

}  // namespace stripefs::fs
