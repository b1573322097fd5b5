// fsck.stripefs: checks an unmounted stripefs filesystem and its array, and with -y or -p
// repairs what it can, as e2fsck does for ext4 (fs/check/check.hpp has the passes). Exit
// codes are e2fsck's, so that fsck(8), fstab's pass field and scripts read them as they read
// any other: 0 nothing wrong, 1 errors corrected, 4 errors left, 8 operational error, 16
// usage error.
//
// A check without -y/-p writes nothing: the array is assembled, not opened (no journal
// replayed onto the members, no superblock bumped), and the filesystem's journal is read
// through, not replayed.
#include <unistd.h>

#include <CLI/CLI.hpp>
#include <algorithm>
#include <cstdio>
#include <string>
#include <vector>

#include "fs/check/check.hpp"
#include "journal/open_array.hpp"
#include "raid/assembly.hpp"
#include "raid/member_devices.hpp"

namespace {

using namespace stripefs;

// e2fsck's exit codes this program decides itself (0 and 1 come from the report too).
constexpr int kUncorrected = 4, kOperational = 8, kUsage = 16;

int operational(const std::string& message) {
  std::fprintf(stderr, "fsck.stripefs: %s\n", message.c_str());
  return kOperational;
}

// The stripes whose redundancy disagrees (--parity): RAID6 and three-copy mirrors name the
// bad chunk, which a repair rewrites; the others are reported.
Result<std::vector<fs::Finding>> check_parity(Volume& volume, bool repair) {
  std::vector<fs::Finding> findings;
  if (volume.geometry().level() == RaidLevel::raid0) return findings;
  if (const unsigned missing = volume.missing_members(); missing > 0) {
    std::printf("note: %u member(s) missing: the parity is not checked\n", missing);
    return findings;
  }
  Volume::ScrubCounts counts;
  if (auto r = volume.scrub_stripes(0, volume.geometry().stripes(), repair, counts); !r) {
    return fail(r.error());
  }
  if (const uint64_t named = counts.bad_data + counts.bad_parity; named > 0) {
    findings.push_back(
        {fmt::format("array: {} chunks disagreed with their stripes' redundancy "
                     "and were named bad ({} data, {} parity){}",
                     named, counts.bad_data, counts.bad_parity, repair ? "; rewritten" : ""),
         repair});
  }
  if (counts.unrepairable > 0) {
    findings.push_back({fmt::format("array: {} stripes disagree with their redundancy and no chunk "
                                    "can be named bad (the log names them)",
                                    counts.unrepairable),
                        false});
  }
  return findings;
}

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{"Check (and repair) an unmounted stripefs filesystem and its array",
               "fsck.stripefs"};
  bool no = false, yes = false, preen = false, preen_a = false, force = false, data = false,
       parity = false, verbose = false;
  std::string journal_device;
  std::vector<std::string> sources;
  app.add_flag("-n,--no", no, "check only: change nothing (the default)");
  app.add_flag("-y,--yes", yes, "repair everything that can be repaired");
  app.add_flag("-p,--preen", preen, "repair what can be repaired, printing only the problems");
  app.add_flag("-a", preen_a, "the same as -p");
  app.add_flag("-f,--force", force, "check even a filesystem that was cleanly unmounted");
  app.add_flag("-c,--data", data,
               "read every block of file data and check it against its checksum");
  app.add_flag("--parity", parity, "check every stripe's parity or mirror copies too");
  app.add_flag("-v,--verbose", verbose, "print each pass as it starts");
  app.add_option("-j,--journal-device", journal_device,
                 "the array's separate write-hole journal device, if it has one");
  app.add_option("source", sources,
                 "the member devices: a:b:c, or apart, or UUID=array-uuid (as the mount takes "
                 "them)")
      ->required();
  try {
    app.parse(argc, argv);
  } catch (const CLI::CallForHelp& e) {
    return app.exit(e);
  } catch (const CLI::ParseError& e) {
    std::fprintf(stderr, "fsck.stripefs: %s (see fsck.stripefs --help)\n", e.what());
    return kUsage;
  }
  preen = preen || preen_a;
  if (no && (yes || preen)) {
    std::fprintf(stderr, "fsck.stripefs: -n and %s exclude each other\n", yes ? "-y" : "-p");
    return kUsage;
  }
  const bool repair = yes || preen;

  std::vector<std::string> paths;
  if (const auto uuid = source_array_uuid(sources)) {
    auto found = find_array_members(*uuid);
    if (!found) return operational(found.error().message);
    paths = *found;
  } else {
    paths = split_device_list(sources);
  }
  if (paths.empty()) {
    std::fprintf(stderr, "fsck.stripefs: no member device given\n");
    return kUsage;
  }
  const std::string name = paths.front();
  auto devices = open_devices(paths, journal_device);
  if (!devices) return operational(devices.error().message);
  auto members = (*devices)->member_pointers();

  std::vector<fs::Finding> array_findings;
  // What the assembly says of the members (one missing, stale, damaged): printed, not counted
  // against the filesystem, which a degraded array serves as well (stripefsctl mends it).
  std::vector<std::string> notes;
  std::unique_ptr<Volume> assembled;
  OpenedArray opened;
  Volume* volume = nullptr;
  if (repair) {
    ArraySetup setup;
    setup.journal_device = (*devices)->journal.get();
    setup.engine = (*devices)->engine.get();
    auto array = open_array(members, setup);
    if (!array) return operational(array.error().message);
    opened = std::move(*array);
    notes = opened->notes();
    volume = &opened->volume();
  } else {
    auto assembly = assemble(members);
    if (!assembly) return operational(assembly.error().message);
    notes = assembly->notes;
    const Superblock& sb = assembly->superblock;
    auto geometry =
        Geometry::create(sb.level, sb.member_count, sb.chunk_size, sb.data_size, sb.layout);
    if (!geometry) return operational(geometry.error().message);
    auto made = Volume::create(*geometry, assembly->by_role, sb.data_offset);
    if (!made) return operational(made.error().message);
    if ((*made)->failed()) {
      return operational(fmt::format("{} of {} members missing; the array cannot start",
                                     (*made)->missing_members(), sb.member_count));
    }
    assembled = std::move(*made);
    // A read error is not healed here (that writes the member): the member is taken out of
    // service in memory, and the check goes on from redundancy.
    assembled->set_read_error_policy(0, nullptr);
    volume = assembled.get();
  }

  if (!preen) std::printf("fsck.stripefs %s: %s\n", STRIPEFS_VERSION, name.c_str());
  for (const std::string& note : notes) {
    std::printf("%s: note: array: %s\n", name.c_str(), note.c_str());
  }
  fs::CheckOptions options;
  options.repair = repair;
  options.force = force || parity || data;
  options.data = data;
  const bool bar = !preen && isatty(STDERR_FILENO) != 0;
  options.progress = [&](const std::string& pass, uint64_t done, uint64_t total) {
    if (done == 0 && (verbose || (!preen && !bar))) std::printf("%s\n", pass.c_str());
    if (bar && total > 0) {
      std::fprintf(stderr, "\r%s: %3llu%%", pass.c_str(),
                   static_cast<unsigned long long>(done * 100 / total));
    }
  };
  if (preen) {
    // Preening makes only the repairs that lose nothing (Finding::safe): a check first, and
    // the repairs only when every problem it found is of that kind.
    fs::CheckOptions look = options;
    look.repair = false;
    auto first = fs::check_filesystem(*volume, look);
    if (!first) return operational(first.error().message);
    const bool unsafe = std::any_of(first->findings.begin(), first->findings.end(),
                                    [](const fs::Finding& f) { return !f.safe; });
    if (unsafe) {
      for (const fs::Finding& f : first->findings) {
        std::printf("%s: %s\n", name.c_str(), f.what.c_str());
      }
      std::printf("%s: UNEXPECTED INCONSISTENCY; RUN fsck.stripefs -y (without -a or -p)\n",
                  name.c_str());
      if (opened.get() != nullptr) (void)opened.close();
      return kUncorrected;
    }
  }
  auto report = fs::check_filesystem(*volume, options);
  if (bar) std::fprintf(stderr, "\r\033[K");
  if (!report) return operational(report.error().message);
  if (parity && opened.get() != nullptr) {
    // The resync an unclean array started must not be taken for damage.
    if (auto p = opened->wait_resync(); p.error) return operational(p.error->message);
  }
  if (parity) {
    auto found = check_parity(*volume, repair);
    if (!found) return operational(found.error().message);
    array_findings.insert(array_findings.end(), found->begin(), found->end());
  }
  report->findings.insert(report->findings.begin(), array_findings.begin(), array_findings.end());
  for (const fs::Finding& f : report->findings)
    std::printf("%s: %s\n", name.c_str(), f.what.c_str());
  if (!report->checked && report->findings.empty()) {
    std::printf("%s: clean, %llu/%llu files, %llu/%llu blocks\n", name.c_str(),
                static_cast<unsigned long long>(report->inodes_used),
                static_cast<unsigned long long>(report->inodes),
                static_cast<unsigned long long>(report->blocks_used),
                static_cast<unsigned long long>(report->blocks));
  } else {
    std::printf(
        "%s: %llu/%llu files (%llu directories), %llu/%llu blocks%s\n", name.c_str(),
        static_cast<unsigned long long>(report->inodes_used),
        static_cast<unsigned long long>(report->inodes),
        static_cast<unsigned long long>(report->directories),
        static_cast<unsigned long long>(report->blocks_used),
        static_cast<unsigned long long>(report->blocks),
        data ? fmt::format(", {} data blocks checked", report->data_blocks_checked).c_str() : "");
  }
  if (opened.get() != nullptr) {
    if (auto r = opened.close(); !r) return operational(r.error().message);
  }
  const int code = report->exit_code();
  if (report->fixed() > 0) std::printf("%s: ***** FILESYSTEM WAS MODIFIED *****\n", name.c_str());
  if (code == kUncorrected) {
    std::printf("%s: %llu problem(s) left as they are%s\n", name.c_str(),
                static_cast<unsigned long long>(report->unfixed()),
                repair ? "" : "; run fsck.stripefs -y to repair what can be");
  }
  return code;
}
