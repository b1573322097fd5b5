# Sourced by every test of tests/check (". "$CHECK_COMMON""). The runner gives a test:
#   TEST_DIR      the mounted stripefs (fresh for this test)
#   TEST_SOURCE   its members, as the mount takes them (a:b:c)
#   TEST_MOUNT_OPTIONS  the -o options it was mounted with
#   TEST_LEVEL    RAID level, TEST_MEMBERS member count
#   TEST_TMP      a scratch directory outside the filesystem
#   STRIPEFS_BUILD  the build tree (fs/stripefs, fs/fsck.stripefs, fs/stripefsctl)
# A test prints what its NNN.out expects (no numbers that depend on the level or the
# machine), exits 0 when it passes, non-zero when it fails (the last line of stderr is the
# reason), and 77 through _notrun when it cannot run here.
set -euo pipefail

# Cannot run here: says why (a missing tool, a level it does not apply to).
_notrun() {
  echo "$*" >"$TEST_TMP/notrun"
  exit 77
}

# CHECK_WHERE, when set, says where in a long test (a cycle, its seed) it failed.
_fail() {
  echo "${CHECK_WHERE:+$CHECK_WHERE: }$*" >&2
  exit 1
}

_require_command() { # command package
  command -v "$1" >/dev/null || _notrun "$1 is not installed (Debian package $2)"
}

# Runs a command that must fail, and prints its error message without the command's own
# prefix: "cmd: path: No such file or directory" -> "No such file or directory".
_expect_error() {
  local out
  if out=$("$@" 2>&1); then
    _fail "expected to fail, succeeded: $*"
  fi
  echo "${out##*: }"
}

# Mounts SOURCE (default TEST_SOURCE) on TEST_DIR with the daemon. A daemon that was just
# unmounted may still be finishing: the mount waits for it to let go of the members.
_mount() { # [source]
  local source=${1:-$TEST_SOURCE} i
  for i in $(seq 1 100); do
    if "$STRIPEFS_BUILD/fs/stripefs" -o "$TEST_MOUNT_OPTIONS" "$source" "$TEST_DIR" \
      2>"$TEST_TMP/mount.err"; then
      return 0
    fi
    grep -q "in use by another stripefs process" "$TEST_TMP/mount.err" ||
      _fail "mount: $(head -1 "$TEST_TMP/mount.err")"
    sleep 0.2
  done
  _fail "mount: the old daemon never let go of the members"
}

# Unmounts and mounts the filesystem again (what a reboot would, short of a crash).
_remount() {
  umount "$TEST_DIR"
  _mount
}

# fsck.stripefs -n -f --parity on the unmounted TEST_SOURCE, once the daemon has let go of
# the members; fails the test with fsck's first complaint.
_fsck() {
  local i
  for i in $(seq 1 100); do
    if "$STRIPEFS_BUILD/fs/fsck.stripefs" -n -f --parity "$TEST_SOURCE" >"$TEST_TMP/fsck.log" 2>&1; then
      return 0
    fi
    grep -q "in use by another stripefs process" "$TEST_TMP/fsck.log" ||
      _fail "fsck.stripefs: $(grep -v '^$' "$TEST_TMP/fsck.log" | grep -v '^Pass\|^fsck.stripefs' | head -1)"
    sleep 0.2
  done
  _fail "fsck.stripefs: the daemon never let go of the members"
}

# The md5 of a file's contents, without its name.
_md5() { md5sum <"$1" | cut -d' ' -f1; }

# Runs Python statements that must raise OSError, and prints strerror of its errno (the
# system call's own answer, where a command-line tool would add checks of its own).
_expect_oserror() { # python-statements
  python3 -c "import os, sys
try:
    $1
except OSError as e:
    print(os.strerror(e.errno))
    sys.exit(0)
sys.exit(1)" || _fail "expected an OSError, none raised: $1"
}

# The data-integrity exerciser (tests/check/fsx.cpp), with the seed CHECK_FSX_SEED when set.
# Its summary reads "N operations" whatever the count, so expected outputs hold at any scale.
_fsx() {
  local seed=() args=() pct=${CHECK_FSX_PERCENT:-100}
  [ -z "${CHECK_FSX_SEED:-}" ] || seed=(-S "$CHECK_FSX_SEED")
  # CHECK_FSX_PERCENT scales every -N (the sanitizer build runs fewer operations).
  while [ $# -gt 0 ]; do
    if [ "$1" = -N ] && [ $# -gt 1 ]; then
      args+=(-N "$(($2 * pct / 100 > 0 ? $2 * pct / 100 : 1))")
      shift 2
    else
      args+=("$1")
      shift
    fi
  done
  "$STRIPEFS_BUILD/tests/check/stripefs-fsx" "${seed[@]}" "${args[@]}" |
    sed "s/[0-9]* operations/N operations/"
}
