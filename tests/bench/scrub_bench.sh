#!/usr/bin/env bash
# scrub_bench.sh: a mounted filesystem's scrub against every member read at once, on member
# files on tmpfs (which the daemon drives inline). Prints "RESULT name value unit" lines,
# medians of --repeat passes:
#   scrub_mounted.read_all        every member file read at once, a dd per member, 1 MiB
#                                 blocks (MiB/s, all members together)
#   scrub_mounted.scrub           member bytes read per second by `stripefsctl scrub start`
#                                 (check only, no speed limit), timed from the daemon's
#                                 "scrub started" to its "scrub finished" log line
#   scrub_mounted.scrub_vs_read_all  the two medians' ratio (issue 13's goal: >= 0.8)
#
#   bash tests/bench/scrub_bench.sh [--build-dir DIR] [--work DIR] [--level L]
#        [--size SIZE] [--chunk SIZE] [--fill MIB] [--repeat N] [--no-checksums]
#
# One array per run: --level (default 5) over four member files of --size (default 1G) in
# --work (default /dev/shm/stripefs-scrub-bench, which must be on tmpfs), chunks of
# --chunk (default 64K), with one file of --fill MiB (default 2400) of random bytes, so
# that the scrub checks file data against its checksums (none with --no-checksums).
# Run as root (a FUSE mount).
set -euo pipefail

script_dir=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
repo=$(cd "$script_dir/../.." && pwd)
build_dir="$repo/build"
work=/dev/shm/stripefs-scrub-bench
level=5
size=1G
chunk=64K
fill=2400
repeat=5
mkfs_opts=()

usage() { sed -n '2,20p' "${BASH_SOURCE[0]}" | sed 's/^# \{0,1\}//'; }
die() {
  echo "scrub_bench: $*" >&2
  exit 1
}

while [ $# -gt 0 ]; do
  case "$1" in
    --build-dir) build_dir=${2:?--build-dir needs a value}; shift 2 ;;
    --work) work=${2:?--work needs a value}; shift 2 ;;
    --level) level=${2:?--level needs a value}; shift 2 ;;
    --size) size=${2:?--size needs a value}; shift 2 ;;
    --chunk) chunk=${2:?--chunk needs a value}; shift 2 ;;
    --fill) fill=${2:?--fill needs a value}; shift 2 ;;
    --repeat) repeat=${2:?--repeat needs a value}; shift 2 ;;
    --no-checksums) mkfs_opts+=(--no-checksums); shift ;;
    -h | --help) usage; exit 0 ;;
    *) die "unknown argument: $1 (see --help)" ;;
  esac
done
[[ "$repeat" =~ ^[1-9][0-9]*$ ]] || die "--repeat $repeat: a positive whole number"
[[ "$fill" =~ ^[0-9]+$ ]] || die "--fill $fill: MiB, a whole number"
for tool in stripefs mkfs.stripefs stripefsctl; do
  [ -x "$build_dir/fs/$tool" ] || die "$build_dir/fs/$tool is missing: build first"
done
mkdir -p "$work"
[ "$(stat -f -c %T "$work")" = tmpfs ] || die "--work $work is not on tmpfs"

mnt="$work/mnt"
log="$work/daemon.log"
members=("$work/m0" "$work/m1" "$work/m2" "$work/m3")
daemon=""
cleanup() {
  if mountpoint -q "$mnt" 2>/dev/null; then umount "$mnt" || true; fi
  if [ -n "$daemon" ]; then wait "$daemon" 2>/dev/null || true; fi
  rm -rf "${members[@]}" "$mnt" "$log" "$work/src"
  rmdir "$work" 2>/dev/null || true  # when nothing else is in it
}
trap cleanup EXIT

mkdir -p "$mnt"
for m in "${members[@]}"; do
  rm -f "$m"
  truncate -s "$size" "$m"
done
"$build_dir/fs/mkfs.stripefs" -q -l "$level" -n 4 -c "$chunk" "${mkfs_opts[@]}" "${members[@]}"
"$build_dir/fs/stripefs" -f "$(IFS=:; echo "${members[*]}")" "$mnt" >"$log" 2>&1 &
daemon=$!
for _ in $(seq 100); do
  mountpoint -q "$mnt" && break
  sleep 0.1
done
mountpoint -q "$mnt" || die "the filesystem did not mount: $(tail -3 "$log")"
"$build_dir/fs/stripefsctl" speed --min 1T --max 0 "$mnt" >/dev/null
if [ "$fill" -gt 0 ]; then
  dd if=/dev/urandom of="$work/src" bs=1M count="$fill" status=none
  cp "$work/src" "$mnt/f"
  rm -f "$work/src"
  sync
fi

read_all=() scrub=()
for pass in $(seq "$repeat"); do
  start=$(date +%s.%N)
  pids=()
  for m in "${members[@]}"; do
    dd if="$m" of=/dev/null bs=1M status=none &
    pids+=($!)
  done
  wait "${pids[@]}"
  bytes=$(($(stat -c %s "${members[0]}") * 4))
  read_all+=("$(awk -v s="$start" -v e="$(date +%s.%N)" -v b="$bytes" 'BEGIN {print b / 1048576 / (e - s)}')")
  "$build_dir/fs/stripefsctl" scrub start --wait "$mnt" >/dev/null ||
    die "the scrub failed: $(tail -3 "$log")"
  # The last scrub's start and end in the daemon's log ([YYYY-mm-dd HH:MM:SS.mmm] ...), and
  # the stripes it checked.
  rate=$(python3 - "$log" "$chunk" <<'EOF'
import datetime, re, sys
units = {"K": 1 << 10, "M": 1 << 20, "G": 1 << 30}
chunk = sys.argv[2]
chunk = int(chunk[:-1]) * units[chunk[-1].upper()] if chunk[-1].upper() in units else int(chunk)
started = finished = stripes = None
for line in open(sys.argv[1]):
    m = re.match(r"\[(\S+ \S+)\].*scrub (started|finished)", line)
    if not m:
        continue
    at = datetime.datetime.strptime(m.group(1), "%Y-%m-%d %H:%M:%S.%f").timestamp()
    if m.group(2) == "started":
        started = at
    else:
        finished = at
        stripes = int(re.search(r"(\d+) of \d+ stripes checked", line).group(1))
print(stripes * chunk * 4 / (1 << 20) / (finished - started))
EOF
  )
  scrub+=("$rate")
  printf '# pass %s: every member read at once %.0f MiB/s, scrub %.0f MiB/s\n' \
    "$pass" "${read_all[-1]}" "$rate"
done

median() { printf '%s\n' "$@" | sort -g | awk '{v[NR] = $1} END {print (NR % 2) ? v[(NR + 1) / 2] : (v[NR / 2] + v[NR / 2 + 1]) / 2}'; }
m_read=$(median "${read_all[@]}")
m_scrub=$(median "${scrub[@]}")
printf 'RESULT scrub_mounted.read_all %.1f MiB/s\n' "$m_read"
printf 'RESULT scrub_mounted.scrub %.1f MiB/s\n' "$m_scrub"
printf 'RESULT scrub_mounted.scrub_vs_read_all %.3f ratio\n' "$(awk -v a="$m_scrub" -v b="$m_read" 'BEGIN {print a / b}')"
