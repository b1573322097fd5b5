#!/usr/bin/env bash
# smb_bench.sh: Samba serving stripefs (RAID5 of 4 file members) against Samba serving
# libfuse's passthrough_ll, both over one tmpfs and through one smbd on loopback, with
# smbclient as the client. Prints "RESULT name value unit" lines (medians of --repeat runs)
# and the ratios stripefs / passthrough_ll that issue 15 sets goals for (>= 0.8).
#
#   bash tests/bench/smb_bench.sh [--build-dir DIR] [--work DIR] [--size SIZE]
#        [--entries N] [--repeat N] [--system-acls]
#
# Each run, on each share in turn: put a --size file (default 1G) from the tmpfs, drop the
# caches, get it back (compared byte for byte once), and list a directory of --entries
# (default 10000) empty files made on the mount beforehand. Throughput is the file's size
# over smbclient's wall time; the listing is entries per second. Run as root (tmpfs,
# smbd, drop_caches); samba and smbclient must be installed (tests/install-deps.sh).
# STRIPEFS_OPTS replaces the stripefs mount's options (default allow_other).
#
# Both shares are configured alike, as the export tests configure them (acl_xattr,
# streams_xattr, DOS attributes in xattrs), with one difference from the export tests:
# "acl_xattr:ignore system acls = yes", because passthrough_ll has no POSIX ACLs (the
# kernel answers EOPNOTSUPP for them without FUSE_POSIX_ACL, and acl_xattr then refuses to
# open an existing file: NT_STATUS_NOT_SUPPORTED). NT ACLs are still kept in security.NTACL
# on both. passthrough_ll runs with -o xattr (its default is no xattrs at all) so that it
# stores what stripefs stores. --system-acls keeps the export tests' configuration for the
# stripefs share alone and prints its figures without a baseline.
set -euo pipefail

script_dir=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
repo=$(cd "$script_dir/../.." && pwd)
build_dir="$repo/build"
work=/dev/shm/stripefs-smb-bench
size_arg=1G
entries=10000
repeat=3
system_acls=0
stripefs_opts=${STRIPEFS_OPTS:-allow_other}

usage() { sed -n '2,24p' "${BASH_SOURCE[0]}" | sed 's/^# \{0,1\}//'; }
die() {
  echo "smb_bench: $*" >&2
  exit 1
}
log() { echo "smb_bench: $*" >&2; }

while [ $# -gt 0 ]; do
  case "$1" in
    --build-dir) build_dir=${2:?}; shift 2 ;;
    --work) work=${2:?}; shift 2 ;;
    --size) size_arg=${2:?}; shift 2 ;;
    --entries) entries=${2:?}; shift 2 ;;
    --repeat) repeat=${2:?}; shift 2 ;;
    --system-acls) system_acls=1; shift ;;
    -h | --help) usage; exit 0 ;;
    *) die "unknown argument '$1' (see --help)" ;;
  esac
done
[ "$(id -u)" -eq 0 ] || die "run as root"
for c in smbd smbclient; do command -v "$c" >/dev/null || die "$c is not installed (tests/install-deps.sh)"; done
build_dir=$(realpath -m "$build_dir")
work=$(realpath -m "$work")
size_mib=$(($(numfmt --from=iec "$(sed -E 's/i?B$//' <<<"$size_arg")") / 1048576))
[ "$size_mib" -ge 16 ] || die "--size must be at least 16M"
[[ "$entries" =~ ^[0-9]+$ ]] && [ "$entries" -ge 1 ] || die "--entries must be a number >= 1, not '$entries'"
[[ "$repeat" =~ ^[0-9]+$ ]] && [ "$repeat" -ge 1 ] || die "--repeat must be a number >= 1, not '$repeat'"
member_mib=$((size_mib * 2 / 3 + 512))
tmpfs_mib=$((4 * member_mib + 3 * size_mib + 1024))

# shellcheck source=tests/bench/fuse_targets.sh
. "$script_dir/fuse_targets.sh"
mount_work
build_passthrough || die "cannot build passthrough_ll"
mkdir -p "$work/stripefs" "$work/passthrough" "$work/mnt/stripefs" "$work/mnt/passthrough"
setup_stripefs "$work/mnt/stripefs" "$work/stripefs" || die "cannot mount stripefs"
setup_passthrough "$work/mnt/passthrough" "$work/passthrough" xattr || die "cannot mount passthrough_ll"

# One smbd: share "stripefs" on the stripefs mount, "baseline" on passthrough_ll's, set up
# as the export tests set it up (tests/check/export.sh).
TEST_TMP="$work/smb"
TEST_DIR="$work/mnt/stripefs"
mkdir -p "$TEST_TMP"
_fail() { die "$*"; }
_notrun() { die "$*"; }
_require_command() { command -v "$1" >/dev/null || die "$1 is not installed ($2)"; }
# shellcheck source=tests/check/export.sh
. "$repo/tests/check/export.sh"
# set +e: under -e, "(exit $rc)" with a failed run's status would end the trap before
# cleanup, and leave the tmpfs and both mounts behind.
trap 'rc=$?; set +e; _export_cleanup; (exit $rc); cleanup' EXIT
shares=(stripefs baseline)
if [ "$system_acls" = 1 ]; then
  shares=(stripefs)
  _start_smbd
else
  SMB_SHARE_EXTRA="  acl_xattr:ignore system acls = yes"
  _start_smbd "$work/mnt/passthrough"
fi

head -c "${size_mib}M" /dev/urandom >"$work/file"
for share in "${shares[@]}"; do
  mnt="$work/mnt/stripefs"
  [ "$share" = baseline ] && mnt="$work/mnt/passthrough"
  mkdir "$mnt/many"
  (cd "$mnt/many" && seq -f "entry-%06g" 1 "$entries" | xargs touch)
done

seconds() { # command...: wall time in seconds; a command that fails (its exit status, or an
  # NT_STATUS_ error smbclient printed but did not exit on) stops the run: a failed transfer
  # is not a fast one
  local t0 t1 rc=0
  t0=$(date +%s%N)
  "$@" >"$work/last.out" 2>&1 || rc=$?
  t1=$(date +%s%N)
  if [ $rc -ne 0 ] || grep -q NT_STATUS_ "$work/last.out"; then
    die "$* failed: $(grep -m1 NT_STATUS_ "$work/last.out" || tail -1 "$work/last.out")"
  fi
  awk -v a="$t0" -v b="$t1" 'BEGIN { printf "%.4f", (b - a) / 1e9 }'
}
declare -A vals=()
record() { vals[$1]="${vals[$1]:-}${vals[$1]:+ }$2"; }
for run in $(seq 1 "$repeat"); do
  for share in "${shares[@]}"; do
    rm -f "$work/back"
    s=$(seconds _smbclient "$share" "put $work/file file")
    record "${share}_put" "$(awk -v m="$size_mib" -v s="$s" 'BEGIN { printf "%.1f", m / s }')"
    drop_caches
    s=$(seconds _smbclient "$share" "get file $work/back")
    record "${share}_get" "$(awk -v m="$size_mib" -v s="$s" 'BEGIN { printf "%.1f", m / s }')"
    # Every run: smbclient can report success for a transfer cut short.
    cmp -s "$work/file" "$work/back" || die "$share: the file came back different"
    drop_caches
    listed=$(_smbclient "$share" "cd many; ls" | grep -c ' entry-')
    [ "$listed" = "$entries" ] || die "$share: listed $listed of $entries entries"
    s=$(seconds _smbclient "$share" "cd many; ls")
    record "${share}_list" "$(awk -v n="$entries" -v s="$s" 'BEGIN { printf "%.1f", n / s }')"
    seconds _smbclient "$share" "del file" >/dev/null
  done
  log "run $run of $repeat done"
done

median() { tr ' ' '\n' <<<"$1" | sort -g | awk '{v[NR] = $1} END {
  if (NR % 2) printf "%.1f", v[(NR + 1) / 2]; else printf "%.1f", (v[NR / 2] + v[NR / 2 + 1]) / 2 }'; }
declare -A unit=([put]=MiB/s [get]=MiB/s [list]=entries/s)
for test in put get list; do
  for share in "${shares[@]}"; do log "$share $test, each run: ${vals[${share}_$test]}"; done
  a=$(median "${vals[stripefs_$test]}")
  echo "RESULT smb_stripefs_$test $a ${unit[$test]}"
  [ "$system_acls" = 0 ] || continue
  b=$(median "${vals[baseline_$test]}")
  echo "RESULT smb_passthrough_$test $b ${unit[$test]}"
  echo "RESULT ratio_smb_${test}_vs_passthrough $(awk -v a="$a" -v b="$b" 'BEGIN { printf "%.2f", a / b }') x"
done
