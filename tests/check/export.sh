# Sourced by the export tests (after common.sh): a real smbd (Debian's samba) and a real
# nfs-ganesha serving the test's mount on loopback, each started in the foreground with a
# configuration of the test's own under $TEST_TMP (nothing in /etc or /var), and stopped
# with everything it started when the test ends.
#
#   _require_samba           notrun without smbd, smbclient, smbtorture, getfattr
#   _require_smbc            notrun without python3-smbc (libsmbclient from Python)
#   _start_smbd [DIR]        serves TEST_DIR as share "stripefs" and DIR (when given) as
#                            "baseline"; sets SMB_PORT; user root, password SMB_PASSWORD.
#                            SMB_SHARE_EXTRA (lines of "option = value") goes into both
#                            shares' sections, SMB_GLOBAL_EXTRA into [global]
#   _smbclient SHARE CMDS    smbclient's commands (-c) on a share, as root
#   _stop_smbd               (also at exit)
#   _require_ganesha         notrun without ganesha.nfsd, its VFS FSAL, libnfs-utils, rpcbind
#   _start_ganesha           exports TEST_DIR over NFSv3 and v4; sets NFS_URL (a libnfs
#                            URL prefix: "$NFS_URL/name?version=3")
#   _stop_ganesha            (also at exit)
#
# Why NFSv3 with rpcbind: libnfs 4.0.0 (Debian 12) fails every NFSv4 WRITE larger than
# about 3.5 KiB on the client side ("ZDR error: Failed to encode COMPOUND4args"), and
# Ganesha 4.3 exits at startup when NFSv3 is on and it cannot register with rpcbind. A
# rpcbind is started only when none runs (without -w: a warm start would bring back the
# registrations of a Ganesha that is gone, and refuse the new one's), and stopped after.

SMB_PASSWORD=stripefs-test
_export_pids=()

_export_cleanup() {
  local pid
  # Each server leads a session and process group of its own (setsid): the group goes,
  # children included (smbd forks one per client).
  for pid in "${_export_pids[@]}"; do
    kill -- "-$pid" 2>/dev/null || true
  done
  for pid in "${_export_pids[@]}"; do
    wait "$pid" 2>/dev/null || true
  done
  _export_pids=()
  [ -z "${_smb_conf:-}" ] || pkill -f -- "$_smb_conf" 2>/dev/null || true
}
trap _export_cleanup EXIT

# A free TCP port on loopback.
_free_port() {
  /usr/bin/python3 -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])'
}

# Waits (up to 30 s) until something accepts on 127.0.0.1:PORT.
_wait_port() { # port what
  local i
  for i in $(seq 1 150); do
    if /usr/bin/python3 -c "import socket; socket.create_connection(('127.0.0.1', $1), 1)" 2>/dev/null; then
      return 0
    fi
    sleep 0.2
  done
  _fail "$2 never listened on port $1"
}

_require_samba() {
  _require_command smbd samba
  _require_command smbclient smbclient
  _require_command getfattr attr
  _require_command smbtorture samba-testsuite
  [ -e /usr/lib/x86_64-linux-gnu/samba/vfs/streams_xattr.so ] ||
    _notrun "samba's vfs modules are not installed (Debian package samba-vfs-modules)"
}

_require_smbc() {
  /usr/bin/python3 -c 'import smbc' 2>/dev/null || _notrun "python3-smbc is not installed"
}

_start_smbd() { # [baseline-dir]
  local d="$TEST_TMP/samba" share
  mkdir -p "$d"/{lock,state,cache,private,pid,ncalrpc}
  SMB_PORT=$(_free_port)
  _smb_conf="$d/smb.conf"
  cat >"$_smb_conf" <<CONF
[global]
  server role = standalone server
  netbios name = STRIPEFSTEST
  interfaces = lo
  bind interfaces only = yes
  smb ports = $SMB_PORT
  disable netbios = yes
  log file = $d/log.smbd
  log level = 1
  lock directory = $d/lock
  state directory = $d/state
  cache directory = $d/cache
  private dir = $d/private
  pid directory = $d/pid
  ncalrpc dir = $d/ncalrpc
  passdb backend = tdbsam:$d/private/passdb.tdb
  load printers = no
  printing = bsd
  printcap name = /dev/null
  disable spoolss = yes
${SMB_GLOBAL_EXTRA:-}
CONF
  for share in stripefs ${1:+baseline}; do
    local path=$TEST_DIR
    [ "$share" = baseline ] && path=$1
    cat >>"$_smb_conf" <<CONF
[$share]
  path = $path
  read only = no
  vfs objects = acl_xattr streams_xattr
  ea support = yes
  store dos attributes = yes
${SMB_SHARE_EXTRA:-}
CONF
  done
  printf '%s\n%s\n' "$SMB_PASSWORD" "$SMB_PASSWORD" |
    smbpasswd -c "$_smb_conf" -s -a root >/dev/null 2>"$d/smbpasswd.err" ||
    _fail "smbpasswd: $(head -1 "$d/smbpasswd.err")"
  # A session of its own: smbd ends by signalling its whole process group, which would
  # otherwise be this test and the runner.
  setsid smbd --foreground --no-process-group -s "$_smb_conf" >"$d/smbd.out" 2>&1 &
  _export_pids+=($!)
  _smbd_pid=$!
  _wait_port "$SMB_PORT" smbd
}

_stop_smbd() {
  [ -n "${_smbd_pid:-}" ] || return 0
  kill -- "-$_smbd_pid" 2>/dev/null || true
  wait "$_smbd_pid" 2>/dev/null || true
  pkill -f -- "$_smb_conf" 2>/dev/null || true
  _smbd_pid=
}

_smbclient() { # share commands
  smbclient "//127.0.0.1/$1" -p "$SMB_PORT" -U "root%$SMB_PASSWORD" -c "$2"
}

_require_ganesha() {
  _require_command ganesha.nfsd nfs-ganesha
  [ -e /usr/lib/x86_64-linux-gnu/ganesha/libfsalvfs.so ] ||
    _notrun "ganesha's VFS FSAL is not installed (Debian package nfs-ganesha-vfs)"
  _require_command nfs-cp libnfs-utils
  _require_command rpcbind rpcbind
}

_start_ganesha() {
  local d="$TEST_TMP/ganesha"
  mkdir -p "$d/recovery"
  if ! pgrep -x rpcbind >/dev/null; then
    setsid rpcbind -f &
    _export_pids+=($!)
    _wait_port 111 rpcbind
  fi
  local port mnt_port
  port=$(_free_port)
  mnt_port=$(_free_port)
  cat >"$d/ganesha.conf" <<CONF
NFS_CORE_PARAM {
  Protocols = 3, 4;
  NFS_Port = $port;
  MNT_Port = $mnt_port;
  Bind_addr = 127.0.0.1;
  Enable_NLM = false;
  Enable_RQUOTA = false;
}
NFSV4 { Graceless = true; RecoveryRoot = "$d/recovery"; }
NFS_KRB5 { Active_krb5 = false; }
LOG { Default_Log_Level = EVENT; }
EXPORT {
  Export_Id = 1;
  Path = "$TEST_DIR";
  Pseudo = "/stripefs";
  Protocols = 3, 4;
  Transports = TCP;
  Access_Type = RW;
  Squash = No_Root_Squash;
  SecType = sys;
  FSAL { Name = VFS; }
}
CONF
  setsid ganesha.nfsd -F -f "$d/ganesha.conf" -L "$d/ganesha.log" -p "$d/ganesha.pid" -N NIV_EVENT \
    >"$d/ganesha.out" 2>&1 &
  _export_pids+=($!)
  _ganesha_pid=$!
  _wait_port "$port" ganesha.nfsd
  NFS_URL="nfs://127.0.0.1$TEST_DIR"
}

_stop_ganesha() {
  [ -n "${_ganesha_pid:-}" ] || return 0
  kill -- "-$_ganesha_pid" 2>/dev/null || true
  wait "$_ganesha_pid" 2>/dev/null || true
  _ganesha_pid=
}
