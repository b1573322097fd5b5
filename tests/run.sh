#!/usr/bin/env bash
# The README's second command: build (normal and ASan+UBSan) and run every test group.
#   tests/run.sh [--group quick|all]
# quick: unit tests in both builds. all (default): also the slower groups.
set -euo pipefail
top=$(cd "$(dirname "$0")/.." && pwd)
group=all
while [ $# -gt 0 ]; do
  case "$1" in
    --group) group=${2:-}; shift 2 ;;
    *) echo "run.sh: unknown argument '$1' (usage: run.sh [--group quick|all])" >&2; exit 2 ;;
  esac
done
case "$group" in
  quick) label=quick ;;
  all) label='' ;;
  *) echo "run.sh: unknown group '$group' (quick or all)" >&2; exit 2 ;;
esac

bash "$top/tests/install-deps.sh"
bash "$top/tests/build.sh" release
bash "$top/tests/build.sh" asan

status=0
for dir in build build-asan; do
  echo "== ctest in $dir (${group})"
  if [ -n "$label" ]; then
    ctest --test-dir "$top/$dir" --output-on-failure -L "$label" || status=1
  else
    ctest --test-dir "$top/$dir" --output-on-failure || status=1
  fi
done
exit $status
