#!/usr/bin/env bash
# fs_bench.sh: fio against stripefs (RAID5 of 4 file members), libfuse's passthrough_ll
# example and the kernel's btrfs RAID5 over 4 loop devices, all on one tmpfs that the
# script mounts itself. Prints "RESULT name value unit" lines (the median of --repeat
# runs) and the ratios for the goals, then a short table. stripefs_nocsum is stripefs made
# with --no-checksums: stripefs against it is the price of data checksums.
#
#   bash tests/bench/fs_bench.sh [--build-dir DIR] [--work DIR] [--size SIZE]
#        [--runtime SEC] [--repeat N]
#        [--only stripefs|stripefs_nocsum|passthrough|btrfs ...]
#        [--files N] [--stripefs-opts OPTS] [--ioengine libaio|io_uring] [--direct auto|0]
#
# Run as root (tmpfs, loop devices, btrfs, drop_caches). Installs fio and btrfs-progs
# with apt-get when they are missing, and says so.
#
# Fairness: every target keeps its member files (or its source directory) on the same
# tmpfs, and every target gets the same fio jobs:
#   seqwrite   1 MiB blocks, buffered (psync), one file of --size, end_fsync=1
#   seqread    1 MiB blocks, buffered (psync), the same file, after sync + drop_caches
#   randwrite  4 KiB, libaio iodepth 16, direct=1, --runtime seconds over that file
#   randread   4 KiB, libaio iodepth 16, direct=1, --runtime seconds, after an fsync of
#              the file (the random writes durable) and drop_caches
#   filecreate --files (default 10000) empty files created in one new directory, timed
#              in Python (fio's filecreate engine is quadratic in the number of files)
# Sequential tests are buffered on every target (readahead and the kernel's write path
# are part of what a user gets); random tests use O_DIRECT on every target so that the
# page cache does not absorb them. A target that refuses O_DIRECT (probed with a real
# O_DIRECT open, write and read of 4 KiB) falls back to buffered I/O with end_fsync=1
# for its random tests; the script says so, because its random figures are then not
# comparable. --direct 0 makes the random tests buffered on every target.
# drop_caches drops the page cache of the mounted filesystem (FUSE or btrfs) and of the
# loop devices; the tmpfs under every target cannot be dropped, which is the same for all.
# Each repeat formats and mounts a fresh filesystem.

# shellcheck disable=SC2317 # cleanup and setup_* are called through trap and "setup_$target"
set -euo pipefail

script_dir=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
repo=$(cd "$script_dir/../.." && pwd)

build_dir="$repo/build"
work=/dev/shm/stripefs-fs-bench
size_arg=1G
runtime=30
repeat=3
nfiles=10000
stripefs_opts=""
ioengine=libaio
direct_mode=auto
only=()

usage() {
  sed -n '2,14p' "${BASH_SOURCE[0]}" | sed 's/^# \{0,1\}//'
}

die() {
  echo "fs_bench: $*" >&2
  exit 1
}
log() { echo "fs_bench: $*" >&2; }

while [ $# -gt 0 ]; do
  case "$1" in
    --build-dir) build_dir=${2:?--build-dir needs a value}; shift 2 ;;
    --work) work=${2:?--work needs a value}; shift 2 ;;
    --size) size_arg=${2:?--size needs a value}; shift 2 ;;
    --runtime) runtime=${2:?--runtime needs a value}; shift 2 ;;
    --repeat) repeat=${2:?--repeat needs a value}; shift 2 ;;
    --files) nfiles=${2:?--files needs a value}; shift 2 ;;
    --stripefs-opts) stripefs_opts=${2?--stripefs-opts needs a value}; shift 2 ;;
    --ioengine) ioengine=${2:?--ioengine needs a value}; shift 2 ;;
    --direct) direct_mode=${2:?--direct needs a value}; shift 2 ;;
    --only)
      shift
      while [ $# -gt 0 ] && [ "${1#--}" = "$1" ]; do
        only+=("$1")
        shift
      done
      [ ${#only[@]} -gt 0 ] || die "--only needs at least one of stripefs stripefs_nocsum passthrough btrfs"
      ;;
    -h | --help) usage; exit 0 ;;
    *) die "unknown argument '$1' (see --help)" ;;
  esac
done

[ "$(id -u)" -eq 0 ] || die "run as root (it mounts tmpfs, btrfs and loop devices)"
[[ $runtime =~ ^[1-9][0-9]*$ ]] || die "--runtime must be a positive number of seconds"
[[ $repeat =~ ^[1-9][0-9]*$ ]] || die "--repeat must be a positive integer"
[[ $nfiles =~ ^[1-9][0-9]*$ ]] || die "--files must be a positive integer"
case "$ioengine" in libaio | io_uring) ;; *) die "--ioengine must be libaio or io_uring" ;; esac
case "$direct_mode" in auto | 0) ;; *) die "--direct must be auto or 0" ;; esac
[ ${#only[@]} -gt 0 ] || only=(stripefs passthrough btrfs)
for t in "${only[@]}"; do
  case "$t" in stripefs | stripefs_nocsum | passthrough | btrfs) ;;
    *) die "--only: unknown target '$t'" ;;
  esac
done
case "$work" in *:* | *,* | *' '*) die "--work must not contain ':', ',' or spaces" ;; esac
build_dir=$(realpath -m "$build_dir")
work=$(realpath -m "$work")

# --size accepts 256M, 1G, 1GiB, 512MB (binary units) or bytes.
size_bytes=$(numfmt --from=iec "$(sed -E 's/i?B$//' <<<"$size_arg")" 2>/dev/null) ||
  die "--size: cannot parse '$size_arg'"
mib=$((1024 * 1024))
size_bytes=$(((size_bytes + mib - 1) / mib * mib)) # whole MiB, so 1 MiB blocks fit
[ "$size_bytes" -ge $((16 * mib)) ] || die "--size must be at least 16M"
size_mib=$((size_bytes / mib))

# Members: RAID5 of 4 keeps 3 members' worth of data; leave room for the file, the
# created files and metadata. At least 1 GiB each, because mkfs.btrfs switches to mixed
# block groups on smaller devices, which would not be btrfs's usual layout.
member_mib=$((size_mib * 2 / 3 + 256))
[ "$member_mib" -ge 1024 ] || member_mib=1024
# Only one target is set up at a time; tmpfs allocates lazily, this is only a cap.
tmpfs_mib=$((4 * member_mib + size_mib + 512))

for t in "${only[@]}"; do
  if [ "$t" = passthrough ] && [ "$(ulimit -Hn)" != unlimited ] &&
    [ $((nfiles + 512)) -gt "$(ulimit -Hn)" ]; then
    log "WARNING: passthrough_ll needs one open file per created file; --files $nfiles is" \
      "close to the hard limit of $(ulimit -Hn) open files and may fail with EMFILE"
  fi
done

# ---- dependencies ---------------------------------------------------------------------
need_pkgs=()
command -v fio >/dev/null || need_pkgs+=(fio)
command -v python3 >/dev/null || need_pkgs+=(python3)  # parses fio's JSON, times file creation
for t in "${only[@]}"; do
  if [ "$t" = btrfs ] && ! command -v mkfs.btrfs >/dev/null; then need_pkgs+=(btrfs-progs); fi
  if [ "$t" = passthrough ] && ! pkg-config --exists fuse3 2>/dev/null; then
    need_pkgs+=(libfuse3-dev pkg-config gcc)
  fi
done
if [ ${#need_pkgs[@]} -gt 0 ]; then
  log "installing missing packages with apt-get: ${need_pkgs[*]}"
  export DEBIAN_FRONTEND=noninteractive
  apt-get update -qq
  apt-get install -y -qq --no-install-recommends "${need_pkgs[@]}" >/dev/null
fi
command -v fio >/dev/null || die "fio is missing after apt-get install"
engines=$(fio --enghelp 2>/dev/null || true)
grep -qw "$ioengine" <<<"$engines" || die "this fio has no $ioengine engine"
python=/usr/bin/python3
[ -x "$python" ] || python=python3

# shellcheck source=tests/bench/fuse_targets.sh
. "$script_dir/fuse_targets.sh"
mount_work

# ---- helpers ---------------------------------------------------------------------------------
# Prints 1 when O_DIRECT open, write and read of 4 KiB work in directory $1, else 0.
probe_direct() {
  "$python" - "$1/.odirect-probe" <<'EOF'
import mmap, os, sys
path = sys.argv[1]
ok = 0
try:
    fd = os.open(path, os.O_RDWR | os.O_CREAT | os.O_DIRECT, 0o644)
    try:
        buf = mmap.mmap(-1, 4096)  # page-aligned
        buf.write(b"\xa5" * 4096)
        if os.pwrite(fd, buf, 0) == 4096:
            back = mmap.mmap(-1, 4096)
            if os.preadv(fd, [back], 0) == 4096 and back[:] == buf[:]:
                ok = 1
    finally:
        os.close(fd)
    os.unlink(path)
except OSError:
    pass
print(ok)
EOF
}

# fio_value JSON FIELD: FIELD is write_bw, read_bw (MiB/s), write_iops or read_iops.
fio_value() {
  "$python" - "$1" "$2" <<'EOF'
import json, sys
with open(sys.argv[1]) as f:
    text = f.read()
doc = json.loads(text[text.index("{"):])  # fio may print notes before the JSON
job = doc["jobs"][0]
if job.get("error"):
    sys.exit("fio job error %s" % job["error"])
ddir, what = sys.argv[2].split("_")
d = job[ddir]
val = d["bw_bytes"] / 1048576.0 if what == "bw" else d["iops"]
if val <= 0:
    sys.exit("fio reported no %s" % sys.argv[2])
print("%.1f" % val)
EOF
}

# run_fio OUT_JSON FIO_ARGS...: runs one fio job quietly, keeps its JSON in OUT_JSON.
run_fio() {
  local out=$1
  shift
  if ! fio --output-format=json --output="$out" "$@" >"$out.log" 2>&1; then
    log "fio failed: fio $*"
    sed 's/^/  /' "$out.log" >&2
    return 1
  fi
}
# btrfs RAID5 (data and metadata) over 4 loop devices on tmpfs files; loop direct-io
# off (losetup's default), mkfs.btrfs and mount defaults.
setup_btrfs() {
  local mnt=$1 dir=$2 m dev devs=()
  for m in 0 1 2 3; do
    truncate -s "${member_mib}M" "$dir/m$m" || return 1
    dev=$(losetup -f --show --direct-io=off "$dir/m$m") || return 1
    loops+=("$dev")
    devs+=("$dev")
  done
  mkfs.btrfs -q -f -d raid5 -m raid5 "${devs[@]}" >"$dir/mkfs.log" 2>&1 ||
    { cat "$dir/mkfs.log" >&2; return 1; }
  local opts
  opts=$(printf 'device=%s,' "${devs[@]}")
  mounts+=("$mnt")
  mount -t btrfs -o "${opts%,}" "${devs[0]}" "$mnt" || return 1
}


# ---- one run of all tests on one target ----------------------------------------------------
declare -A vals=()   # "target_test" -> space-separated values over the repeats
declare -A mode=()   # "target" -> how the random tests ran
tests=(seqwrite seqread randwrite randread filecreate)
declare -A unit=([seqwrite]=MiB/s [seqread]=MiB/s [randwrite]=IOPS [randread]=IOPS [filecreate]=files/s)

record() { vals[$1_$2]="${vals[$1_$2]:-}${vals[$1_$2]:+ }$3"; }

# run_tests TARGET MNT RUN_DIR: returns 1 at the first failing test.
run_tests() {
  local target=$1 mnt=$2 dir=$3 out v direct=1 rand_extra=()
  local common=(--filename="$mnt/bench.dat" --size="$size_bytes" --randrepeat=0)
  if [ "$direct_mode" = 0 ]; then
    direct=0
  elif [ "$(probe_direct "$mnt")" != 1 ]; then
    direct=0
    log "WARNING: $target refuses O_DIRECT; its random tests run buffered with end_fsync=1 and are not comparable"
  fi
  if [ "$direct" = 0 ]; then rand_extra=(--end_fsync=1); fi
  mode[$target]="direct=$direct"

  out="$dir/seqwrite.json"
  run_fio "$out" --name=seqwrite "${common[@]}" --rw=write --bs=1M --ioengine=psync \
    --direct=0 --end_fsync=1 || return 1
  v=$(fio_value "$out" write_bw) || return 1
  record "$target" seqwrite "$v"

  drop_caches
  out="$dir/seqread.json"
  run_fio "$out" --name=seqread "${common[@]}" --rw=read --bs=1M --ioengine=psync \
    --direct=0 || return 1
  v=$(fio_value "$out" read_bw) || return 1
  record "$target" seqread "$v"

  out="$dir/randwrite.json"
  run_fio "$out" --name=randwrite "${common[@]}" --rw=randwrite --bs=4k \
    --ioengine="$ioengine" --iodepth=16 --direct="$direct" "${rand_extra[@]}" \
    --time_based --runtime="$runtime" || return 1
  v=$(fio_value "$out" write_iops) || return 1
  record "$target" randwrite "$v"

  # The random writes are made durable first (fsync of the file, on every target): a
  # filesystem that still writes them back would otherwise pay for that during the reads,
  # since sync(1) does not reach a FUSE daemon's own cache.
  sync "$mnt/bench.dat" || return 1
  drop_caches
  out="$dir/randread.json"
  run_fio "$out" --name=randread "${common[@]}" --rw=randread --bs=4k \
    --ioengine="$ioengine" --iodepth=16 --direct="$direct" \
    --time_based --runtime="$runtime" || return 1
  v=$(fio_value "$out" read_iops) || return 1
  record "$target" randread "$v"

  # File creation: open(O_CREAT|O_EXCL) and close of empty files in one new directory,
  # timed in Python. fio's filecreate engine is not used: it scans its whole file list
  # for every file, so it measures fio itself (about 2,600 files/s for 20,000 files on
  # bare tmpfs here, against 440,000 files/s for this loop).
  mkdir "$mnt/fc" || return 1
  v=$("$python" - "$mnt/fc" "$nfiles" <<'EOF'
import os, sys, time
d, n = sys.argv[1], int(sys.argv[2])
t = time.perf_counter()
for i in range(n):
    os.close(os.open("%s/f.%d" % (d, i), os.O_CREAT | os.O_EXCL | os.O_WRONLY, 0o600))
print("%.1f" % (n / (time.perf_counter() - t)))
EOF
  ) || return 1
  record "$target" filecreate "$v"
}

# ---- main loop --------------------------------------------------------------------------------
declare -A status=() # target -> ok | skipped: why | failed: why
have_stripefs=0
if [ -x "$build_dir/fs/mkfs.stripefs" ] && [ -x "$build_dir/fs/stripefs" ]; then have_stripefs=1; fi

log "work $work (tmpfs ${tmpfs_mib} MiB), file ${size_mib} MiB, members 4 x ${member_mib} MiB," \
  "runtime ${runtime} s, repeat ${repeat}, ${nfiles} files, $ioengine, $(fio --version)"

for target in "${only[@]}"; do
  [ -z "${status[$target]:-}" ] || continue # listed twice
  case "$target" in
    stripefs | stripefs_nocsum)
      if [ "$have_stripefs" = 0 ]; then
        status[$target]="skipped: $build_dir/fs/mkfs.stripefs or $build_dir/fs/stripefs not built"
        log "stripefs SKIPPED: ${status[$target]#skipped: }"
        continue
      fi
      ;;
    passthrough)
      if ! build_passthrough; then
        status[$target]="failed: could not build passthrough_ll"
        log "passthrough FAILED: ${status[$target]#failed: }"
        continue
      fi
      ;;
  esac
  status[$target]=ok
  for ((r = 1; r <= repeat; r++)); do
    log "$target: run $r of $repeat"
    mnt="$work/mnt/$target"
    dir="$work/$target"
    mkdir -p "$mnt" "$dir"
    if ! "setup_$target" "$mnt" "$dir"; then
      status[$target]="failed: mount (run $r)"
    elif ! run_tests "$target" "$mnt" "$dir"; then
      status[$target]="failed: a test failed (run $r)"
    fi
    teardown "$mnt" "$dir"
    if [ "${status[$target]}" != ok ]; then
      log "$target FAILED: ${status[$target]#failed: }"
      break
    fi
  done
done

# ---- results ----------------------------------------------------------------------------------
median() { tr ' ' '\n' <<<"$1" | sort -g | awk '{v[NR] = $1} END {
  if (NR % 2) printf "%.1f", v[(NR + 1) / 2]; else printf "%.1f", (v[NR / 2] + v[NR / 2 + 1]) / 2 }'; }

declare -A med=()
echo
targets=(stripefs stripefs_nocsum passthrough btrfs)
for target in "${targets[@]}"; do
  [ "${status[$target]:-}" = ok ] || continue
  for t in "${tests[@]}"; do
    [ -n "${vals[${target}_$t]:-}" ] || continue
    med[${target}_$t]=$(median "${vals[${target}_$t]}")
    echo "RESULT ${target}_$t ${med[${target}_$t]} ${unit[$t]}"
  done
done

# ratio TEST BASELINE: stripefs over the baseline.
declare -A ratios=()
ratio_names=()
ratio() {
  local a=${med[stripefs_$1]:-} b=${med[$2_$1]:-}
  ratio_names+=("$1_vs_$2")
  [ -n "$a" ] && [ -n "$b" ] || return 0
  ratios[$1_vs_$2]=$(awk -v a="$a" -v b="$b" 'BEGIN { printf "%.2f", a / b }')
  echo "RESULT ratio_$1_vs_$2 ${ratios[$1_vs_$2]} x"
}
ratio seqwrite passthrough
ratio seqread btrfs
ratio randwrite btrfs
ratio randread passthrough
ratio filecreate passthrough
ratio filecreate btrfs
if [ "${status[stripefs_nocsum]:-}" = ok ]; then
  for t in "${tests[@]}"; do ratio "$t" stripefs_nocsum; done
fi

# The table.
echo
shown=()
for target in "${targets[@]}"; do
  [ "$target" = stripefs_nocsum ] && [ -z "${status[$target]:-}" ] && continue
  shown+=("$target")
done
printf '%-11s %-8s' test unit
for target in "${shown[@]}"; do printf ' %15s' "$target"; done
echo
for t in "${tests[@]}"; do
  printf '%-11s %-8s' "$t" "${unit[$t]}"
  for target in "${shown[@]}"; do printf ' %15s' "${med[${target}_$t]:--}"; done
  echo
done
printf '%-20s' "random I/O"
for target in "${shown[@]}"; do printf ' %15s' "${mode[$target]:--}"; done
echo
echo
# Goals: at least this ratio. Checksums may cost 5% of sequential and 10% of random I/O.
declare -A goal=([seqwrite_vs_passthrough]=1.0 [seqread_vs_btrfs]=1.0 [randwrite_vs_btrfs]=1.0
  [randread_vs_passthrough]=1.0 [seqwrite_vs_stripefs_nocsum]=0.95
  [seqread_vs_stripefs_nocsum]=0.95 [randwrite_vs_stripefs_nocsum]=0.90
  [randread_vs_stripefs_nocsum]=0.90)
for n in "${ratio_names[@]}"; do
  if [ -n "${ratios[$n]:-}" ]; then
    verdict=""
    if [ -n "${goal[$n]:-}" ]; then
      if awk -v r="${ratios[$n]}" -v g="${goal[$n]}" 'BEGIN { exit !(r >= g) }'; then
        verdict="goal >= ${goal[$n]}x: met"
      else
        verdict="goal >= ${goal[$n]}x: NOT met"
      fi
    fi
    printf 'stripefs %-28s %6sx%s\n' "${n/_vs_/ vs }" "${ratios[$n]}" "${verdict:+  $verdict}"
  else
    printf 'stripefs %-28s %7s\n' "${n/_vs_/ vs }" "n/a"
  fi
done
echo
for target in "${only[@]}"; do
  if [ -n "${status[$target]:-}" ]; then echo "$target: ${status[$target]}"; fi
done | awk '!seen[$0]++'

# Fail when a target that was asked for and could run failed.
for target in "${only[@]}"; do
  case "${status[$target]:-}" in failed*) exit 1 ;; esac
done
exit 0
