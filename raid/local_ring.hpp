// A ring per thread, for threads that wait for their own I/O (a FUSE worker answering a
// read): run to completion, with no other thread involved. io_uring delivers a completion
// to the task that submitted the request, so a request the engine's thread would reap costs
// a wake-up of that thread, and one of the submitter's too when the submitter is another
// thread (see io_engine.hpp). On its own ring, a thread submits what it captured and
// watches for the completion for up to 20 us (a fast device's read is done before a sleeping
// thread would be woken; not on one CPU); then it sleeps for it, and the completion wakes
// only it.
//
// Two scopes, both per thread:
//   LocalRing::Reaper  the thread promises to wait: when the outermost Reaper ends, the
//                      thread submits what it captured and runs every completion (and what
//                      they capture in turn) until its ring is idle. Put it where nothing
//                      after it can block on that I/O (the end of a FUSE request handler).
//                      It takes effect only when the thread is alone, as judged at its
//                      first member request: no other thread in a Reaper with member I/O,
//                      no request in an engine (engine_took), and neither seen for 200 us;
//                      otherwise the requests go to the engine as before. A Reaper whose
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
