// O_TMPFILE for libfuse 3.14 (Debian 12's), which has no tmpfile operation: it answers the
// kernel's FUSE_TMPFILE (protocol 7.37) with ENOSYS, and open(O_TMPFILE) then fails with
// EOPNOTSUPP. The session's reads from /dev/fuse go through a hook (fuse_session_custom_io,
// on the descriptor fuse_session_mount opened, and through it on every worker's clone) that
// answers FUSE_TMPFILE itself, as the create operation would, and hands every other request
// to libfuse (after killpriv_v2.hpp has seen it; the hook's writes show it every reply). A
// libfuse with its own tmpfile operation makes this file go.
#pragma once

#include "fs/daemon/fuse_ops.hpp"

namespace stripefs::fs {

// After fuse_session_mount, before the loop: `context` (the session's userdata) must outlive
// the session. Returns 0, or a negative errno from libfuse.
int install_tmpfile_op(fuse_session* session);

}  // namespace stripefs::fs
