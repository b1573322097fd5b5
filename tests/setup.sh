#!/usr/bin/env bash
# The README's first command: install, build, then create a RAID5 stripefs on four file
# members under the state directory (once) and mount it.
#   STRIPEFS_STATE   where the member files live (default /var/lib/stripefs/demo)
#   STRIPEFS_MOUNT   where it is mounted (default $STRIPEFS_STATE/mnt)
set -euo pipefail
top=$(cd "$(dirname "$0")/.." && pwd)
state=${STRIPEFS_STATE:-/var/lib/stripefs/demo}
mnt=${STRIPEFS_MOUNT:-$state/mnt}
member_size=${STRIPEFS_MEMBER_SIZE:-1G}

bash "$top/tests/install-deps.sh"
bash "$top/tests/build.sh" release
# Where mount(8), fsck(8) and man look: stripefs, mkfs.stripefs, fsck.stripefs (and
# fsck.fuse.stripefs), stripefsctl in /usr/local/sbin, the man pages in /usr/local/share/man.
# build/install_manifest.txt lists every file, for uninstalling.
cmake --install "$top/build" >/dev/null
echo "setup.sh: installed stripefs, mkfs.stripefs, fsck.stripefs, stripefsctl and their man" \
  "pages under /usr/local"
echo
# A daemon that is gone (killed, or the machine restarted under it) leaves its mount behind,
# and every access to it fails with "Transport endpoint is not connected". Detach it; the
# next mount replays the journal, as after any unclean stop.
mnt_dir=$(realpath -m "$(dirname "$mnt")")/$(basename "$mnt")
if ! stat "$mnt_dir" >/dev/null 2>&1 &&
  awk -v m="${mnt_dir// /\\\\040}" '$5 == m { found = 1 } END { exit !found }' /proc/self/mountinfo; then
  echo "setup.sh: $mnt is the mount of a stripefs that is no longer running; detaching it"
  umount -l "$mnt_dir"
fi
mkdir -p "$state" "$mnt"
if mountpoint -q "$mnt"; then
  echo "setup.sh: $mnt is already mounted"
  exit 0
fi
# Names of their own: the RAID-only demo (stripefs-bench demo) keeps member-N and journal/ here.
members=("$state/fs-member-0" "$state/fs-member-1" "$state/fs-member-2" "$state/fs-member-3")
journal="$state/fs-journal"
created="$state/fs-created"  # written once mkfs succeeded: a failed first run starts over
if [ ! -e "$created" ]; then
  # Sparse files: they take space only as the filesystem fills them.
  rm -f "${members[@]}" "$journal"
  for m in "${members[@]}"; do truncate -s "$member_size" "$m"; done
  # The write-hole journal is the default one, mirrored on the first two members.
  /usr/local/sbin/mkfs.stripefs -l 5 -n 4 -c 64K -L demo "${members[@]}"
  touch "$created"
fi
source=$(IFS=:; echo "${members[*]}")
options=allow_other
# A demo made before the journal moved onto the members keeps it in a file of its own.
if [ -e "$journal" ]; then options="journal_device=$journal,$options"; fi
if ! mount -t fuse.stripefs -o "$options" "$source" "$mnt"; then
  echo "setup.sh: cannot mount the demo in $state (made by an older stripefs whose on-disk" \
    "format changed?); to make it again, remove $created and run this again" >&2
  exit 1
fi
echo
echo "stripefs: RAID5 of 4 member files in $state, mounted on $mnt"
echo "  try:     cp -r /usr/share/doc $mnt/ && df -h $mnt"
echo "  unmount: umount $mnt   (mount again: bash tests/setup.sh)"
