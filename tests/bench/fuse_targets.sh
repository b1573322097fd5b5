# Sourced by the benchmarks that compare FUSE targets on one tmpfs (fs_bench.sh,
# smb_bench.sh): recording and undoing what they mount, start and attach, the tmpfs itself,
# and the targets stripefs (RAID5 of 4 file members) and libfuse's passthrough_ll.
#
# The caller defines log and die, and sets: work (the tmpfs mount point), tmpfs_mib,
# build_dir, member_mib, stripefs_opts (may be empty), and may set members_mode=loop (the
# members are then loop devices over the tmpfs files; default: the files themselves). mount_work mounts the tmpfs; every
# mount, daemon and loop device is undone at exit (cleanup), or by teardown MNT DIR.

# ---- cleanup: everything the script mounts or attaches is recorded here ---------------
mounts=()   # mount points, unmounted in reverse order
loops=()    # loop devices
shared_loops=() # loop devices every target of a run formats in turn (make_shared_loops)
shared_files=() # their backing files
pids=()     # foreground FUSE daemons we started
work_created=0
work_mounted=0

unmount_one() {
  local m=$1 i
  mountpoint -q "$m" 2>/dev/null || return 0
  for i in 1 2 3 4 5; do
    umount "$m" 2>/dev/null && return 0
    sleep 0.5
  done
  log "umount $m failed; detaching it lazily"
  umount -l "$m" 2>/dev/null || true
}

detach_loops() {
  local d
  for d in "${loops[@]}"; do
    losetup -d "$d" 2>/dev/null || log "losetup -d $d failed"
  done
  loops=()
}

stop_pids() {
  local p i
  for p in "${pids[@]}"; do
    kill -0 "$p" 2>/dev/null || continue
    for i in 1 2 3 4 5 6 7 8 9 10; do
      kill -0 "$p" 2>/dev/null || break
      sleep 0.2
    done
    kill -0 "$p" 2>/dev/null && kill "$p" 2>/dev/null
  done
  pids=()
}

cleanup() {
  local rc=$? i
  trap - EXIT INT TERM HUP
  set +e
  for ((i = ${#mounts[@]} - 1; i >= 0; i--)); do unmount_one "${mounts[i]}"; done
  mounts=()
  stop_pids
  detach_loops
  loops=("${shared_loops[@]}")
  shared_loops=()
  detach_loops
  if [ "$work_mounted" = 1 ]; then
    umount "$work" 2>/dev/null || umount -l "$work" 2>/dev/null
  fi
  [ "$work_created" = 1 ] && rmdir "$work" 2>/dev/null
  exit "$rc"
}
trap cleanup EXIT
trap 'exit 130' INT
trap 'exit 143' TERM
trap 'exit 129' HUP

# ---- the tmpfs ----------------------------------------------------------------------------
mount_work() {
  if [ ! -d "$work" ]; then
    mkdir -p "$work"
    work_created=1
  fi
  mountpoint -q "$work" && die "$work is already a mount point (a previous run?); unmount it first"
  mount -t tmpfs -o "size=${tmpfs_mib}m,mode=0755" stripefs-fs-bench "$work"
  work_mounted=1
  mkdir -p "$work/bin" "$work/mnt"
}

# ---- targets ---------------------------------------------------------------------------------
drop_caches() {
  sync
  echo 3 >/proc/sys/vm/drop_caches
}


# ---- targets: setup_X MNT RUN prints nothing and mounts the target at MNT --------------------
# make_shared_loops: four loop devices over files of member_mib in $work/loops (direct I/O
# off, losetup's default), which every target that runs on loop devices formats in turn:
# the same disks for all. Detached at exit.
make_shared_loops() {
  local m dev
  mkdir -p "$work/loops"
  for m in 0 1 2 3; do
    if ! truncate -s "${member_mib}M" "$work/loops/m$m" ||
      ! dev=$(losetup -f --show --direct-io=off "$work/loops/m$m"); then
      # All four or none: the next target would otherwise attach the same files again.
      local saved=("${loops[@]}")
      loops=("${shared_loops[@]}")
      detach_loops
      loops=("${saved[@]}")
      shared_loops=()
      shared_files=()
      return 1
    fi
    shared_loops+=("$dev")
    shared_files+=("$work/loops/m$m")
  done
}

# wipe_shared_loops: a fresh disk for the next target: every block of the shared loop
# devices reads as zeros again (their tmpfs pages freed), and their page cache is dropped.
wipe_shared_loops() {
  local i
  # A daemon unmounted a moment ago may still be writing its last superblocks: wait until
  # nobody holds the devices exclusively (as stripefs and btrfs do), up to 30 s.
  python3 - "${shared_loops[@]}" <<'EOF' || return 1
import errno, os, sys, time
deadline = time.monotonic() + 30
for dev in sys.argv[1:]:
    while True:
        try:
            os.close(os.open(dev, os.O_RDONLY | os.O_EXCL))
            break
        except OSError as e:
            if e.errno != errno.EBUSY or time.monotonic() > deadline:
                sys.exit("%s: still in use: %s" % (dev, e.strerror))
            time.sleep(0.05)
EOF
  for i in "${!shared_loops[@]}"; do
    blockdev --flushbufs "${shared_loops[i]}" || return 1
    fallocate --punch-hole --offset 0 --length $((member_mib * 1024 * 1024)) \
      "${shared_files[i]}" || return 1
    blockdev --flushbufs "${shared_loops[i]}" || return 1
  done
}

# make_members DIR: the four members of a stripefs target, left in member_paths: files of
# member_mib in DIR, or with members_mode=loop the shared loop devices, wiped.
member_paths=()
make_members() {
  local dir=$1 m
  member_paths=()
  if [ "${members_mode:-files}" = loop ]; then
    [ ${#shared_loops[@]} = 4 ] || make_shared_loops || return 1
    wipe_shared_loops || return 1
    member_paths=("${shared_loops[@]}")
    return 0
  fi
  for m in 0 1 2 3; do
    truncate -s "${member_mib}M" "$dir/m$m" || return 1
    member_paths+=("$dir/m$m")
  done
}

# stripefs: RAID5 of the 4 members (files, or loop devices with members_mode=loop),
# mkfs.stripefs (with $3..., mkfs options), the daemon mounts and daemonizes.
setup_stripefs() {
  local mnt=$1 dir=$2
  shift 2
  make_members "$dir" || return 1
  "$build_dir/fs/mkfs.stripefs" -q -l 5 -n 4 "$@" "${member_paths[@]}" || return 1
  local joined
  joined=$(IFS=:; echo "${member_paths[*]}")
  mounts+=("$mnt")
  if [ -n "$stripefs_opts" ]; then
    "$build_dir/fs/stripefs" -o "$stripefs_opts" "$joined" "$mnt" || return 1
  else
    "$build_dir/fs/stripefs" "$joined" "$mnt" || return 1
  fi
  wait_mounted "$mnt"
}

# stripefs_nocsum: the same, without data checksums (filesystem format 1).
setup_stripefs_nocsum() { setup_stripefs "$1" "$2" --no-checksums; }

# stripefs_killpriv_v1: the same format, mounted with killpriv=v1 (beside --stripefs-opts).
setup_stripefs_killpriv_v1() {
  local stripefs_opts="${stripefs_opts:+$stripefs_opts,}killpriv=v1"
  setup_stripefs "$1" "$2"
}

# passthrough_ll, built from libfuse3-dev's example. Options: its defaults (cache=normal,
# i.e. the kernel page cache with 1 s attribute timeouts, no writeback cache), plus
# -o source=DIR so that it mirrors a directory in the tmpfs instead of "/". -f keeps it
# in the foreground so that the script knows its pid; it runs multi-threaded as usual.
passthrough_bin=""
build_passthrough() {
  local src f
  src=$(dpkg -L libfuse3-dev 2>/dev/null | grep -E '/passthrough_ll\.c(\.gz)?$' | head -n1) || true
  [ -n "$src" ] || { log "passthrough_ll.c not found in libfuse3-dev"; return 1; }
  local exdir
  exdir=$(dirname "$src")
  mkdir -p "$work/bin/pt"
  for f in "$exdir"/passthrough_ll.c* "$exdir"/passthrough_helpers.h*; do
    [ -e "$f" ] || continue
    case "$f" in
      *.gz) zcat "$f" >"$work/bin/pt/$(basename "$f" .gz)" ;;
      *) cp "$f" "$work/bin/pt/" ;;
    esac
  done
  # shellcheck disable=SC2046 # pkg-config's flags are meant to be split
  gcc -O2 -Wall -o "$work/bin/passthrough_ll" "$work/bin/pt/passthrough_ll.c" \
    $(pkg-config --cflags --libs fuse3) -lpthread || return 1
  passthrough_bin="$work/bin/passthrough_ll"
}

# setup_passthrough MNT DIR [OPTION,...]: the options go to passthrough_ll's -o after source=.
setup_passthrough() {
  local mnt=$1 dir=$2 extra=${3:+,$3}
  mkdir -p "$dir/source" || return 1
  mounts+=("$mnt")
  # passthrough_ll (3.14) keeps an O_PATH descriptor open for every inode the kernel
  # knows, so give it the hard limit on open files.
  (
    ulimit -n "$(ulimit -Hn)"
    exec "$passthrough_bin" -f -o "source=$dir/source$extra" "$mnt" >"$dir/passthrough_ll.log" 2>&1
  ) &
  pids+=("$!")
  wait_mounted "$mnt" "$!"
}

# wait_mounted MNT [PID]: up to 20 s for MNT to become a mount point.
wait_mounted() {
  local mnt=$1 pid=${2:-} i
  for ((i = 0; i < 100; i++)); do
    mountpoint -q "$mnt" && return 0
    if [ -n "$pid" ] && ! kill -0 "$pid" 2>/dev/null; then break; fi
    sleep 0.2
  done
  log "$mnt did not become a mount point"
  return 1
}

teardown() {
  local mnt=$1 dir=$2 i
  for ((i = ${#mounts[@]} - 1; i >= 0; i--)); do unmount_one "${mounts[i]}"; done
  mounts=()
  stop_pids
  detach_loops
  rm -rf "$dir"
  rmdir "$mnt" 2>/dev/null || true
}
