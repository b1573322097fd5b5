// FUSE_HANDLE_KILLPRIV_V2 with libfuse 3.14 (Debian 12's), which can neither negotiate it
// nor pass on the flags that come with it. Without it the kernel asks for a file's
// security.capability attribute before every write (a GETXATTR round trip each) and takes
// privileges away through SETATTR and REMOVEXATTR. With it the kernel marks the superblock
// SB_NOSEC, asks once per file, and leaves the stripping to the filesystem: set-user-ID and
// set-group-ID on a write, truncate or chown (the kernel says when: FUSE_WRITE_KILL_SUIDGID,
// FATTR_KILL_SUIDGID), and security.capability on every one of them (Filesystem::kill_privs).
// (It still removes capabilities itself when it does look, after they were set; the
// daemon's removal covers the writes it no longer looks before.)
//
// The session's I/O hooks (tmpfile_op.cpp) show every request to note_request before libfuse
// handles it on the same thread, and every reply to amend_reply before it is written: the
// INIT reply gains the flag when the kernel offered it. A libfuse that knows
// FUSE_CAP_HANDLE_KILLPRIV_V2 and passes the flags on makes this file go.
#pragma once

#include <sys/uio.h>

#include <cstddef>
#include <cstdint>

namespace stripefs::fs::killpriv {

// Whether to ask for it at the next INIT (on by default; killpriv=v1 turns it off).
void set_wanted(bool wanted);

// A request just read, before libfuse handles it on this thread.
void note_request(const void* buf, size_t size);
// A reply about to be written: INIT's gains FUSE_HANDLE_KILLPRIV_V2 (iov[1] then points at a
// copy owned by this thread, valid until its next call).
void amend_reply(iovec* iov, int count);

// The connection runs with it: the daemon strips what the kernel would have.
bool negotiated();
// The request this thread handles asks for set-id bits to go: a WRITE with
// FUSE_WRITE_KILL_SUIDGID, a SETATTR with FATTR_KILL_SUIDGID (the caller lacks CAP_FSETID).
bool request_kills_suidgid();
// GETXATTR requests for security.capability since the process started.
uint64_t capability_queries();

}  // namespace stripefs::fs::killpriv
