#!/usr/bin/env bash
# The README's first command: install, build, and run the demo on file members.
set -euo pipefail
top=$(cd "$(dirname "$0")/.." && pwd)
state=${STRIPEFS_STATE:-/var/lib/stripefs/demo}

bash "$top/tests/install-deps.sh"
bash "$top/tests/build.sh" release
echo
"$top/build/tests/bench/stripefs-bench" demo --dir "$state"
