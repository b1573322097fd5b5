// The stripefs command line, every option, parsed as mount.fuse3 and fstab pass it.
#include "fs/daemon/mount_options.hpp"

#include <gtest/gtest.h>
#include <sched.h>

#include <cmath>
#include <initializer_list>
#include <string>
#include <vector>

namespace stripefs::fs {
namespace {

// Parses `argv` (the program name first); `left` gets what FUSE is left to see.
Result<MountOptions> parse(std::initializer_list<const char*> argv,
                           std::vector<std::string>* left = nullptr) {
  std::vector<char*> raw;
  for (const char* a : argv) raw.push_back(const_cast<char*>(a));
  fuse_args args = FUSE_ARGS_INIT(static_cast<int>(raw.size()), raw.data());
  auto r = parse_mount_options(args);
  if (left != nullptr) {
    for (int i = 0; i < args.argc; ++i) left->emplace_back(args.argv[i]);
  }
  fuse_opt_free_args(&args);
  return r;
}

Error refusal(std::initializer_list<const char*> argv) {
  auto r = parse(argv);
  EXPECT_FALSE(r);
  return r ? Error{} : r.error();
}

TEST(MountOptions, SourceMountpointAndDefaults) {
  auto o = parse({"stripefs", "/dev/a:/dev/b", "/mnt"});
  ASSERT_TRUE(o) << o.error().message;
  EXPECT_EQ(o->sources, std::vector<std::string>{"/dev/a:/dev/b"});
  EXPECT_EQ(o->mountpoint, "/mnt");
  EXPECT_TRUE(o->journal_device.empty());
  EXPECT_TRUE(o->log_partial_stripes);
  EXPECT_FALSE(o->fs.read_only);
  EXPECT_EQ(o->fs.writeback_delay_s, 5.0);
  EXPECT_EQ(o->fs.commit_interval_s, 5.0);
  EXPECT_EQ(o->fs.cache_bytes, uint64_t{256} << 20);
  EXPECT_EQ(o->readahead, uint64_t{4} << 20);
  EXPECT_EQ(o->io_threads, 0u) << "0: the default, computed at mount";
  EXPECT_EQ(o->max_read_errors, 20u) << "md's default";
  EXPECT_TRUE(o->posix_acl) << "ACLs enforced by default, as on ext4";
  EXPECT_FALSE(o->writeback_cache || o->direct_io || o->force || o->foreground || o->debug ||
               o->single || o->help || o->version);
  auto apart = parse({"stripefs", "/dev/a", "/dev/b", "/dev/c", "/mnt"});
  ASSERT_TRUE(apart);
  EXPECT_EQ(apart->sources, (std::vector<std::string>{"/dev/a", "/dev/b", "/dev/c"}));
}

TEST(MountOptions, EachOptionOfItsOwn) {
  std::vector<std::string> left;
  auto o = parse({"stripefs", "-o",
                  "journal_device=/dev/j,write_hole=open,killpriv=v1,writeback_delay=2.5,"
                  "commit_interval=30,cache_size=64M,readahead=0,io_threads=8,writeback_cache,"
                  "direct_io,force,noacl",
                  "-s", "src", "/mnt"},
                 &left);
  ASSERT_TRUE(o) << o.error().message;
  EXPECT_EQ(o->journal_device, "/dev/j");
  EXPECT_FALSE(o->log_partial_stripes);
  EXPECT_FALSE(o->killpriv_v2);
  EXPECT_EQ(o->fs.writeback_delay_s, 2.5);
  EXPECT_EQ(o->fs.commit_interval_s, 30.0);
  EXPECT_EQ(o->fs.cache_bytes, uint64_t{64} << 20);
  EXPECT_EQ(o->readahead, 0u);
  EXPECT_EQ(o->io_threads, 8u);
  EXPECT_TRUE(o->writeback_cache);
  EXPECT_TRUE(o->direct_io);
  EXPECT_TRUE(o->force);
  EXPECT_FALSE(o->posix_acl);
  EXPECT_TRUE(o->single);
  EXPECT_FALSE(o->foreground);
  // None of them is FUSE's: nothing is left for it but the program name.
  EXPECT_EQ(left, std::vector<std::string>{"stripefs"});
  auto healing = parse({"stripefs", "-o", "max_read_errors=0", "s", "/m"});
  ASSERT_TRUE(healing) << healing.error().message;
  EXPECT_EQ(healing->max_read_errors, 0u);
  EXPECT_EQ(healing->backend, MemberBackend::automatic);
  for (auto [text, backend] : {std::pair{"backend=pmem", MemberBackend::pmem},
                               std::pair{"backend=block", MemberBackend::block},
                               std::pair{"backend=auto", MemberBackend::automatic}}) {
    auto chosen = parse({"stripefs", "-o", text, "s", "/m"});
    ASSERT_TRUE(chosen) << chosen.error().message;
    EXPECT_EQ(chosen->backend, backend) << text;
  }
  EXPECT_TRUE(healing->killpriv_v2) << "the default";
  auto closed = parse({"stripefs", "-o", "write_hole=closed,readahead=1G,killpriv=v2", "s", "/m"});
  ASSERT_TRUE(closed);
  EXPECT_TRUE(closed->log_partial_stripes);
  EXPECT_TRUE(closed->killpriv_v2);
  EXPECT_EQ(closed->readahead, uint64_t{1} << 30);
}

// ro and debug are FUSE's business too; its own options pass through; fstab's "defaults" is
// dropped.
TEST(MountOptions, WhatFuseMustSeeStaysInTheArguments) {
  std::vector<std::string> left;
  auto o = parse({"stripefs", "-o", "ro,allow_other,defaults,default_permissions", "-d", "s", "/m"},
                 &left);
  ASSERT_TRUE(o) << o.error().message;
  EXPECT_TRUE(o->fs.read_only);
  EXPECT_TRUE(o->debug);
  EXPECT_TRUE(o->foreground) << "-d implies -f";
  std::string joined;
  for (const auto& a : left) joined += a + " ";
  EXPECT_NE(joined.find("ro"), std::string::npos) << joined;
  EXPECT_NE(joined.find("allow_other"), std::string::npos) << joined;
  EXPECT_NE(joined.find("default_permissions"), std::string::npos) << joined;
  EXPECT_NE(joined.find("-d"), std::string::npos) << joined;
  EXPECT_EQ(joined.find("defaults"), std::string::npos) << joined;
  auto f = parse({"stripefs", "-f", "s", "/m"});
  ASSERT_TRUE(f);
  EXPECT_TRUE(f->foreground);
  EXPECT_FALSE(f->debug);
  auto od = parse({"stripefs", "-o", "debug", "s", "/m"});
  ASSERT_TRUE(od);
  EXPECT_TRUE(od->debug);
}

// A user's fsname= and subtype= go on to FUSE, and say that they were given (so the daemon
// does not add its own, which would win as the later option).
TEST(MountOptions, TheUsersFsnameAndSubtypeAreKeptAndNoted) {
  std::vector<std::string> left;
  auto o = parse({"stripefs", "-o", "allow_other,fsname=nas0,subtype=nas", "s", "/m"}, &left);
  ASSERT_TRUE(o) << o.error().message;
  EXPECT_TRUE(o->fsname_given);
  EXPECT_TRUE(o->subtype_given);
  std::string joined;
  for (const auto& a : left) joined += a + " ";
  EXPECT_NE(joined.find("fsname=nas0"), std::string::npos) << joined;
  EXPECT_NE(joined.find("subtype=nas"), std::string::npos) << joined;
  auto plain = parse({"stripefs", "s", "/m"});
  ASSERT_TRUE(plain);
  EXPECT_FALSE(plain->fsname_given);
  EXPECT_FALSE(plain->subtype_given);
}

TEST(MountOptions, HelpAndVersionNeedNothingElse) {
  for (const char* flag : {"-h", "--help"}) {
    auto o = parse({"stripefs", flag});
    ASSERT_TRUE(o) << flag;
    EXPECT_TRUE(o->help);
  }
  for (const char* flag : {"-V", "--version"}) {
    auto o = parse({"stripefs", flag});
    ASSERT_TRUE(o) << flag;
    EXPECT_TRUE(o->version);
  }
}

// One line naming the option, and the right kind of error (the exit code follows it).
TEST(MountOptions, BadValuesAreRefusedNamingTheOption) {
  struct Case {
    const char* option;
    const char* named;
  };
  const Case cases[] = {
      {"writeback_delay=0", "writeback_delay=0"},
      {"writeback_delay=-1", "writeback_delay=-1"},
      {"writeback_delay=nan", "writeback_delay=nan"},
      {"commit_interval=inf", "commit_interval=inf"},
      {"io_threads=0", "io_threads"},
      {"io_threads=257", "io_threads"},
      {"cache_size=8M", "cache_size=8M"},
      {"cache_size=lots", "cache_size=lots"},
      {"readahead=2G", "readahead=2G"},
      {"readahead=x", "readahead=x"},
      {"write_hole=ajar", "write_hole=ajar"},
      {"killpriv=v3", "killpriv=v3"},
      {"backend=dax", "backend=dax"},
      {"max_read_errors=-1", "max_read_errors=4294967295"},
  };
  for (const Case& c : cases) {
    SCOPED_TRACE(c.option);
    const Error e = refusal({"stripefs", "-o", c.option, "s", "/m"});
    EXPECT_EQ(e.code, kBadValue);
    EXPECT_NE(e.message.find(c.named), std::string::npos) << e.message;
    EXPECT_EQ(e.message.find('\n'), std::string::npos);
  }
}

TEST(MountOptions, UsageErrors) {
  EXPECT_EQ(refusal({"stripefs", "/mnt"}).code, kMissingArgs);
  EXPECT_EQ(refusal({"stripefs"}).code, kMissingArgs);
  // A number the parser cannot read is the parser's refusal.
  const Error e = refusal({"stripefs", "-o", "writeback_delay=soon", "s", "/m"});
  EXPECT_EQ(e.code, kBadSyntax);
  EXPECT_NE(e.message.find("bad options"), std::string::npos) << e.message;
  // (fuse_opt reads -1 as a huge unsigned number: out of range, not unreadable.)
  EXPECT_EQ(refusal({"stripefs", "-o", "io_threads=-1", "s", "/m"}).code, kBadValue);
}

TEST(MountOptions, UsageNamesEveryOption) {
  const std::string usage = mount_usage();
  for (const char* name : {"journal_device=",
                           "backend=",
                           "write_hole=",
                           "killpriv=",
                           "writeback_delay=",
                           "commit_interval=",
                           "cache_size=",
                           "io_threads=",
                           "readahead=",
                           "writeback_cache",
                           "direct_io",
                           "force",
                           "max_read_errors=",
                           "fsname=",
                           "subtype=",
                           "acl",
                           "noacl",
                           "-f",
                           "-d",
                           "-s"}) {
    EXPECT_NE(usage.find(name), std::string::npos) << name;
  }
}

TEST(MountOptions, DefaultThreadsAreOnePerCpuWithinBounds) {
  EXPECT_EQ(io_threads_for(0), 2u);
  EXPECT_EQ(io_threads_for(1), 2u);
  EXPECT_EQ(io_threads_for(2), 2u);
  EXPECT_EQ(io_threads_for(6), 6u);
  EXPECT_EQ(io_threads_for(16), 16u);
  EXPECT_EQ(io_threads_for(64), 16u);
  cpu_set_t cpus;
  ASSERT_EQ(sched_getaffinity(0, sizeof(cpus), &cpus), 0);
  EXPECT_EQ(default_io_threads(), io_threads_for(static_cast<unsigned>(CPU_COUNT(&cpus))));
}

}  // namespace
}  // namespace stripefs::fs
