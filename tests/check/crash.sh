# Sourced by tests/check's power-cut tests, after common.sh.
#
# _crash_cycles CYCLES [lose-member] [fsx]
#   Each cycle, on the filesystem of TEST_SOURCE (unmounted on entry and on return):
#   1. stripefs-powercut mounts it on members that lose their unflushed writes in a cut
#      (raid/power_cut_member.hpp) and stripefs-crashload runs three processes in cycle
#      directory cN, recording what each made durable (with fsx: the exerciser and the
#      metadata stress beside them, in cN.fsx, checked by fsck and by reading every file);
#   2. after 0.3 to 2.5 s the power is cut: every member write not yet flushed is lost, each
#      4 KiB block of it kept with probability 0, 0.5 or 0.9 in turn (torn, in any order),
#      and the process ends on the spot;
#   3. with lose-member, one member (chosen by the seed) is gone as well: the daemon mounts
#      the others (dirty and degraded);
#   4. the daemon mounts it (its recovery: the journals, the orphans); every file and name
#      made durable before the cut is there as it was (crashload verify), the two cycles
#      before still match their md5 manifests; with lose-member the member then comes back
#      blank and is rebuilt (stripefsctl add, status --wait);
#   5. unmounted, fsck.stripefs -n -f --parity finds nothing wrong.
#   Cycle directories three cycles old are removed (the frees exercise the allocator).
# CHECK_CRASH_LOG_LEVEL=debug has the cut daemon trace its creates, renames, unlinks, commits
# and fsyncs into the test's tmp/powercut.err (the last cycle's: a failure's). The recovery
# mount runs in the foreground with its log (at that level too) in tmp/recovery.err: a
# mounted daemon logs only to syslog, which a test machine may not keep.
# CHECK_CRASH_KEEP=1 copies the members into tmp/cut/ after each cut, before the recovery:
# a failed cycle's recovery can then be run again from the same state.
# Cycle N's seed is CHECK_CRASH_SEED + N (CHECK_CRASH_SEED: random unless set); a failure
# names it, and CHECK_CRASH_SEED replays the same cuts' survivors and workloads (not the
# same instants).

# Waits until TEST_DIR is mounted by daemon `pid`, which logs to `log`; fails the test naming
# `what` if the daemon ends first or nothing is mounted within 20 s.
_await_mount() { # pid log what
  local i
  for i in $(seq 1 200); do
    mountpoint -q "$TEST_DIR" && return 0
    kill -0 "$1" 2>/dev/null || _fail "$3: $(tail -1 "$2")"
    sleep 0.1
  done
  _fail "$3 never mounted: $(tail -1 "$2")"
}

# The recovery mount of `source`: the daemon in the foreground, its log in tmp/recovery.err.
_crash_mount() { # source
  local options=$TEST_MOUNT_OPTIONS${CHECK_CRASH_LOG_LEVEL:+,log_level=$CHECK_CRASH_LOG_LEVEL}
  "$STRIPEFS_BUILD/fs/stripefs" -f -o "$options" "$1" "$TEST_DIR" 2>"$TEST_TMP/recovery.err" &
  _await_mount $! "$TEST_TMP/recovery.err" "the recovery mount"
}

_crash_cycles() { # cycles [lose-member] [fsx]
  local cycles=$1 lose=0 fsx=0 arg
  shift
  for arg in "$@"; do
    case "$arg" in lose-member) lose=1 ;; fsx) fsx=1 ;; *) _fail "_crash_cycles: $arg?" ;; esac
  done
  local base=${CHECK_CRASH_SEED:-$((($(date +%s%N) / 1000) % 1000000))}
  local build=$STRIPEFS_BUILD
  local -a members
  IFS=: read -r -a members <<<"$TEST_SOURCE"
  local c seed survive pause load fsx_pid cut lost source rest m
  echo "crash seeds: $base + cycle" >&2
  for c in $(seq 1 "$cycles"); do
    seed=$((base + c))
    survive=$(echo "0 0.5 0.9" | cut -d' ' -f$((c % 3 + 1)))
    pause=$((300 + (seed * 7919) % 2200))
    CHECK_WHERE="cycle $c (seed $seed, survive $survive; replay: CHECK_CRASH_SEED=$base)"
    echo "$CHECK_WHERE" >&2

    "$build/tests/check/stripefs-powercut" --allow-other --seed "$seed" --survive "$survive" \
      ${CHECK_CRASH_LOG_LEVEL:+--log-level "$CHECK_CRASH_LOG_LEVEL"} "$TEST_SOURCE" "$TEST_DIR" \
      >"$TEST_TMP/powercut.out" 2>"$TEST_TMP/powercut.err" &
    cut=$!
    _await_mount "$cut" "$TEST_TMP/powercut.err" stripefs-powercut
    "$build/tests/check/stripefs-crashload" run -S "$seed" -p 3 "$TEST_DIR/c$c" \
      "$TEST_TMP/log.$c" >/dev/null 2>"$TEST_TMP/load.err" &
    load=$!
    fsx_pid=""
    if [ "$fsx" = 1 ]; then
      mkdir -p "$TEST_DIR/c$c.fsx"
      _fsx -N 100000000 -l 2097152 -o 262144 "$TEST_DIR/c$c.fsx/f" >/dev/null 2>&1 &
      fsx_pid=$!
      "$build/tests/check/stripefs-stress" -S "$seed" -p 2 -n 100000000 "$TEST_DIR/c$c.fsx/tree" \
        >/dev/null 2>&1 &
      fsx_pid="$fsx_pid $!"
    fi
    sleep "$((pause / 1000)).$(printf %03d $((pause % 1000)))"
    kill -0 "$load" 2>/dev/null || _fail "the workload ended before the cut: $(tail -1 "$TEST_TMP/load.err")"
    kill -USR1 "$cut"
    wait "$cut" || _fail "stripefs-powercut: $(tail -1 "$TEST_TMP/powercut.err")"
    kill -9 "$load" $fsx_pid 2>/dev/null || true
    wait "$load" $fsx_pid 2>/dev/null || true
    umount -l "$TEST_DIR"
    if [ -n "${CHECK_CRASH_KEEP:-}" ]; then
      mkdir -p "$TEST_TMP/cut"
      cp --sparse=always "${members[@]}" "$TEST_TMP/cut/"
      echo "cycle $c (seed $seed)" >"$TEST_TMP/cut/cycle"
    fi

    source=$TEST_SOURCE
    lost=""
    if [ "$lose" = 1 ]; then
      lost=${members[$((seed % ${#members[@]}))]}
      rest=()
      for m in "${members[@]}"; do [ "$m" = "$lost" ] || rest+=("$m"); done
      source=$(IFS=:; echo "${rest[*]}")
    fi
    _crash_mount "$source"
    "$build/tests/check/stripefs-crashload" verify "$TEST_DIR/c$c" "$TEST_TMP/log.$c" \
      >"$TEST_TMP/verify.out" 2>"$TEST_TMP/verify.err" ||
      _fail "$(head -1 "$TEST_TMP/verify.out")"
    for i in $((c - 2)) $((c - 1)); do
      [ -f "$TEST_TMP/manifest.$i" ] || continue
      (cd "$TEST_DIR" && md5sum --quiet -c "$TEST_TMP/manifest.$i" >"$TEST_TMP/md5.out" 2>&1) ||
        _fail "cycle $i's files changed: $(head -1 "$TEST_TMP/md5.out")"
    done
    local dirs=("c$c")
    [ "$fsx" = 0 ] || dirs+=("c$c.fsx")
    (cd "$TEST_DIR" && find "${dirs[@]}" -type f -print0 | sort -z | xargs -0 -r md5sum) \
      >"$TEST_TMP/manifest.$c"
    rm -rf "$TEST_DIR/c$((c - 3))" "$TEST_DIR/c$((c - 3)).fsx"
    rm -f "$TEST_TMP/manifest.$((c - 3))" "$TEST_TMP/log.$((c - 3))".*
    if [ -n "$lost" ]; then
      truncate -s 0 "$lost"
      truncate -s "$(stat -c %s "${rest[0]}")" "$lost"
      "$build/fs/stripefsctl" add "$TEST_DIR" "$lost" >/dev/null ||
        _fail "stripefsctl add $lost failed"
      "$build/fs/stripefsctl" status --wait "$TEST_DIR" >/dev/null ||
        _fail "the rebuild onto $lost failed"
    fi
    umount "$TEST_DIR"
    _fsck
  done
  CHECK_WHERE=""
}
