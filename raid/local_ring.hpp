// A ring per thread, for threads that wait for their own I/O (a FUSE worker answering a
// read): run to completion, with no other thread involved. io_uring delivers a completion
// to the task that submitted the request, so a request the engine's thread would reap costs
// a wake-up of that thread, and one of the submitter's too when the submitter is another
// thread (see io_engine.hpp). On its own ring, a thread submits what it captured and
// watches for the completion for up to 20 us (a fast device's read is done before a sleeping
// thread would be woken; not on one CPU); then it sleeps for it, and the completion wakes
// only it.
//
// A thread that serves requests (a FUSE worker of the daemon's own loop) does better still:
// in a LocalRing::Server its Reapers only prepare, and it goes on taking requests while the
// I/O is in flight, waiting on the ring for a completion or a request at once (see Server).
//
// Two scopes, both per thread:
//   LocalRing::Reaper  the thread promises to wait: when the outermost Reaper ends, the
//                      thread submits what it captured and runs every completion (and what
//                      they capture in turn) until its ring is idle. Put it where nothing
//                      after it can block on that I/O (the end of a FUSE request handler).
//                      Outside a Server it takes effect only when the thread is alone, as
//                      judged at its first member request: no other thread in a Reaper
//                      with member I/O, no request in an engine (engine_took), and neither
//                      seen for 200 us; otherwise the requests go to the engine. A Reaper whose
//                      thread submits nothing (a read from the cache) touches nothing shared.
//   LocalRing::Capture requests submitted inside it (FileMember's ring path) go to this
//                      thread's ring, when a Reaper is active; without one, to the engine as
//                      before. Put it only around code that submits and returns, never
//                      around code that waits for its I/O (that would wait forever: the
//                      requests are not even submitted until the Reaper ends).
// Continuations run on the reaping thread, while it reaps; what they submit is captured and
// reaped too while the thread is still alone (else it goes to the engine: a released stripe
// lock may resume other threads' work, which one worker must not end up driving). The ring is made
// at the thread's first capture (SINGLE_ISSUER and DEFER_TASKRUN where the kernel has them) and
// closed when the thread exits. A request that finds the ring full goes to the engine.
#pragma once

#include <cstdint>

#include "raid/member.hpp"

namespace stripefs {

class LocalRing {
 public:
  class Reaper {
   public:
    Reaper();
    ~Reaper();
    Reaper(const Reaper&) = delete;
    Reaper& operator=(const Reaper&) = delete;
  };
  class Capture {
   public:
    Capture();
    ~Capture();
    Capture(const Capture&) = delete;
    Capture& operator=(const Capture&) = delete;
  };

  // A thread that serves requests from a descriptor (a FUSE worker reading /dev/fuse) and
  // keeps its reads' member I/O in flight on its own ring while it takes the next request:
  // one io_uring_enter waits for either, so a read costs no other thread's wake-up at any
  // depth. While a Server lives, this thread's Reapers only prepare what they captured (the
  // Server submits and reaps it), and they take it whatever other threads do; what
  // continuations submit goes to the engine. Needs the ring: check ready() and serve another
  // way when it is false.
  class Server {
   public:
    // `request_fd`: polled for input while the thread waits with member I/O in flight.
    explicit Server(int request_fd);
    // Reaps every member request in flight and withdraws its poll: no completion outlives it.
    ~Server();
    Server(const Server&) = delete;
    Server& operator=(const Server&) = delete;
    bool ready() const { return ready_; }
    // Member requests of this thread's are in flight.
    bool busy() const;
    // Submits what the last request prepared and runs the completions already there.
    void submit();
    // Watches for completions for up to 20 us (while member I/O is in flight, and no other
    // Server's is), then sleeps with `request_fd` polled until a completion, input, or a
    // signal; runs the completions. True when the poll fired: a request may be waiting. The
    // poll is one that every waiter gets (not exclusive), so a thread that left it armed
    // and blocked in read(2) on the descriptor does not swallow another's wake-up; it
    // fires later, spuriously.
    bool wait();

   private:
    int request_fd_;
    bool ready_ = false;
  };

  // For a member's ring path: takes `request` on `fd` into this thread's ring and returns
  // true when a Capture and a Reaper are active and the ring has room; else false, and
  // `request` is untouched.
  static bool try_submit(int fd, MemberRequest& request);

  // The IoEngine counts what it holds: a thread reaps its own ring only when no other
  // thread is in a Reaper with member I/O and no engine holds a request (under load the engine's
  // thread, reaping many completions per wake-up, does better).
  static void engine_took();
  static void engine_finished();

  // Requests taken by any thread's ring since the process started; of those, the ones whose
  // buffer was a fixed (registered) one.
  static uint64_t requests();
  static uint64_t fixed_requests();
};

}  // namespace stripefs
