#!/usr/bin/env bash
# Installs everything stripefs needs to build and test on a fresh Debian 12, as root.
set -euo pipefail

if [ "$(id -u)" -ne 0 ]; then
  echo "install-deps.sh: run as root (it installs Debian packages)" >&2
  exit 1
fi

packages=(
  # build
  build-essential cmake ninja-build pkg-config clang-format
  # libraries (see README: Dependencies)
  libfuse3-dev fuse3 liburing-dev libisal-dev libspdlog-dev libfmt-dev libpmem2-dev
  libcli11-dev nlohmann-json3-dev libblkid-dev libabsl-dev
  # tests (tests/check uses xfs_io, setfattr/getfattr, setfacl/getfacl and python3 as
  # xfstests does)
  libgtest-dev xfsprogs attr acl python3
  # the export tests (tests/check group export): real Samba and NFS-Ganesha on loopback
  samba samba-vfs-modules smbclient samba-testsuite python3-smbc
  nfs-ganesha nfs-ganesha-vfs libnfs-utils libnfs-dev rpcbind
)

missing=()
for p in "${packages[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
if [ ${#missing[@]} -eq 0 ]; then
  echo "install-deps.sh: all packages present"
  exit 0
fi
echo "install-deps.sh: installing ${missing[*]}"
export DEBIAN_FRONTEND=noninteractive
apt-get update -qq
apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
