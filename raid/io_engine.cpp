#include "raid/io_engine.hpp"

#include <sys/eventfd.h>
#include <unistd.h>

#include <cstring>
#include <future>

#include "raid/local_ring.hpp"
#include "raid/log.hpp"
#include "raid/member_sqe.hpp"

namespace stripefs {

namespace {
// user_data of the eventfd read that wakes the thread when requests are queued.
constexpr uint64_t kWakeTag = 1;
}  // namespace

Result<std::unique_ptr<IoEngine>> IoEngine::create(unsigned queue_depth) {
  std::unique_ptr<IoEngine> engine(new IoEngine(queue_depth));
  // COOP_TASKRUN: a completion does not interrupt the thread while it runs (an IPI per
  // completion); it is posted when the thread next enters the kernel, which it does soon:
  // to submit, to wait, or for a continuation's own system call (a FUSE reply). Under 4 KiB
  // random reads at depth 16 through FUSE it cut the daemon's CPU per read by 4-18 % (six
  // A/B pairs). A kernel before 5.19 refuses it: the ring is made without it then.
  int rc = -EINVAL;
  for (unsigned extra : {unsigned{IORING_SETUP_COOP_TASKRUN}, 0u}) {
    io_uring_params params{};
    params.flags = IORING_SETUP_CQSIZE | extra;
    params.cq_entries = queue_depth * 2;
    rc = io_uring_queue_init_params(queue_depth, &engine->ring_, &params);
    if (rc != -EINVAL) break;
  }
  if (rc < 0) return fail(-rc, "io_uring_queue_init: {}", std::strerror(-rc));
  rc = io_uring_register_buffers_sparse(&engine->ring_, RingBuffers::kSlots);
  if (rc < 0) {
    io_uring_queue_exit(&engine->ring_);
    return fail(-rc, "io_uring_register_buffers_sparse: {}", std::strerror(-rc));
  }
  engine->arena_.attach(&engine->ring_);
  engine->wake_fd_ = eventfd(0, EFD_CLOEXEC);
  if (engine->wake_fd_ < 0) {
    io_uring_queue_exit(&engine->ring_);
    return fail(errno, "eventfd: {}", std::strerror(errno));
  }
  engine->arm_wakeup();
  io_uring_submit(&engine->ring_);
  std::promise<void> started;
  auto running = started.get_future();
  engine->thread_ = std::thread([raw = engine.get(), &started] {
    raw->thread_id_ = std::this_thread::get_id();
    started.set_value();
    raw->run();
  });
  running.wait();
  return engine;
}

IoEngine::IoEngine(unsigned queue_depth) : queue_depth_(queue_depth) {}

IoEngine::~IoEngine() {
  if (thread_.joinable()) {
    {
      std::lock_guard lock(mutex_);
      stopping_ = true;
    }
    uint64_t one = 1;
    [[maybe_unused]] ssize_t n = write(wake_fd_, &one, sizeof(one));
    thread_.join();
  }
  if (wake_fd_ >= 0) {
    io_uring_queue_exit(&ring_);
    close(wake_fd_);
  }
}

void IoEngine::submit(int fd, MemberRequest request) {
  auto pending = std::make_unique<Pending>(Pending{fd, std::move(request)});
  if (std::this_thread::get_id() == thread_id_) {
    // A continuation queuing follow-up I/O: no lock and no wakeup needed.
    LocalRing::engine_took();
    backlog_.push_back(std::move(pending));
    return;
  }
  bool was_empty = false;
  bool refused = false;
  {
    std::lock_guard lock(mutex_);
    refused = stopping_;
    if (!refused) {
      was_empty = queue_.empty();
      queue_.push_back(std::move(pending));
      LocalRing::engine_took();
    }
  }
  if (refused) {
    // The engine is going away: fail the request rather than lose it.
    if (pending->request.done) pending->request.done(-ESHUTDOWN);
    return;
  }
  // Only the first request of a batch needs to wake the thread; the rest ride along.
  if (was_empty) {
    uint64_t one = 1;
    [[maybe_unused]] ssize_t n = write(wake_fd_, &one, sizeof(one));
  }
}

Result<FixedBuffer> IoEngine::register_buffer(void* base, size_t length) {
  std::lock_guard lock(regions_mutex_);
  unsigned slot = 0;
  while (slot < kMaxRegisteredBuffers && regions_[slot].length != 0) ++slot;
  if (slot == kMaxRegisteredBuffers) return fail(ENOSPC, "no free fixed-buffer slot");
  iovec iov{base, length};
  __u64 tag = 0;
  int rc = io_uring_register_buffers_update_tag(&ring_, slot, &iov, &tag, 1);
  if (rc < 0) return fail(-rc, "io_uring_register_buffers_update_tag: {}", std::strerror(-rc));
  regions_[slot] = Region{reinterpret_cast<uintptr_t>(base), length};
  return FixedBuffer(this, slot);
}

void IoEngine::unregister_buffer(unsigned slot) {
  std::lock_guard lock(regions_mutex_);
  // Requests already in flight keep their pages; new ones no longer match the region.
  iovec empty{nullptr, 0};
  __u64 tag = 0;
  int rc = io_uring_register_buffers_update_tag(&ring_, slot, &empty, &tag, 1);
  if (rc < 0) raid_log().warn("unregistering fixed buffer {}: {}", slot, std::strerror(-rc));
  regions_[slot] = Region{0, 0};
}

FixedBuffer::~FixedBuffer() {
  if (engine_ != nullptr) engine_->unregister_buffer(slot_);
}

// The slot of the registered buffer (register_buffer) that holds every segment, or -1.
int IoEngine::region_slot(const MemberRequest& request) {
  if (request.op == MemberOp::flush || request.iov.empty()) return -1;
  if (request.iov.size() > 1 && !arena_.vectored()) return -1;
  auto inside = [](const Region& r, const iovec& v) {
    const auto start = reinterpret_cast<uintptr_t>(v.iov_base);
    return r.length != 0 && start >= r.base && start + v.iov_len <= r.base + r.length;
  };
  std::lock_guard lock(regions_mutex_);
  for (unsigned slot = 0; slot < kMaxRegisteredBuffers; ++slot) {
    const Region& r = regions_[slot];
    if (!inside(r, request.iov[0])) continue;
    for (const iovec& v : request.iov) {
      if (!inside(r, v)) return -1;
    }
    return static_cast<int>(slot);
  }
  return -1;
}

IoEngineStats IoEngine::stats() const {
  IoEngineStats s;
  s.requests = requests_.load();
  s.fixed_requests = fixed_requests_.load();
  s.largest_batch = largest_batch_.load();
  s.submit_calls = submit_calls_.load();
  return s;
}

// Only the engine thread submits, so a plain load/store keeps the maximum.
void IoEngine::count_submission(int submitted) {
  if (submitted <= 0) return;
  submit_calls_.fetch_add(1, std::memory_order_relaxed);
  if (static_cast<uint64_t>(submitted) > largest_batch_.load(std::memory_order_relaxed)) {
    largest_batch_.store(static_cast<uint64_t>(submitted), std::memory_order_relaxed);
  }
}

void IoEngine::arm_wakeup() {
  io_uring_sqe* sqe = io_uring_get_sqe(&ring_);
  while (sqe == nullptr) {  // the SQ is full of requests that have not gone in yet
    count_submission(io_uring_submit(&ring_));
    sqe = io_uring_get_sqe(&ring_);
  }
  io_uring_prep_read(sqe, wake_fd_, &wake_value_, sizeof(wake_value_), 0);
  io_uring_sqe_set_data64(sqe, kWakeTag);
}

bool IoEngine::prepare(Pending* pending) {
  // Keep completions within the CQ ring: at most queue_depth requests in flight.
  if (in_flight_ >= queue_depth_) return false;
  io_uring_sqe* sqe = io_uring_get_sqe(&ring_);
  if (sqe == nullptr) {
    count_submission(io_uring_submit(&ring_));
    sqe = io_uring_get_sqe(&ring_);
    if (sqe == nullptr) return false;
  }
  MemberRequest& request = pending->request;
  const int fd = pending->fd;
  arena_.sync();
  int fixed_slot = arena_.slot_for(request);
  if (fixed_slot < 0) fixed_slot = region_slot(request);
  prep_member_sqe(sqe, fd, request, fixed_slot);
  if (fixed_slot >= 0) fixed_requests_.fetch_add(1, std::memory_order_relaxed);
  io_uring_sqe_set_data(sqe, pending);
  ++in_flight_;
  return true;
}

void IoEngine::complete(io_uring_cqe* cqe) {
  std::unique_ptr<Pending> pending(static_cast<Pending*>(io_uring_cqe_get_data(cqe)));
  const int64_t result = cqe->res;
  --in_flight_;
  requests_.fetch_add(1, std::memory_order_relaxed);
  LocalRing::engine_finished();
  auto done = std::move(pending->request.done);
  pending.reset();
  if (done) done(result);
}

void IoEngine::run() {
  bool stopping = false;
  for (;;) {
    {
      std::lock_guard lock(mutex_);
      for (auto& p : queue_) backlog_.push_back(std::move(p));
      queue_.clear();
      stopping = stopping_;
    }
    size_t prepared = 0;
    while (prepared < backlog_.size() && prepare(backlog_[prepared].get())) {
      backlog_[prepared].release();
      ++prepared;
    }
    backlog_.erase(backlog_.begin(), backlog_.begin() + static_cast<ptrdiff_t>(prepared));

    if (stopping && in_flight_ == 0 && backlog_.empty()) break;

    int rc = io_uring_submit_and_wait(&ring_, 1);
    count_submission(rc);
    if (rc < 0 && rc != -EINTR && rc != -EAGAIN && rc != -EBUSY) {
      raid_log().error("io_uring_submit_and_wait: {}", std::strerror(-rc));
    }
    io_uring_cqe* cqe;
    unsigned head;
    unsigned seen = 0;
    bool rearm = false;
    completed_.clear();
    io_uring_for_each_cqe(&ring_, head, cqe) {
      ++seen;
      if (io_uring_cqe_get_data64(cqe) == kWakeTag) {
        rearm = true;
      } else {
        completed_.push_back(*cqe);
      }
    }
    io_uring_cq_advance(&ring_, seen);
    if (rearm) arm_wakeup();
    // Continuations may queue more work; they run after the CQ is released.
    for (io_uring_cqe& c : completed_) complete(&c);
  }
}

}  // namespace stripefs
