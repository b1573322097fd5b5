// Directory listings: large directories, listings that change while being read, and the
// positions telldir and seekdir hand out.
#include <dirent.h>
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cstdio>
#include <map>
#include <random>
#include <set>

#include "mounted/mounted_fixture.hpp"

namespace stripefs::test {
namespace {

class Readdir : public MountedTest {
 protected:
  // Creates count empty files dir/f00000, dir/f00001, ...
  void create_files(const std::string& dir, int count, const char* prefix = "f") {
    for (int i = 0; i < count; ++i) {
      Fd fd = open_file(dir + "/" + name(prefix, i), O_WRONLY | O_CREAT | O_EXCL);
      ASSERT_TRUE(fd.valid());
    }
  }
  static std::string name(const char* prefix, int i) {
    char buffer[32];
    std::snprintf(buffer, sizeof(buffer), "%s%05d", prefix, i);
    return buffer;
  }
};

// A DIR* that closes itself.
class Dir {
 public:
  explicit Dir(const std::string& path) : dir_(opendir(path.c_str())) {
    if (!dir_) ADD_FAILURE() << "opendir " << path << ": " << errno_name(errno);
  }
  ~Dir() {
    if (dir_) closedir(dir_);
  }
  Dir(const Dir&) = delete;
  Dir& operator=(const Dir&) = delete;
  DIR* get() const { return dir_; }
  // The next name, or "" at the end (a readdir error fails the test).
  std::string next() {
    errno = 0;
    const dirent* entry = readdir(dir_);
    if (!entry) {
      if (errno != 0) ADD_FAILURE() << "readdir: " << errno_name(errno);
      return {};
    }
    return entry->d_name;
  }

 private:
  DIR* dir_;
};

TEST_F(Readdir, EmptyDirectoryHoldsDotAndDotDot) {
  ASSERT_SYS(mkdir(path("empty").c_str(), 0755));
  const auto names = list_dir(path("empty"));
  EXPECT_EQ(std::multiset<std::string>(names.begin(), names.end()),
            (std::multiset<std::string>{".", ".."}));
}

TEST_F(Readdir, EveryOneOf5000EntriesAppearsOnce) {
  constexpr int kFiles = 5000;
  const std::string dir = path("big");
  ASSERT_SYS(mkdir(dir.c_str(), 0755));
  ASSERT_NO_FATAL_FAILURE(create_files(dir, kFiles));
  for (int i = 0; i < 3; ++i) ASSERT_SYS(mkdir((dir + "/" + name("d", i)).c_str(), 0755));

  std::map<std::string, int> seen;
  std::map<std::string, std::pair<ino_t, unsigned char>> entries;
  DIR* handle = opendir(dir.c_str());
  ASSERT_NE(handle, nullptr) << errno_name(errno);
  errno = 0;
  while (const dirent* entry = readdir(handle)) {
    ++seen[entry->d_name];
    entries[entry->d_name] = {entry->d_ino, entry->d_type};
  }
  EXPECT_EQ(errno, 0) << "readdir: " << errno_name(errno);
  closedir(handle);

  EXPECT_EQ(seen.size(), static_cast<size_t>(kFiles + 3 + 2));
  EXPECT_EQ(seen["."], 1);
  EXPECT_EQ(seen[".."], 1);
  for (int i = 0; i < kFiles; ++i) EXPECT_EQ(seen[name("f", i)], 1) << name("f", i);
  for (int i = 0; i < 3; ++i) EXPECT_EQ(seen[name("d", i)], 1) << name("d", i);

  // d_type may be DT_UNKNOWN, but if given it must be right; d_ino is the file's st_ino.
  for (int i = 0; i < kFiles; i += 97) {
    const auto& [ino, type] = entries[name("f", i)];
    EXPECT_TRUE(type == DT_REG || type == DT_UNKNOWN) << name("f", i) << " " << int{type};
    EXPECT_EQ(ino, stat_of(dir + "/" + name("f", i)).st_ino) << name("f", i);
  }
  const unsigned char dir_type = entries[name("d", 0)].second;
  EXPECT_TRUE(dir_type == DT_DIR || dir_type == DT_UNKNOWN) << int{dir_type};
}

// POSIX: an entry removed or added after opendir may or may not be returned, but every other
// entry is returned exactly once.
TEST_F(Readdir, ChangesDuringAListingSpareTheUntouchedEntries) {
  constexpr int kFiles = 2000;
  const std::string dir = path("churn");
  ASSERT_SYS(mkdir(dir.c_str(), 0755));
  ASSERT_NO_FATAL_FAILURE(create_files(dir, kFiles));

  std::set<std::string> remaining;  // original entries not removed so far
  for (int i = 0; i < kFiles; ++i) remaining.insert(name("f", i));
  std::set<std::string> removed;
  std::set<std::string> added;
  std::map<std::string, int> seen;
  std::mt19937_64 rng(7);
  int next_new = 0;

  Dir listing(dir);
  ASSERT_NE(listing.get(), nullptr);
  for (int read = 1;; ++read) {
    const std::string entry = listing.next();
    if (entry.empty()) break;
    ++seen[entry];
    // Every 64 entries: remove 16 originals (read or not yet read) and add 8 new files.
    if (read % 64 != 0) continue;
    for (int i = 0; i < 16 && !remaining.empty(); ++i) {
      auto victim = remaining.begin();
      std::advance(victim, static_cast<long>(rng() % remaining.size()));
      ASSERT_SYS(unlink((dir + "/" + *victim).c_str()));
      removed.insert(*victim);
      remaining.erase(victim);
    }
    for (int i = 0; i < 8; ++i) {
      const std::string fresh = name("new", next_new++);
      Fd fd = open_file(dir + "/" + fresh, O_WRONLY | O_CREAT | O_EXCL);
      ASSERT_TRUE(fd.valid());
      added.insert(fresh);
    }
  }
  EXPECT_GT(removed.size(), 100u) << "the listing should have seen real churn";

  EXPECT_EQ(seen["."], 1);
  EXPECT_EQ(seen[".."], 1);
  for (const auto& untouched : remaining) EXPECT_EQ(seen[untouched], 1) << untouched;
  for (const auto& [entry, count] : seen) {
    EXPECT_LE(count, 1) << entry << " returned " << count << " times";
    const bool known = entry == "." || entry == ".." || remaining.contains(entry) ||
                       removed.contains(entry) || added.contains(entry);
    EXPECT_TRUE(known) << "readdir returned " << entry << ", which never existed";
  }

  // Afterwards, a fresh listing is exactly what is there.
  const auto after = list_dir(dir);
  std::set<std::string> want = remaining;
  want.insert(added.begin(), added.end());
  want.insert(".");
  want.insert("..");
  EXPECT_EQ(after.size(), want.size());
  EXPECT_EQ(std::set<std::string>(after.begin(), after.end()), want);
}

TEST_F(Readdir, RewinddirAndSeekdirRepeatTheListing) {
  constexpr int kFiles = 1500;  // enough for several getdents calls
  const std::string dir = path("seek");
  ASSERT_SYS(mkdir(dir.c_str(), 0755));
  ASSERT_NO_FATAL_FAILURE(create_files(dir, kFiles));

  Dir listing(dir);
  ASSERT_NE(listing.get(), nullptr);
  std::vector<std::string> first;
  long middle = -1;
  for (std::string entry = listing.next(); !entry.empty(); entry = listing.next()) {
    first.push_back(entry);
    if (first.size() == 700) middle = telldir(listing.get());
  }
  ASSERT_EQ(first.size(), static_cast<size_t>(kFiles + 2));
  ASSERT_NE(middle, -1);

  rewinddir(listing.get());
  std::vector<std::string> second;
  for (std::string entry = listing.next(); !entry.empty(); entry = listing.next()) {
    second.push_back(entry);
  }
  EXPECT_EQ(second, first);

  seekdir(listing.get(), middle);
  std::vector<std::string> rest;
  for (std::string entry = listing.next(); !entry.empty(); entry = listing.next()) {
    rest.push_back(entry);
  }
  EXPECT_EQ(rest, std::vector<std::string>(first.begin() + 700, first.end()));
}

}  // namespace
}  // namespace stripefs::test
