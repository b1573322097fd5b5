// Which /dev/fuse descriptor a request is read from, and its reply written to. Each worker
// of the daemon's loop (fuse_loop.hpp) reads its own clone of the session's descriptor, and
// the kernel looks for a reply's request only among those read through the same one. The
// session's I/O hooks (tmpfile_op.cpp) ask here; a reply made later, maybe on another thread
// (a read answered from its completion), carries its worker's descriptor in a Reply scope.
#pragma once

namespace stripefs::fs::fuse_route {

// Makes this thread a worker reading `fd` (-1: none any more).
void set_worker(int fd);
// This thread's worker descriptor, -1 when it is not a worker: what a deferred reply keeps.
int current();
// The descriptor to read the next request from: this thread's worker's, else `session_fd`.
int read_fd(int session_fd);
// The descriptor for a reply made on this thread: an open Reply scope's, else this
// thread's worker's, else `session_fd`.
int reply_fd(int session_fd);

// Replies made on this thread while it lives go to `fd` (nothing changes for -1).
class Reply {
 public:
  explicit Reply(int fd);
  ~Reply();
  Reply(const Reply&) = delete;
  Reply& operator=(const Reply&) = delete;

 private:
  int previous_;
};

}  // namespace stripefs::fs::fuse_route
