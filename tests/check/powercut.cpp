// stripefs-powercut: mounts a stripefs as the daemon does, but on members whose writes since
// their last flush a power cut can lose (raid/power_cut_member.hpp), for tests/check's crash
// tests. It stays in the foreground.
//
//   stripefs-powercut [--survive P] [--seed S] [--allow-other] [--log-level L] SOURCE MOUNTPOINT
//
// SIGUSR1 is the power cut: every member stops answering at once, loses its writes not yet
// flushed (each 4 KiB block of them kept with probability P, decided by seed S plus the
// member's index), then the process ends at once (exit status 0): no unmount, no flush,
// nothing more reaches the members. The dead FUSE mount is left for the caller to take away (umount
// -l). An umount, SIGTERM or SIGINT instead unmounts cleanly, as the daemon would.
//
// The members must be files on tmpfs: the wrapper reads what each write replaces on the
// submitting thread, which only a member driven inline allows.
#include <spdlog/spdlog.h>
#include <unistd.h>

#include <CLI/CLI.hpp>
#include <csignal>
#include <cstdio>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "fs/core/filesystem.hpp"
#include "fs/daemon/fuse_ops.hpp"  // FUSE_USE_VERSION, then fuse_lowlevel.h
#include "fs/daemon/mount_options.hpp"
#include "journal/open_array.hpp"
#include "raid/member_devices.hpp"
#include "raid/power_cut_member.hpp"

namespace {

using namespace stripefs;

int fail(const std::string& message) {
  std::fprintf(stderr, "stripefs-powercut: %s\n", message.c_str());
  return 1;
}

}  // namespace

int main(int argc, char** argv) {
  // Blocked in every thread (they inherit the mask): only the cutting thread takes it.
  sigset_t cut_signal;
  sigemptyset(&cut_signal);
  sigaddset(&cut_signal, SIGUSR1);
  pthread_sigmask(SIG_BLOCK, &cut_signal, nullptr);

  double survive = 0.0;
  uint64_t seed = 1;
  bool allow_other = false;
  std::string source, mountpoint;
  CLI::App app{"Mounts a stripefs whose members lose unflushed writes on SIGUSR1 (a power cut)"};
  app.add_option("--survive", survive, "chance that each unflushed 4 KiB block survives the cut")
      ->check(CLI::Range(0.0, 1.0));
  app.add_option("--seed", seed, "decides which blocks survive");
  app.add_flag("--allow-other", allow_other, "let other users in (FUSE allow_other)");
  std::string log_level = "info";
  app.add_option("--log-level", log_level, "trace, debug, info, warn, error, critical or off")
      ->check(CLI::IsMember({"trace", "debug", "info", "warn", "error", "critical", "off"}));
  app.add_option("source", source, "the members, a:b:c")->required();
  app.add_option("mountpoint", mountpoint, "where to mount")->required();
  CLI11_PARSE(app, argc, argv);
  spdlog::set_level(spdlog::level::from_str(log_level));

  auto devices = open_devices(split_device_list({source}), "");
  if (!devices) return fail(devices.error().message);
  std::vector<std::unique_ptr<PowerCutMember>> members;
  std::vector<Member*> pointers;
  for (const auto& device : (*devices)->members) {
    if (member_backend_name(*device) != "inline") {
      return fail(device->name() + ": not a file on tmpfs");
    }
    members.push_back(std::make_unique<PowerCutMember>(*device));
    pointers.push_back(members.back().get());
  }
  ArraySetup setup;
  setup.engine = (*devices)->engine.get();
  auto array = open_array(pointers, setup);
  if (!array) return fail(array.error().message);
  auto filesystem = fs::Filesystem::mount((*array)->volume(), fs::FsOptions{});
  if (!filesystem) return fail(filesystem.error().message);

  std::thread([&members, &cut_signal, survive, seed] {
    int signal = 0;
    sigwait(&cut_signal, &signal);
    // All at once: no member may fail while the others still run (the array would record
    // it failed on them).
    for (auto& member : members) member->freeze();
    size_t lost = 0;
    for (size_t i = 0; i < members.size(); ++i) lost += members[i]->power_off(survive, seed + i);
    std::fprintf(stderr, "stripefs-powercut: power cut, %zu blocks lost\n", lost);
    std::fflush(stderr);
    _exit(0);
  }).detach();

  std::vector<std::string> fuse_argv = {argv[0], "-odefault_permissions",
                                        "-ofsname=" + source.substr(0, source.find(':')),
                                        "-osubtype=stripefs"};
  if (allow_other) fuse_argv.emplace_back("-oallow_other");
  std::vector<char*> raw;
  for (std::string& a : fuse_argv) raw.push_back(a.data());
  fuse_args args = FUSE_ARGS_INIT(static_cast<int>(raw.size()), raw.data());
  fs::FuseContext context;
  context.fs = filesystem->get();
  const fuse_lowlevel_ops ops = fs::fuse_operations();
  std::unique_ptr<fuse_session, void (*)(fuse_session*)> session(
      fuse_session_new(&args, &ops, sizeof(ops), &context), fuse_session_destroy);
  fuse_opt_free_args(&args);
  if (session == nullptr) return fail("bad FUSE options");
  int status = 0;
  if (fuse_set_signal_handlers(session.get()) != 0) return fail("cannot install signal handlers");
  if (fuse_session_mount(session.get(), mountpoint.c_str()) != 0) {
    status = fail("cannot mount on " + mountpoint);
  } else {
    fuse_loop_config* loop = fuse_loop_cfg_create();
    fuse_loop_cfg_set_max_threads(loop, fs::default_io_threads());
    fuse_loop_cfg_set_clone_fd(loop, 1);
    if (fuse_session_loop_mt(session.get(), loop) < 0) status = 1;
    fuse_loop_cfg_destroy(loop);
    (*filesystem)->wait_reads();
    fuse_session_unmount(session.get());
  }
  fuse_remove_signal_handlers(session.get());
  session.reset();
  if (auto r = (*filesystem)->unmount(); !r) status = fail("unmount: " + r.error().message);
  filesystem->reset();
  if (auto r = array->close(); !r) status = fail("closing the array: " + r.error().message);
  return status;
}
