#include "fs/daemon/tmpfile_op.hpp"

#include <fcntl.h>
#include <linux/fuse.h>
#include <sys/uio.h>
#include <unistd.h>

#include <cerrno>
#include <cmath>
#include <cstring>

#include "fs/core/fs_log.hpp"
#include "fs/daemon/fuse_route.hpp"
#include "fs/daemon/killpriv_v2.hpp"

namespace stripefs::fs {

namespace {

// The kernel's header gives the wire format; libfuse 3.14's own copy speaks 7.38, whose
// structures these are.
static_assert(sizeof(fuse_in_header) == 40 && sizeof(fuse_out_header) == 16);
static_assert(sizeof(fuse_create_in) == 16 && sizeof(fuse_entry_out) == 128 &&
              sizeof(fuse_open_out) == 16);

void set_timeout(double seconds, uint64_t& sec, uint32_t& nsec) {
  const double whole = std::floor(seconds);
  sec = static_cast<uint64_t>(whole);
  nsec = static_cast<uint32_t>((seconds - whole) * 1e9);
}

fuse_attr wire_attr(const Attr& a) {
  fuse_attr w{};
  w.ino = a.ino;
  w.size = a.size;
  w.blocks = a.blocks512;
  w.atime = static_cast<uint64_t>(a.atime.sec);
  w.mtime = static_cast<uint64_t>(a.mtime.sec);
  w.ctime = static_cast<uint64_t>(a.ctime.sec);
  w.atimensec = a.atime.nsec;
  w.mtimensec = a.mtime.nsec;
  w.ctimensec = a.ctime.nsec;
  w.mode = a.mode;
  w.nlink = a.nlink;
  w.uid = a.uid;
  w.gid = a.gid;
  w.rdev = static_cast<uint32_t>(a.rdev);
  w.blksize = kBlockSize;
  return w;
}

// One reply: the header and, on success, `body`. False when the kernel took none (the
// request was interrupted, or the connection went).
bool send_reply(int fd, uint64_t unique, int error, const void* body, size_t size) {
  fuse_out_header out{};
  out.len = static_cast<uint32_t>(sizeof(out) + (error == 0 ? size : 0));
  out.error = -error;
  out.unique = unique;
  iovec iov[2] = {{&out, sizeof(out)}, {const_cast<void*>(body), size}};
  const ssize_t n = ::writev(fd, iov, error == 0 ? 2 : 1);
  return n == static_cast<ssize_t>(out.len);
}

// FUSE_TMPFILE: made and opened as op_create makes and opens a file, replied as create is
// (an entry and an open file).
void answer_tmpfile(int fd, const fuse_in_header& in, const fuse_create_in& arg, FuseContext& ctx) {
  Filesystem& fs = *ctx.fs;
  const Caller caller{in.uid, in.gid, arg.umask};
  auto made = fs.tmpfile(in.nodeid, arg.mode, caller);
  if (!made) {
    const int code = made.error().code;
    if (code == EIO || code == EUCLEAN) fs_log().warn("{}", made.error().message);
    (void)send_reply(fd, in.unique, code == EUCLEAN ? EIO : code, nullptr, 0);  // as reply_error
    return;
  }
  if (auto opened = fs.open(made->ino); !opened) {
    fs.forget(made->ino, 1);
    (void)send_reply(fd, in.unique, opened.error().code, nullptr, 0);
    return;
  }
  struct {
    fuse_entry_out entry;
    fuse_open_out open;
  } reply{};
  reply.entry.nodeid = made->ino;
  reply.entry.generation = made->generation;
  set_timeout(ctx.attr_timeout, reply.entry.entry_valid, reply.entry.entry_valid_nsec);
  set_timeout(ctx.attr_timeout, reply.entry.attr_valid, reply.entry.attr_valid_nsec);
  reply.entry.attr = wire_attr(*made);
  if (ctx.direct_io) reply.open.open_flags = FOPEN_DIRECT_IO;
  static_assert(sizeof(reply) == sizeof(fuse_entry_out) + sizeof(fuse_open_out));
  if (!send_reply(fd, in.unique, 0, &reply, sizeof(reply))) {
    fs.release(made->ino);  // the kernel has neither the file nor the lookup
    fs.forget(made->ino, 1);
  }
}

// A request just read: FUSE_TMPFILE is answered here (true); any other is libfuse's.
// Apart from read_request so that the frame blocked in read(2) holds no locals: libfuse
// ends its workers with pthread_cancel there, and a sanitizer build would keep the poisoned
// redzones of such locals on a stack the thread's exit then runs on (a false report).
[[gnu::noinline]] bool answered_here(int fd, const void* buf, size_t n, void* userdata) {
  fuse_in_header in;
  std::memcpy(&in, buf, sizeof(in));
  if (in.opcode != FUSE_TMPFILE) return false;
  if (n < sizeof(in) + sizeof(fuse_create_in)) {
    (void)send_reply(fd, in.unique, EINVAL, nullptr, 0);
    return true;
  }
  fuse_create_in arg;
  std::memcpy(&arg, static_cast<const char*>(buf) + sizeof(in), sizeof(arg));
  answer_tmpfile(fd, in, arg, *static_cast<FuseContext*>(userdata));
  return true;
}

// The session's read: the next request that is not FUSE_TMPFILE, answering those on the way.
// A worker of the daemon's loop reads its own descriptor (fuse_route.hpp).
ssize_t read_request(int session_fd, void* buf, size_t len, void* userdata) {
  const int fd = fuse_route::read_fd(session_fd);
  for (;;) {
    const ssize_t n = ::read(fd, buf, len);
    if (n < static_cast<ssize_t>(sizeof(fuse_in_header))) return n;
    if (!answered_here(fd, buf, static_cast<size_t>(n), userdata)) {
      killpriv::note_request(buf, static_cast<size_t>(n));
      return n;
    }
  }
}

ssize_t write_reply(int session_fd, iovec* iov, int count, void*) {
  killpriv::amend_reply(iov, count);
  return ::writev(fuse_route::reply_fd(session_fd), iov, count);
}

// Replies are spliced to the device as before the hook (a custom io without it would make
// libfuse copy a reply of several buffers into one first).
ssize_t splice_reply(int fdin, off_t* offin, int session_fd, off_t* offout, size_t len,
                     unsigned flags, void*) {
  return ::splice(fdin, offin, fuse_route::reply_fd(session_fd), offout, len, flags);
}

}  // namespace

int install_tmpfile_op(fuse_session* session) {
  static const fuse_custom_io io = {write_reply, read_request, nullptr, splice_reply};
  return fuse_session_custom_io(session, &io, fuse_session_fd(session));
}

}  // namespace stripefs::fs
