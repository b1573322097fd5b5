// stripefs-nfs-handle: an NFSv3 file handle kept across restarts of the server, as a
// client that holds a file open keeps it (libnfs, userspace; no kernel NFS client here).
//
//   stripefs-nfs-handle get SERVER EXPORT PATH   prints PATH's file handle, in hex
//   stripefs-nfs-handle cat SERVER EXPORT HANDLE mounts EXPORT (for a connection only) and
//                                                writes the file's bytes to stdout, read
//                                                through HANDLE alone: no lookup by name
//
// Exit 0 on success; 1 with one line on stderr naming the failure (for a stale handle:
// "NFS3ERR_STALE"); 2 for a bad command line.
#include <fcntl.h>
#include <poll.h>
#include <unistd.h>

#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <string_view>
#include <vector>

extern "C" {
#include <nfsc/libnfs.h>  // first: it defines EXTERN, which the raw headers use

#include <nfsc/libnfs-raw-nfs.h>
#include <nfsc/libnfs-raw.h>

// libnfs 4.0 (Debian 12) declares nfs_get_fh() but defines its result only in a private
// header; later libnfs defines it in libnfs.h with this very layout.
struct nfs_fh {
  int len;
  char* val;
};
}

namespace {

[[noreturn]] void die(const std::string& message) {
  std::fprintf(stderr, "stripefs-nfs-handle: %s\n", message.c_str());
  std::exit(1);
}

[[noreturn]] void usage() {
  std::fprintf(stderr,
               "usage: stripefs-nfs-handle get SERVER EXPORT PATH\n"
               "       stripefs-nfs-handle cat SERVER EXPORT HANDLE\n");
  std::exit(2);
}

nfs_context* mount_export(const char* server, const char* export_path) {
  nfs_context* nfs = nfs_init_context();
  if (nfs == nullptr) die("cannot make an NFS context");
  nfs_set_version(nfs, NFS_V3);
  if (nfs_mount(nfs, server, export_path) != 0) {
    die(std::string("mount ") + server + ":" + export_path + ": " + nfs_get_error(nfs));
  }
  return nfs;
}

int get(const char* server, const char* export_path, const char* path) {
  nfs_context* nfs = mount_export(server, export_path);
  nfsfh* file = nullptr;
  if (nfs_open(nfs, path, O_RDONLY, &file) != 0) {
    die(std::string("open ") + path + ": " + nfs_get_error(nfs));
  }
  const nfs_fh* handle = nfs_get_fh(file);
  for (int i = 0; i < static_cast<int>(handle->len); ++i) {
    std::printf("%02x", static_cast<unsigned char>(handle->val[i]));
  }
  std::printf("\n");
  nfs_close(nfs, file);
  nfs_destroy_context(nfs);
  return 0;
}

std::vector<char> from_hex(std::string_view hex) {
  if (hex.empty() || hex.size() % 2 != 0) die("a handle is an even number of hex digits");
  std::vector<char> bytes;
  for (size_t i = 0; i < hex.size(); i += 2) {
    const std::string pair(hex.substr(i, 2));
    char* end = nullptr;
    const long v = std::strtol(pair.c_str(), &end, 16);
    if (end != pair.c_str() + 2) die("'" + pair + "' in the handle is not hex");
    bytes.push_back(static_cast<char>(v));
  }
  return bytes;
}

// One READ's outcome, filled in by its callback.
struct Reply {
  bool done = false;
  std::string error;  // transport failure
  nfsstat3 status = NFS3_OK;
  std::vector<char> bytes;
  bool eof = false;
};

void on_read(rpc_context*, int status, void* data, void* private_data) {
  auto* reply = static_cast<Reply*>(private_data);
  reply->done = true;
  if (status != RPC_STATUS_SUCCESS) {
    reply->error = data != nullptr ? static_cast<const char*>(data) : "cancelled";
    return;
  }
  const auto* res = static_cast<const READ3res*>(data);
  reply->status = res->status;
  if (res->status != NFS3_OK) return;
  const READ3resok& ok = res->READ3res_u.resok;
  reply->bytes.assign(ok.data.data_val, ok.data.data_val + ok.data.data_len);
  reply->eof = ok.eof != 0;
}

int cat(const char* server, const char* export_path, const char* hex) {
  std::vector<char> handle = from_hex(hex);
  nfs_context* nfs = mount_export(server, export_path);
  rpc_context* rpc = nfs_get_rpc_context(nfs);
  nfs_fh3 fh{};
  fh.data.data_len = static_cast<u_int>(handle.size());
  fh.data.data_val = handle.data();
  constexpr uint64_t kChunk = 1 << 20;
  for (uint64_t offset = 0;;) {
    Reply reply;
    if (rpc_nfs_read_async(rpc, on_read, &fh, offset, kChunk, &reply) != 0) {
      die(std::string("sending READ: ") + rpc_get_error(rpc));
    }
    while (!reply.done) {
      pollfd p{rpc_get_fd(rpc), static_cast<short>(rpc_which_events(rpc)), 0};
      if (poll(&p, 1, 30000) <= 0) die("no answer to READ within 30 s");
      if (rpc_service(rpc, p.revents) < 0) die(std::string("READ: ") + rpc_get_error(rpc));
    }
    if (!reply.error.empty()) die("READ at byte " + std::to_string(offset) + ": " + reply.error);
    if (reply.status != NFS3_OK) {
      die("READ at byte " + std::to_string(offset) + ": " + nfsstat3_to_str(reply.status));
    }
    if (!reply.bytes.empty() &&
        std::fwrite(reply.bytes.data(), 1, reply.bytes.size(), stdout) != reply.bytes.size()) {
      die("writing to stdout failed");
    }
    offset += reply.bytes.size();
    if (reply.eof || reply.bytes.empty()) break;
  }
  nfs_destroy_context(nfs);
  return std::fflush(stdout) == 0 ? 0 : 1;
}

}  // namespace

int main(int argc, char** argv) {
  if (argc != 5) usage();
  const std::string_view command = argv[1];
  if (command == "get") return get(argv[2], argv[3], argv[4]);
  if (command == "cat") return cat(argv[2], argv[3], argv[4]);
  usage();
}
