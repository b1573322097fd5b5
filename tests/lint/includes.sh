#!/usr/bin/env bash
# Checks the include rules (see the top-level README, Layout): every project include names
# its layer ("raid/volume.hpp", never "volume.hpp" or "../raid/volume.hpp"), and layers
# include only downwards:
#   raid/         raid/
#   journal/      raid/ journal/
#   fs/core/      raid/ journal/ fs/core/
#   fs/daemon/    raid/ journal/ fs/core/ fs/daemon/
#   fs/check/     raid/ journal/ fs/core/ fs/check/
#   fs/programs/  every library
#   tests/        every library, and test helpers by their place under tests/ (unit/...)
# The build enforces the direction too (each library sees only its layer's include root);
# this says which line breaks a rule, and covers the naming. Prints one line per offence.
#   tests/lint/includes.sh [REPO]
set -euo pipefail
repo=${1:-$(cd "$(dirname "$0")/../.." && pwd)}
cd "$repo"
files=$(git ls-files --cached --others --exclude-standard '*.cpp' '*.hpp' 2>/dev/null ||
  find raid journal fs tests -name '*.[ch]pp')
# One pass over every file: FILENAME:LINE: TARGET for each quoted include.
# shellcheck disable=SC2086 # the file list is word-split on purpose
awk '/^[[:space:]]*#[[:space:]]*include[[:space:]]+"/ {
       match($0, /"[^"]*"/)
       print FILENAME ":" FNR ":" substr($0, RSTART + 1, RLENGTH - 2)
     }' $files |
  awk -F: '
    function allowed(file) {
      if (file ~ /^raid\//) return "raid/"
      if (file ~ /^journal\//) return "raid/ journal/"
      if (file ~ /^fs\/core\//) return "raid/ journal/ fs/core/"
      if (file ~ /^fs\/daemon\//) return "raid/ journal/ fs/core/ fs/daemon/"
      if (file ~ /^fs\/check\//) return "raid/ journal/ fs/core/ fs/check/"
      if (file ~ /^fs\/programs\//) return "raid/ journal/ fs/core/ fs/daemon/ fs/check/"
      if (file ~ /^tests\//) return "raid/ journal/ fs/core/ fs/daemon/ fs/check/ unit/ mounted/ bench/"
      return ""
    }
    {
      file = $1; line = $2; target = $3
      rule = allowed(file)
      if (rule == "") next
      ok = 0
      if (index(target, "..") == 0) {
        n = split(rule, prefixes, " ")
        for (i = 1; i <= n; i++) if (index(target, prefixes[i]) == 1) ok = 1
      }
      if (!ok) {
        dir = file; sub(/\/[^\/]*$/, "", dir)
        printf "%s:%s: #include \"%s\": %s/ may include only %s\n", file, line, target, dir, rule
        bad = 1
        next
      }
      if ((getline probe < target) < 0 && (getline probe < ("tests/" target)) < 0) {
        printf "%s:%s: #include \"%s\": no such file in the repository\n", file, line, target
        bad = 1
      }
      close(target); close("tests/" target)
    }
    END { exit bad }' >&2 || {
  exit 1
}
echo "includes.sh: every include names its layer and points down"
