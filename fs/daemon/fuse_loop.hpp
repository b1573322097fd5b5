// The daemon's FUSE loop: `threads` workers, each reading its own two clones of /dev/fuse.
// A worker that answered a read's request submits the member I/O on its own ring
// (LocalRing::Server) and goes on taking requests while it is in flight: then it waits on the
// ring, which polls its descriptor too, so one io_uring_enter waits for a completion or a
// request, and the completion replies on the same thread. A read costs no hand-off to the
// engine's thread at any queue depth, where libfuse's loop blocks a worker in read(2) and
// leaves the member I/O to another thread. A worker with nothing in flight blocks in read(2)
// as libfuse's do: a request wakes one such reader, and no poll is paid for.
//
// The loop ends, as libfuse's does, when the session is exited (a signal, through
// fuse_set_signal_handlers) or the kernel ends the connection (unmount). Every worker's
// member I/O is reaped, so every reply sent, before the call returns.
#pragma once

#include "fs/daemon/fuse_ops.hpp"  // libfuse's API version, then its header

namespace stripefs::fs {

// Whether a thread can serve `session` from its own ring here (the kernel makes the ring
// and clones /dev/fuse). When not, the caller runs libfuse's loop instead.
bool own_loop_possible(fuse_session* session);

// Returns 0 when the session ended (exited or unmounted), -1 when the loop could not start
// or reading the device failed (logged).
int run_fuse_loop(fuse_session* session, unsigned threads);

}  // namespace stripefs::fs
