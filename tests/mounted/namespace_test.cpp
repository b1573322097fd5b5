// Names: directories, unlink, rename and renameat2, hard links, symlinks, special files and
// the limits on name length.
#include <fcntl.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/sysmacros.h>
#include <sys/un.h>
#include <unistd.h>

#include <algorithm>
#include <cstring>

#include "mounted/mounted_fixture.hpp"

namespace stripefs::test {
namespace {

class Namespace : public MountedTest {};

int rename2(const std::string& from, const std::string& to, unsigned flags) {
  return static_cast<int>(
      syscall(SYS_renameat2, AT_FDCWD, from.c_str(), AT_FDCWD, to.c_str(), flags));
}

bool exists(const std::string& p) {
  struct stat st {};
  return lstat(p.c_str(), &st) == 0;
}

TEST_F(Namespace, MkdirAndRmdirReportEachError) {
  ASSERT_SYS(mkdir(path("d").c_str(), 0755));
  EXPECT_TRUE(S_ISDIR(stat_of(path("d")).st_mode));
  EXPECT_ERRNO(EEXIST, mkdir(path("d").c_str(), 0755));
  ASSERT_TRUE(write_file(path("f"), to_bytes("x")));
  EXPECT_ERRNO(EEXIST, mkdir(path("f").c_str(), 0755));
  EXPECT_ERRNO(ENOENT, mkdir(path("missing/d").c_str(), 0755));
  EXPECT_ERRNO(ENOTDIR, mkdir(path("f/d").c_str(), 0755));

  ASSERT_SYS(mkdir(path("d/sub").c_str(), 0755));
  EXPECT_ERRNO(ENOTEMPTY, rmdir(path("d").c_str()));
  EXPECT_ERRNO(ENOTDIR, rmdir(path("f").c_str()));
  EXPECT_ERRNO(ENOENT, rmdir(path("missing").c_str()));
  EXPECT_ERRNO(EINVAL, rmdir(path("d/sub/.").c_str()));
  ASSERT_SYS(rmdir(path("d/sub").c_str()));
  ASSERT_SYS(rmdir(path("d").c_str()));
  EXPECT_FALSE(exists(path("d")));

  // A file in a directory keeps it from being removed, as a subdirectory does.
  ASSERT_SYS(mkdir(path("e").c_str(), 0755));
  ASSERT_TRUE(write_file(path("e/file"), {}));
  EXPECT_ERRNO(ENOTEMPTY, rmdir(path("e").c_str()));
}

// The Unix convention tools such as find rely on: a directory's link count is 2 plus the
// number of its subdirectories.
TEST_F(Namespace, DirectoryLinkCountsFollowSubdirectories) {
  ASSERT_SYS(mkdir(path("p").c_str(), 0755));
  EXPECT_EQ(stat_of(path("p")).st_nlink, 2u);
  ASSERT_SYS(mkdir(path("p/a").c_str(), 0755));
  ASSERT_SYS(mkdir(path("p/b").c_str(), 0755));
  ASSERT_TRUE(write_file(path("p/file"), {}));
  EXPECT_EQ(stat_of(path("p")).st_nlink, 4u);
  EXPECT_EQ(stat_of(path("p/a")).st_nlink, 2u);
  ASSERT_SYS(rmdir(path("p/a").c_str()));
  EXPECT_EQ(stat_of(path("p")).st_nlink, 3u);
}

TEST_F(Namespace, UnlinkReportsEachError) {
  ASSERT_SYS(mkdir(path("d").c_str(), 0755));
  EXPECT_ERRNO(EISDIR, unlink(path("d").c_str()));
  EXPECT_ERRNO(ENOENT, unlink(path("missing").c_str()));
  ASSERT_TRUE(write_file(path("f"), to_bytes("x")));
  EXPECT_ERRNO(ENOTDIR, unlink(path("f/x").c_str()));
  ASSERT_SYS(unlink(path("f").c_str()));
  EXPECT_FALSE(exists(path("f")));
  EXPECT_ERRNO(ENOENT, unlink(path("f").c_str()));
}

TEST_F(Namespace, RenameReplacesAFileAtomically) {
  const Bytes data = random_bytes(10000, 1);
  ASSERT_TRUE(write_file(path("from"), data));
  ASSERT_TRUE(write_file(path("to"), to_bytes("old")));
  const ino_t from_ino = stat_of(path("from")).st_ino;
  Fd old_fd = open_file(path("to"), O_RDONLY);
  ASSERT_TRUE(old_fd.valid());

  ASSERT_SYS(rename(path("from").c_str(), path("to").c_str()));
  EXPECT_FALSE(exists(path("from")));
  EXPECT_EQ(stat_of(path("to")).st_ino, from_ino);
  EXPECT_TRUE(same_bytes(read_file(path("to")), data));
  // The replaced file lives on, nameless, for whoever has it open.
  EXPECT_EQ(fstat_of(old_fd.get()).st_nlink, 0u);
  EXPECT_TRUE(same_bytes(read_at(old_fd.get(), 0, 100), to_bytes("old")));
}

TEST_F(Namespace, RenameDirectoryOverEmptyDirectory) {
  ASSERT_SYS(mkdir(path("a").c_str(), 0755));
  ASSERT_TRUE(write_file(path("a/inside"), to_bytes("x")));
  ASSERT_SYS(mkdir(path("b").c_str(), 0755));
  const ino_t a_ino = stat_of(path("a")).st_ino;
  const nlink_t root_links = stat_of(path()).st_nlink;

  ASSERT_SYS(rename(path("a").c_str(), path("b").c_str()));
  EXPECT_FALSE(exists(path("a")));
  EXPECT_EQ(stat_of(path("b")).st_ino, a_ino);
  EXPECT_TRUE(same_bytes(read_file(path("b/inside")), to_bytes("x")));
  EXPECT_EQ(stat_of(path()).st_nlink, root_links - 1) << "one subdirectory fewer";
}

TEST_F(Namespace, RenameRefusesWhatPosixForbids) {
  ASSERT_SYS(mkdir(path("dir").c_str(), 0755));
  ASSERT_SYS(mkdir(path("full").c_str(), 0755));
  ASSERT_TRUE(write_file(path("full/x"), {}));
  ASSERT_SYS(mkdir(path("dir/sub").c_str(), 0755));
  ASSERT_TRUE(write_file(path("file"), to_bytes("f")));

  EXPECT_ERRNO(ENOTEMPTY, rename(path("dir").c_str(), path("full").c_str()));
  EXPECT_ERRNO(EISDIR, rename(path("file").c_str(), path("dir").c_str()));
  EXPECT_ERRNO(ENOTDIR, rename(path("dir").c_str(), path("file").c_str()));
  EXPECT_ERRNO(EINVAL, rename(path("dir").c_str(), path("dir/sub/moved").c_str()));
  EXPECT_ERRNO(EINVAL, rename(path("dir").c_str(), path("dir/moved").c_str()));
  EXPECT_ERRNO(ENOENT, rename(path("missing").c_str(), path("other").c_str()));
  EXPECT_ERRNO(ENOENT, rename(path("file").c_str(), path("missing/file").c_str()));
  EXPECT_ERRNO(ENOTDIR, rename(path("file").c_str(), path("file/x").c_str()));

  // Nothing moved.
  EXPECT_TRUE(exists(path("dir/sub")));
  EXPECT_TRUE(exists(path("full/x")));
  EXPECT_TRUE(same_bytes(read_file(path("file")), to_bytes("f")));
}

// POSIX: renaming one link of a file onto another link of the same file does nothing.
TEST_F(Namespace, RenameBetweenLinksOfOneFileChangesNothing) {
  ASSERT_TRUE(write_file(path("a"), to_bytes("x")));
  ASSERT_SYS(link(path("a").c_str(), path("b").c_str()));
  ASSERT_SYS(rename(path("a").c_str(), path("b").c_str()));
  EXPECT_TRUE(exists(path("a")));
  EXPECT_TRUE(exists(path("b")));
  EXPECT_EQ(stat_of(path("b")).st_nlink, 2u);
  ASSERT_SYS(rename(path("a").c_str(), path("a").c_str()));
  EXPECT_TRUE(exists(path("a")));
}

TEST_F(Namespace, RenameMovesADirectoryBetweenParents) {
  ASSERT_SYS(mkdir(path("p1").c_str(), 0755));
  ASSERT_SYS(mkdir(path("p2").c_str(), 0755));
  ASSERT_SYS(mkdir(path("p1/child").c_str(), 0755));
  ASSERT_TRUE(write_file(path("p1/child/file"), to_bytes("content")));

  ASSERT_SYS(rename(path("p1/child").c_str(), path("p2/moved").c_str()));
  EXPECT_EQ(stat_of(path("p2/moved/..")).st_ino, stat_of(path("p2")).st_ino);
  EXPECT_EQ(stat_of(path("p1")).st_nlink, 2u);
  EXPECT_EQ(stat_of(path("p2")).st_nlink, 3u);
  EXPECT_TRUE(same_bytes(read_file(path("p2/moved/file")), to_bytes("content")));
  EXPECT_EQ(list_dir(path("p1")).size(), 2u) << "only . and ..";
}

TEST_F(Namespace, RenameNoReplaceRefusesAnExistingTarget) {
  ASSERT_TRUE(write_file(path("a"), to_bytes("a")));
  ASSERT_TRUE(write_file(path("b"), to_bytes("b")));
  EXPECT_ERRNO(EEXIST, rename2(path("a"), path("b"), RENAME_NOREPLACE));
  EXPECT_TRUE(same_bytes(read_file(path("a")), to_bytes("a")));
  EXPECT_TRUE(same_bytes(read_file(path("b")), to_bytes("b")));

  ASSERT_SYS(rename2(path("a"), path("c"), RENAME_NOREPLACE));
  EXPECT_FALSE(exists(path("a")));
  EXPECT_TRUE(same_bytes(read_file(path("c")), to_bytes("a")));
}

TEST_F(Namespace, RenameExchangeSwapsTwoNames) {
  ASSERT_SYS(mkdir(path("p1").c_str(), 0755));
  ASSERT_SYS(mkdir(path("p2").c_str(), 0755));
  ASSERT_TRUE(write_file(path("p1/file"), to_bytes("file")));
  ASSERT_SYS(mkdir(path("p2/dir").c_str(), 0755));
  const ino_t file_ino = stat_of(path("p1/file")).st_ino;
  const ino_t dir_ino = stat_of(path("p2/dir")).st_ino;

  ASSERT_SYS(rename2(path("p1/file"), path("p2/dir"), RENAME_EXCHANGE));
  EXPECT_EQ(stat_of(path("p1/file")).st_ino, dir_ino);
  EXPECT_EQ(stat_of(path("p2/dir")).st_ino, file_ino);
  EXPECT_TRUE(S_ISDIR(stat_of(path("p1/file")).st_mode));
  EXPECT_TRUE(same_bytes(read_file(path("p2/dir")), to_bytes("file")));
  // The directory changed parents: its ".." and both link counts follow.
  EXPECT_EQ(stat_of(path("p1/file/..")).st_ino, stat_of(path("p1")).st_ino);
  EXPECT_EQ(stat_of(path("p1")).st_nlink, 3u);
  EXPECT_EQ(stat_of(path("p2")).st_nlink, 2u);

  EXPECT_ERRNO(ENOENT, rename2(path("p1/file"), path("p1/missing"), RENAME_EXCHANGE));
  EXPECT_ERRNO(EINVAL,
               rename2(path("p1/file"), path("p2/dir"), RENAME_EXCHANGE | RENAME_NOREPLACE));
}

TEST_F(Namespace, HardLinksShareOneInode) {
  const Bytes data = random_bytes(5000, 2);
  ASSERT_TRUE(write_file(path("original"), data));
  ASSERT_SYS(mkdir(path("d").c_str(), 0755));
  EXPECT_EQ(stat_of(path("original")).st_nlink, 1u);
  ASSERT_SYS(link(path("original").c_str(), path("second").c_str()));
  ASSERT_SYS(link(path("original").c_str(), path("d/third").c_str()));
  const struct stat st = stat_of(path("second"));
  EXPECT_EQ(st.st_ino, stat_of(path("original")).st_ino);
  EXPECT_EQ(st.st_ino, stat_of(path("d/third")).st_ino);
  EXPECT_EQ(stat_of(path("original")).st_nlink, 3u);

  // A write through one name is seen through every other.
  {
    Fd fd = open_file(path("d/third"), O_WRONLY);
    ASSERT_TRUE(fd.valid());
    ASSERT_TRUE(write_at(fd.get(), to_bytes("XYZ"), 10));
  }
  Bytes want = data;
  std::copy_n("XYZ", 3, want.begin() + 10);
  EXPECT_TRUE(same_bytes(read_file(path("second")), want));

  EXPECT_ERRNO(EEXIST, link(path("original").c_str(), path("second").c_str()));
  EXPECT_ERRNO(ENOENT, link(path("missing").c_str(), path("x").c_str()));
  EXPECT_ERRNO(EPERM, link(path("d").c_str(), path("dir-link").c_str()));

  // The data outlives the name it was written under.
  ASSERT_SYS(unlink(path("original").c_str()));
  EXPECT_EQ(stat_of(path("second")).st_nlink, 2u);
  ASSERT_SYS(unlink(path("d/third").c_str()));
  EXPECT_EQ(stat_of(path("second")).st_nlink, 1u);
  EXPECT_TRUE(same_bytes(read_file(path("second")), want));
}

TEST_F(Namespace, SymlinksStoreTheirTargetExactly) {
  for (size_t length : {size_t{1}, size_t{59}, size_t{60}, size_t{61}, size_t{500}, size_t{4095}}) {
    std::string target;
    for (size_t i = 0; target.size() < length; ++i) {
      target += (i % 16 == 15) ? '/' : static_cast<char>('a' + i % 26);
    }
    target.resize(length);
    const std::string link_path = path("link" + std::to_string(length));
    ASSERT_SYS(symlink(target.c_str(), link_path.c_str()));
    const struct stat st = lstat_of(link_path);
    EXPECT_TRUE(S_ISLNK(st.st_mode));
    EXPECT_EQ(st.st_mode & 07777, 0777u);
    EXPECT_EQ(st.st_size, static_cast<off_t>(length));
    std::string read_back(4096 + 1, '\0');
    const ssize_t n = readlink(link_path.c_str(), read_back.data(), read_back.size());
    ASSERT_EQ(n, static_cast<ssize_t>(length)) << errno_name(errno);
    read_back.resize(static_cast<size_t>(n));
    EXPECT_EQ(read_back, target) << "length " << length;
  }
  // readlink truncates to the buffer, without a terminating NUL.
  char small[4] = {'#', '#', '#', '#'};
  EXPECT_EQ(readlink(path("link500").c_str(), small, 3), 3);
  EXPECT_EQ(small[3], '#');

  const std::string too_long(4096, 'x');
  EXPECT_ERRNO(ENAMETOOLONG, symlink(too_long.c_str(), path("too-long").c_str()));
  ASSERT_TRUE(write_file(path("file"), to_bytes("x")));
  EXPECT_ERRNO(EEXIST, symlink("anything", path("file").c_str()));
  EXPECT_ERRNO(EINVAL, readlink(path("file").c_str(), small, sizeof(small)));
}

TEST_F(Namespace, SymlinksResolveAndFail) {
  ASSERT_SYS(mkdir(path("d").c_str(), 0755));
  ASSERT_TRUE(write_file(path("d/target"), to_bytes("through the link")));
  ASSERT_SYS(symlink("d/target", path("relative").c_str()));
  ASSERT_SYS(symlink(path("d").c_str(), path("absolute-dir").c_str()));
  ASSERT_SYS(symlink("nowhere", path("dangling").c_str()));
  ASSERT_SYS(symlink("loop-b", path("loop-a").c_str()));
  ASSERT_SYS(symlink("loop-a", path("loop-b").c_str()));

  EXPECT_EQ(stat_of(path("relative")).st_ino, stat_of(path("d/target")).st_ino);
  EXPECT_TRUE(same_bytes(read_file(path("relative")), to_bytes("through the link")));
  EXPECT_TRUE(same_bytes(read_file(path("absolute-dir/target")), to_bytes("through the link")));
  struct stat st {};
  EXPECT_ERRNO(ENOENT, stat(path("dangling").c_str(), &st));
  EXPECT_TRUE(S_ISLNK(lstat_of(path("dangling")).st_mode));
  EXPECT_ERRNO(ELOOP, stat(path("loop-a").c_str(), &st));
  EXPECT_ERRNO(ELOOP, open(path("relative").c_str(), O_RDONLY | O_NOFOLLOW));

  // Removing a link leaves its target alone.
  ASSERT_SYS(unlink(path("relative").c_str()));
  EXPECT_TRUE(exists(path("d/target")));
}

TEST_F(Namespace, SpecialFilesKeepTheirType) {
  if (geteuid() != 0) GTEST_SKIP() << "device nodes need root";
  ASSERT_SYS(mkfifo(path("fifo").c_str(), 0640));
  ASSERT_SYS(mknod(path("socket").c_str(), S_IFSOCK | 0600, 0));
  ASSERT_SYS(mknod(path("char").c_str(), S_IFCHR | 0600, makedev(1, 3)));
  ASSERT_SYS(mknod(path("block").c_str(), S_IFBLK | 0600, makedev(7, 200)));

  const struct stat fifo = lstat_of(path("fifo"));
  EXPECT_TRUE(S_ISFIFO(fifo.st_mode));
  EXPECT_EQ(fifo.st_mode & 07777, 0640u);
  EXPECT_TRUE(S_ISSOCK(lstat_of(path("socket")).st_mode));
  const struct stat chr = lstat_of(path("char"));
  EXPECT_TRUE(S_ISCHR(chr.st_mode));
  EXPECT_EQ(chr.st_rdev, makedev(1, 3));
  const struct stat blk = lstat_of(path("block"));
  EXPECT_TRUE(S_ISBLK(blk.st_mode));
  EXPECT_EQ(blk.st_rdev, makedev(7, 200));
  EXPECT_ERRNO(EEXIST, mkfifo(path("fifo").c_str(), 0600));

  // A FIFO on this filesystem is a working pipe.
  Fd pipe_fd = open_file(path("fifo"), O_RDWR | O_NONBLOCK);
  ASSERT_TRUE(pipe_fd.valid());
  ASSERT_EQ(write(pipe_fd.get(), "ping", 4), 4);
  char buffer[8] = {};
  EXPECT_EQ(read(pipe_fd.get(), buffer, sizeof(buffer)), 4);
  EXPECT_EQ(std::string(buffer, 4), "ping");
  EXPECT_EQ(stat_of(path("fifo")).st_size, 0);
}

TEST_F(Namespace, UnixSocketsBindAndConnect) {
  const std::string socket_path = path("listening");
  sockaddr_un address{};
  address.sun_family = AF_UNIX;
  if (socket_path.size() >= sizeof(address.sun_path)) {
    GTEST_SKIP() << socket_path << " is too long for a socket address";
  }
  std::memcpy(address.sun_path, socket_path.c_str(), socket_path.size() + 1);
  Fd server(socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0));
  Fd client(socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0));
  ASSERT_TRUE(server.valid() && client.valid());
  const auto* generic = reinterpret_cast<const sockaddr*>(&address);
  ASSERT_SYS(bind(server.get(), generic, sizeof(address)));
  ASSERT_SYS(listen(server.get(), 1));
  EXPECT_TRUE(S_ISSOCK(lstat_of(socket_path).st_mode));
  ASSERT_SYS(connect(client.get(), generic, sizeof(address)));
  Fd accepted(accept4(server.get(), nullptr, nullptr, SOCK_CLOEXEC));
  ASSERT_TRUE(accepted.valid());
  ASSERT_EQ(write(client.get(), "hi", 2), 2);
  char buffer[2] = {};
  EXPECT_EQ(read(accepted.get(), buffer, 2), 2);
  EXPECT_EQ(std::string(buffer, 2), "hi");
}

TEST_F(Namespace, NamesUpTo255BytesAndNoLonger) {
  const std::string longest(255, 'n');
  const std::string too_long(256, 'n');
  ASSERT_TRUE(write_file(path(longest), to_bytes("ok")));
  EXPECT_TRUE(same_bytes(read_file(path(longest)), to_bytes("ok")));
  const auto names = list_dir(path());
  EXPECT_EQ(std::count(names.begin(), names.end(), longest), 1);
  const std::string longest_dir(255, 'd');
  ASSERT_SYS(mkdir(path(longest_dir).c_str(), 0755));
  ASSERT_SYS(rename(path(longest).c_str(), path(longest_dir + "/" + longest).c_str()));
  EXPECT_TRUE(exists(path(longest_dir + "/" + longest)));

  ASSERT_TRUE(write_file(path("short"), to_bytes("x")));
  const std::string name = path(too_long);
  struct stat st {};
  EXPECT_ERRNO(ENAMETOOLONG, open(name.c_str(), O_RDWR | O_CREAT, 0644));
  EXPECT_ERRNO(ENAMETOOLONG, mkdir(name.c_str(), 0755));
  EXPECT_ERRNO(ENAMETOOLONG, stat(name.c_str(), &st));
  EXPECT_ERRNO(ENAMETOOLONG, symlink("short", name.c_str()));
  EXPECT_ERRNO(ENAMETOOLONG, link(path("short").c_str(), name.c_str()));
  EXPECT_ERRNO(ENAMETOOLONG, rename(path("short").c_str(), name.c_str()));
  EXPECT_ERRNO(ENAMETOOLONG, mkfifo(name.c_str(), 0644));
  EXPECT_TRUE(exists(path("short")));
}

}  // namespace
}  // namespace stripefs::test
