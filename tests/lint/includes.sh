#!/usr/bin/env bash
# Checks the include rules (see the top-level README, Layout): every project include names
# its layer ("raid/volume.hpp", never "volume.hpp" or "../raid/volume.hpp"), and layers
# include only downwards:
#   raid/         raid/
#   journal/      raid/ journal/
#   fs/core/      raid/ journal/ fs/core/
#   fs/daemon/    raid/ journal/ fs/core/ fs/daemon/
#   fs/programs/  every library
#   tests/        every library, and test helpers by their place under tests/ (unit/...)
# The build enforces the direction too (each library sees only its layer's include root);
# this says which line breaks a rule, and covers the naming. Prints one line per offence.
#   tests/lint/includes.sh [REPO]
set -euo pipefail
repo=${1:-$(cd "$(dirname "$0")/../.." && pwd)}
cd "$repo"
status=0
allowed_for() {
  case "$1" in
    raid/*) echo "raid/" ;;
    journal/*) echo "raid/ journal/" ;;
    fs/core/*) echo "raid/ journal/ fs/core/" ;;
    fs/daemon/*) echo "raid/ journal/ fs/core/ fs/daemon/" ;;
    fs/programs/*) echo "raid/ journal/ fs/core/ fs/daemon/" ;;
    tests/*) echo "raid/ journal/ fs/core/ fs/daemon/ unit/ mounted/ bench/" ;;
    *) echo "" ;;
  esac
}
while IFS= read -r file; do
  allowed=$(allowed_for "$file")
  [ -n "$allowed" ] || continue
  while IFS=: read -r line text; do
    target=$(sed -E 's/^[[:space:]]*#[[:space:]]*include[[:space:]]+"([^"]*)".*/\1/' <<<"$text")
    ok=0
    if [[ "$target" != *..* ]]; then
      for prefix in $allowed; do
        if [[ "$target" == "$prefix"* ]]; then ok=1; fi
      done
    fi
    if [ $ok -eq 0 ]; then
      echo "$file:$line: #include \"$target\": $(dirname "$file")/ may include only $allowed" >&2
      status=1
    elif [ ! -e "$target" ] && [ ! -e "tests/$target" ]; then
      echo "$file:$line: #include \"$target\": no such file in the repository" >&2
      status=1
    fi
  done < <(grep -nE '^[[:space:]]*#[[:space:]]*include[[:space:]]+"' "$file" || true)
done < <(git ls-files --cached --others --exclude-standard '*.cpp' '*.hpp' 2>/dev/null || find raid journal fs tests -name '*.[ch]pp')
if [ $status -eq 0 ]; then echo "includes.sh: every include names its layer and points down"; fi
exit $status
