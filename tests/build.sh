#!/usr/bin/env bash
# Configures and builds one build tree: tests/build.sh [release|asan]. Warnings are errors
# here (the developers' and CI's builds); a plain cmake build keeps them warnings.
set -euo pipefail
top=$(cd "$(dirname "$0")/.." && pwd)
kind=${1:-release}
case "$kind" in
  release) dir="$top/build"; flags=(-DCMAKE_BUILD_TYPE=RelWithDebInfo -DSTRIPEFS_WERROR=ON) ;;
  asan) dir="$top/build-asan"; flags=(-DCMAKE_BUILD_TYPE=Debug -DSTRIPEFS_SANITIZE=ON -DSTRIPEFS_WERROR=ON) ;;
  *) echo "build.sh: unknown build kind '$kind' (release or asan)" >&2; exit 2 ;;
esac
cmake -S "$top" -B "$dir" -G Ninja "${flags[@]}" >/dev/null
cmake --build "$dir" -j "$(nproc)"
