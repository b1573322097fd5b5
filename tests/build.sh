#!/usr/bin/env bash
# Configures and builds one build tree: tests/build.sh [release|asan]
set -euo pipefail
top=$(cd "$(dirname "$0")/.." && pwd)
kind=${1:-release}
case "$kind" in
  release) dir="$top/build"; flags=(-DCMAKE_BUILD_TYPE=RelWithDebInfo) ;;
  asan) dir="$top/build-asan"; flags=(-DCMAKE_BUILD_TYPE=Debug -DSTRIPEFS_SANITIZE=ON) ;;
  *) echo "build.sh: unknown build kind '$kind' (release or asan)" >&2; exit 2 ;;
esac
cmake -S "$top" -B "$dir" -G Ninja "${flags[@]}" >/dev/null
cmake --build "$dir" -j "$(nproc)"
