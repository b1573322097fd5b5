#!/usr/bin/python3
"""Two SMB clients at once through libsmbclient (python3-smbc), for tests/check's export tests.

    smbc_clients.py PORT SHARE PASSWORD DIR MOUNT

Each client is a libsmbclient context of its own (its own TCP connection and session, as
two machines would have). Both create a file in DIR on the share and keep it open while
they write it in turns, a piece each, so that the writes interleave on the server; each
file is then read back whole through the other client, and from the mount (MOUNT, the
share's path) directly. Then one client renames its file and the other lists DIR and
removes it. Prints what it checked, one line each; exits 1 with the failure on stderr.
"""
import os
import sys

import smbc

PIECE = 256 * 1024
PIECES = 64


def fail(message):
    sys.stderr.write("smbc_clients: %s\n" % message)
    sys.exit(1)


def client(password):
    def auth(server, share, workgroup, user, pw):
        return ("WORKGROUP", "root", password)

    return smbc.Context(auth_fn=auth)


def read_all(ctx, url):
    f = ctx.open(url, os.O_RDONLY)
    parts = []
    while True:
        chunk = f.read(1 << 20)
        if not chunk:
            break
        parts.append(chunk)
    f.close()
    return b"".join(parts)


def main():
    if len(sys.argv) != 6:
        fail("usage: smbc_clients.py PORT SHARE PASSWORD DIR MOUNT")
    port, share, password, directory, mount = sys.argv[1:]
    base = "smb://127.0.0.1:%s/%s/%s" % (port, share, directory)
    a, b = client(password), client(password)
    a.mkdir(base, 0o755)
    data = {name: os.urandom(PIECE * PIECES) for name in ("a", "b")}
    files = {"a": a.open(base + "/a", os.O_CREAT | os.O_WRONLY, 0o644),
             "b": b.open(base + "/b", os.O_CREAT | os.O_WRONLY, 0o644)}
    for i in range(PIECES):
        for name in ("a", "b"):  # in turns: both files are open and being written
            piece = data[name][i * PIECE:(i + 1) * PIECE]
            if files[name].write(piece) != len(piece):
                fail("client %s: short write of piece %d" % (name, i))
    for f in files.values():
        f.close()
    print("two clients wrote %d MiB each in turns" % (PIECE * PIECES >> 20))
    if read_all(b, base + "/a") != data["a"]:
        fail("client a's file read through client b differs")
    if read_all(a, base + "/b") != data["b"]:
        fail("client b's file read through client a differs")
    print("each file read back whole through the other client: same bytes")
    for name in ("a", "b"):
        with open(os.path.join(mount, directory, name), "rb") as f:
            if f.read() != data[name]:
                fail("client %s's file on the mount differs" % name)
    print("the mount holds both files' bytes")
    a.rename(base + "/a", base + "/renamed")
    names = sorted(e.name for e in b.opendir(base).getdents() if e.name not in (".", ".."))
    print("the other client lists: %s" % " ".join(names))
    b.unlink(base + "/renamed")
    names = sorted(e.name for e in a.opendir(base).getdents() if e.name not in (".", ".."))
    print("after its delete: %s" % " ".join(names))


if __name__ == "__main__":
    try:
        main()
    except (RuntimeError, OSError, ValueError) as e:  # pysmbc raises RuntimeError(errno, text)
        fail(str(e))
