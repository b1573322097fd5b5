#include "raid/local_ring.hpp"

#include <liburing.h>
#include <poll.h>

#include <atomic>
#include <chrono>
#include <cstring>
#include <memory>
#include <thread>
#include <vector>

#include "raid/cpus.hpp"
#include "raid/log.hpp"
#include "raid/member_sqe.hpp"

namespace stripefs {

namespace {

constexpr unsigned kDepth = 64;

std::atomic<uint64_t> local_requests{0};
std::atomic<uint64_t> local_fixed_requests{0};
// Threads in a Reaper with member I/O, and requests the engines hold. A thread reaps its
// own ring only when it is alone: under load the engine's one thread reaps many completions
// per wake-up, and a worker waiting for its own I/O would take no new FUSE request.
std::atomic<unsigned> active_reapers{0};
std::atomic<int64_t> engine_requests{0};
// When a Reaper last found company (steady clock, ns). Under steady load the moments alone
// are short and do not mean the load has gone: a thread waiting for its own I/O then would
// take no new FUSE request. So alone must have lasted kQuietNs.
std::atomic<int64_t> last_company_ns{0};
constexpr int64_t kQuietNs = 200'000;
// Servers (LocalRing::Server) with member I/O in flight: one spins for its completion only
// when it is the only one.
std::atomic<unsigned> busy_servers{0};
// How long a thread reaping its own ring watches for a completion before it sleeps (see
// spin_for_completion). 4 KiB reads from a loop device at depth 1 through FUSE: 20 us
// gained 23 % against sleeping at once; 10 us did as well, 50 us less (README, "ring").
constexpr int64_t kSpinNs = 20'000;

int64_t now_ns() {
  return std::chrono::duration_cast<std::chrono::nanoseconds>(
             std::chrono::steady_clock::now().time_since_epoch())
      .count();
}

struct Ring {
  io_uring ring{};
  bool ready = false;
  unsigned in_flight = 0;   // prepared and not yet reaped
  bool complained = false;  // an error of io_uring_submit_and_wait was logged
  bool spins = false;       // spin_for_completion watches this ring before it sleeps
  std::vector<io_uring_cqe> completed;
  RingBuffers arena;  // the DataArena's chunks in this ring (none if its table failed)

  Ring() {
    io_uring_params params{};
    params.flags =
        IORING_SETUP_SINGLE_ISSUER | IORING_SETUP_DEFER_TASKRUN | IORING_SETUP_TASKRUN_FLAG;
    int rc = io_uring_queue_init_params(kDepth, &ring, &params);
    if (rc == -EINVAL) {  // a kernel before 6.1
      params = io_uring_params{};
      rc = io_uring_queue_init_params(kDepth, &ring, &params);
    } else if (rc == 0) {
      // The kernel flags pending completions (IORING_SQ_TASKRUN), so a spin can watch for
      // them in memory. Not on one CPU, where it would only keep the device's worker (a
      // loop device's, say) from running.
      spins = usable_cpus() > 1;
    }
    if (rc < 0) {
      raid_log().warn("a thread's own io_uring: {}; its requests go to the engine",
                      std::strerror(-rc));
      return;
    }
    ready = true;
    if (io_uring_register_buffers_sparse(&ring, RingBuffers::kSlots) == 0) arena.attach(&ring);
  }
  ~Ring() {
    if (ready) io_uring_queue_exit(&ring);
  }
  Ring(const Ring&) = delete;
  Ring& operator=(const Ring&) = delete;
};

struct ThreadState {
  unsigned reapers = 0;  // Reapers alive on this thread
  bool counted = false;  // this thread's Reapers have member I/O: counted in active_reapers
  bool local = false;    // and it found itself alone then: this thread reaps its ring
  unsigned captures = 0;
  bool reaping = false;
  bool serving = false;         // a Server lives on this thread
  bool request_polled = false;  // its poll of the request descriptor is armed
  bool request_ready = false;   // that poll fired since the last wait
  bool counted_busy = false;    // counted in busy_servers
  std::unique_ptr<Ring> ring;   // made at the first capture
};

thread_local ThreadState state;

Ring* this_ring() {
  if (!state.ring) state.ring = std::make_unique<Ring>();
  return state.ring->ready ? state.ring.get() : nullptr;
}

// A Server's own requests carry these in user_data where member requests carry their
// MemberRequest (never so low an address).
constexpr uint64_t kRequestPoll = 1;
constexpr uint64_t kPollRemoval = 2;

// Submits what was prepared, then watches for a completion for up to kSpinNs before the
// caller sleeps for one: on a fast device the read is done sooner than a sleeping thread is
// woken (a wake-up costs an interrupt and a context switch, and an idle CPU's exit on a VM;
// the kernel's hybrid polling makes the same trade). Only a thread reading alone gets here,
// so the CPU it spins on has nothing else of ours to run. True when completions are ready.
bool spin_for_completion(Ring& r) {
  if (!r.spins || io_uring_submit(&r.ring) < 0) return false;
  const int64_t until = now_ns() + kSpinNs;
  for (;;) {
    // With DEFER_TASKRUN a completion is posted only when the thread asks the kernel; the
    // flag says there is one to post, so the spin costs no system call until then.
    if (IO_URING_READ_ONCE(*r.ring.sq.kflags) & IORING_SQ_TASKRUN) io_uring_get_events(&r.ring);
    if (io_uring_cq_ready(&r.ring) > 0) return true;
    if (now_ns() > until) return false;
#if defined(__x86_64__) || defined(__i386__)
    __builtin_ia32_pause();
#endif
  }
}

// Takes the completions posted and runs them: a member request's continuation, or a
// Server's poll (noted in `state`). Continuations may capture more; they run after the CQ
// is released. (Never a nested reap: a Reaper made while reaping does nothing.)
void run_completions(Ring& r) {
  io_uring_cqe* cqe;
  unsigned head;
  unsigned seen = 0;
  r.completed.clear();
  io_uring_for_each_cqe(&r.ring, head, cqe) {
    ++seen;
    r.completed.push_back(*cqe);
  }
  io_uring_cq_advance(&r.ring, seen);
  for (const io_uring_cqe& c : r.completed) {
    if (c.user_data == kRequestPoll) {
      state.request_polled = false;
      state.request_ready = true;  // readable, or the poll failed: a read will say which
    } else if (c.user_data != kPollRemoval) {
      --r.in_flight;
      std::unique_ptr<MemberRequest> request(
          static_cast<MemberRequest*>(io_uring_cqe_get_data(&c)));
      auto done = std::move(request->done);
      request.reset();
      if (done) done(c.res);
    }
  }
}

// Submits what was prepared and sleeps for a completion (after spinning for one while
// member I/O is in flight, unless told not to). Errors that are not a signal or a timeout are
// retried after a pause, not in a spin. Returns the submit's result.
int submit_and_wait(Ring& r, bool spin = true) {
  const bool spun = spin && r.in_flight > 0 && spin_for_completion(r);
  const int rc = spun ? 0 : io_uring_submit_and_wait(&r.ring, 1);
  if (rc < 0 && rc != -EINTR && rc != -ETIME) {
    // Short of memory (EAGAIN, ENOMEM) or of completion space (EBUSY): what was prepared
    // stays in the ring and goes with the next try. Anything but the transient kinds is
    // logged, once.
    if (rc != -EAGAIN && rc != -EBUSY && !r.complained) {
      raid_log().error("a thread's own io_uring: io_uring_submit_and_wait: {}", std::strerror(-rc));
      r.complained = true;
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
  }
  return rc;
}

// Submits what was prepared and runs completions until no member request is in flight.
void reap(Ring& r) {
  while (r.in_flight > 0) {
    (void)submit_and_wait(r);
    run_completions(r);
  }
}

// Counts this thread's Server in busy_servers while its member I/O is in flight.
void note_busy(const Ring& r) {
  const bool busy = r.in_flight > 0;
  if (busy == state.counted_busy) return;
  state.counted_busy = busy;
  if (busy) {
    busy_servers.fetch_add(1, std::memory_order_relaxed);
  } else {
    busy_servers.fetch_sub(1, std::memory_order_relaxed);
  }
}

// Arms a one-shot poll for input on `fd`, tagged `tag`; false when the ring has no room
// (the caller's wait then reaps completions, which frees some).
bool arm_poll(Ring& r, int fd, uint64_t tag) {
  io_uring_sqe* sqe = io_uring_get_sqe(&r.ring);
  if (sqe == nullptr) return false;
  io_uring_prep_poll_add(sqe, fd, POLLIN);
  sqe->user_data = tag;
  return true;
}

}  // namespace

LocalRing::Reaper::Reaper() {
  ++state.reapers;  // nothing shared yet: a read answered from the cache costs no more
}

LocalRing::Reaper::~Reaper() {
  if (--state.reapers != 0 || state.reaping || state.serving) return;
  if (!state.counted) return;
  if (state.local && state.ring) {
    // Completions capture what they submit: it is this thread's to reap as well.
    state.reaping = true;
    reap(*state.ring);
    state.reaping = false;
  }
  state.local = false;
  state.counted = false;
  active_reapers.fetch_sub(1, std::memory_order_relaxed);
}

LocalRing::Capture::Capture() {
  ++state.captures;
}

LocalRing::Capture::~Capture() {
  --state.captures;
}

bool LocalRing::try_submit(int fd, MemberRequest& request) {
  // While reaping, a completion may resume another thread's work (a stripe lock released
  // to its next waiter): taken here only while this thread is still alone, or one worker
  // could end up driving everyone's I/O.
  if (state.serving) {
    // The Server reaps what this thread submits in a Reaper; what continuations submit
    // (another thread's work, resumed) goes to the engine.
    if (state.reaping || state.captures == 0 || state.reapers == 0) return false;
  } else if (state.reaping) {
    if (active_reapers.load(std::memory_order_relaxed) != 1 ||
        engine_requests.load(std::memory_order_relaxed) != 0) {
      return false;
    }
  } else {
    if (state.captures == 0 || state.reapers == 0) return false;
    // The first member request of this Reaper decides, once, whether the thread is alone.
    if (!state.counted) {
      state.counted = true;
      const bool alone = active_reapers.fetch_add(1, std::memory_order_relaxed) == 0 &&
                         engine_requests.load(std::memory_order_relaxed) == 0;
      const int64_t now = now_ns();
      if (!alone) last_company_ns.store(now, std::memory_order_relaxed);
      state.local = alone && now - last_company_ns.load(std::memory_order_relaxed) > kQuietNs;
    }
    if (!state.local) return false;
  }
  Ring* ring = this_ring();
  if (ring == nullptr || ring->in_flight >= kDepth) return false;
  Ring& r = *ring;
  io_uring_sqe* sqe = io_uring_get_sqe(&r.ring);
  if (sqe == nullptr) return false;
  auto owned = std::make_unique<MemberRequest>(std::move(request));
  r.arena.sync();
  const int fixed_slot = r.arena.slot_for(*owned);
  prep_member_sqe(sqe, fd, *owned, fixed_slot);
  if (fixed_slot >= 0) local_fixed_requests.fetch_add(1, std::memory_order_relaxed);
  io_uring_sqe_set_data(sqe, owned.release());
  ++r.in_flight;
  local_requests.fetch_add(1, std::memory_order_relaxed);
  return true;
}

LocalRing::Server::Server(int request_fd) : request_fd_(request_fd) {
  if (state.serving || this_ring() == nullptr) return;
  state.serving = true;
  state.request_ready = false;
  ready_ = true;
}

LocalRing::Server::~Server() {
  if (!ready_) return;
  Ring& r = *state.ring;
  // Neither its poll (of a descriptor that may be closed next) nor a member request left
  // behind: their completions would find no Server, or no MemberRequest, to run.
  (void)io_uring_submit(&r.ring);  // room in the queue for the removal
  if (state.request_polled) {
    if (io_uring_sqe* sqe = io_uring_get_sqe(&r.ring)) {
      io_uring_prep_poll_remove(sqe, kRequestPoll);
      sqe->user_data = kPollRemoval;
    }
  }
  state.reaping = true;
  while (state.request_polled || r.in_flight > 0) {
    (void)submit_and_wait(r);
    run_completions(r);
  }
  // A removal's own completion may come after its poll's; it means nothing.
  (void)io_uring_submit(&r.ring);
  run_completions(r);
  state.reaping = false;
  state.serving = false;
  note_busy(r);
}

bool LocalRing::Server::busy() const {
  return ready_ && state.ring->in_flight > 0;
}

void LocalRing::Server::submit() {
  Ring& r = *state.ring;
  (void)io_uring_submit(&r.ring);  // on a failure what was prepared goes with the next wait
  if (IO_URING_READ_ONCE(*r.ring.sq.kflags) & IORING_SQ_TASKRUN) io_uring_get_events(&r.ring);
  if (io_uring_cq_ready(&r.ring) > 0) {
    state.reaping = true;
    run_completions(r);
    state.reaping = false;
  }
  note_busy(r);
}

bool LocalRing::Server::wait() {
  Ring& r = *state.ring;
  state.request_ready = false;
  // A completion soon (a fast device's) is caught without a sleep or the poll's cost, by
  // a Server that is the only one with member I/O in flight (a reader at queue depth 1).
  // Under load it would keep a CPU from the device's and the other workers' work: at queue
  // depth 16 with two workers, spinning whenever a read was in flight cost a fifth.
  note_busy(r);
  const bool alone = busy_servers.load(std::memory_order_relaxed) == 1;
  if (!(r.in_flight > 0 && alone && spin_for_completion(r))) {
    if (!state.request_polled) {
      state.request_polled = arm_poll(r, request_fd_, kRequestPoll);
    }
    (void)submit_and_wait(r, /*spin=*/false);  // a signal ends it too
  }
  state.reaping = true;
  run_completions(r);
  state.reaping = false;
  note_busy(r);
  return state.request_ready;
}

void LocalRing::engine_took() {
  engine_requests.fetch_add(1, std::memory_order_relaxed);
}

void LocalRing::engine_finished() {
  engine_requests.fetch_sub(1, std::memory_order_relaxed);
}

uint64_t LocalRing::requests() {
  return local_requests.load(std::memory_order_relaxed);
}

uint64_t LocalRing::fixed_requests() {
  return local_fixed_requests.load(std::memory_order_relaxed);
}

}  // namespace stripefs
