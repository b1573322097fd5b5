// mkfs.stripefs: creates an array on the given devices and an empty filesystem on it.
//
// Every check runs before the first byte is written: a device holding another array or a
// known signature (libblkid), too few devices for the level, sizes that differ by more than
// kSizeTolerance, a bad chunk size, a journal device too small, a volume too small for the
// filesystem. Each refusal is one line naming what is wrong. With -f, signatures are wiped
// only after all of them passed.
#include <charconv>

#include <CLI/CLI.hpp>
#include <cstdio>
#include <optional>
#include <string>
#include <vector>

#include "fs/core/make_fs.hpp"
#include "fs/daemon/device_check.hpp"
#include "journal/array_bitmap.hpp"
#include "journal/array_journal.hpp"
#include "journal/journal.hpp"
#include "journal/open_array.hpp"
#include "raid/array.hpp"
#include "raid/level.hpp"
#include "raid/member_devices.hpp"
#include "raid/superblock.hpp"
#include "raid/units.hpp"

namespace {

using namespace stripefs;

constexpr double kSizeTolerance = 0.01;  // members may differ by 1% of the largest

int refuse(const std::string& message) {
  std::fprintf(stderr, "mkfs.stripefs: %s\n", message.c_str());
  return 1;
}

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{"Create a stripefs array and filesystem", "mkfs.stripefs"};
  std::string level_text, chunk_text = "512K", bitmap_chunk_text, journal_size_text, journal_device,
                          label, uuid_text, write_journal_text, backend_text = "auto";
  unsigned count = 0;
  uint64_t inodes = 0;
  bool force = false, quiet = false;
  std::vector<std::string> device_args;
  app.add_option("-l,--level", level_text, "RAID level: 0, 1, 10, 5 or 6")->required();
  app.add_option("-n,--raid-devices", count, "number of member devices")->required();
  app.add_option("-c,--chunk", chunk_text,
                 "chunk size, a power of two multiple of 4K (default 512K)");
  app.add_option("--bitmap-chunk", bitmap_chunk_text,
                 "write-intent bitmap region size (default: automatic)");
  app.add_option("--journal-size", journal_size_text,
                 "metadata journal size (default: 1/64 of the volume, 4M..128M)");
  app.add_option("--journal-device", journal_device,
                 "a separate device for the write-hole journal (RAID5/6)");
  app.add_option("--write-journal-size", write_journal_text,
                 "write-hole journal kept on the first members (RAID5/6; default: 1/64 of a "
                 "member within 16M..64M; 0: none, the write hole stays open)");
  app.add_option("-L,--label", label, "filesystem and array label (up to 32 bytes)");
  app.add_option("-U,--uuid", uuid_text, "filesystem UUID (default: random)");
  // Checked as text: CLI11 reads "-1" into an unsigned as 2^64 - 1.
  app.add_option("-N,--inodes", inodes, "number of inodes, 16 to 2^32 (default: one per 16K)")
      ->check([](const std::string& text) -> std::string {
        uint64_t n = 0;
        auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), n);
        if (ec != std::errc{} || end != text.data() + text.size() || n < 16 ||
            n > (uint64_t{1} << 32)) {
          return "'" + text + "' is not a number from 16 to 4294967296";
        }
        return {};
      });
  bool no_checksums = false;
  app.add_flag("--no-checksums", no_checksums,
               "keep no data checksums (format 1: overwrites in place, no self-healing reads)");
  app.add_option("--backend", backend_text,
                 "how devices are written: auto (default: pmem for DAX devices and DAX files), "
                 "block (io_uring, O_DIRECT) or pmem (libpmem2, also for an ordinary file)");
  app.add_flag("-f,--force", force, "overwrite devices that hold another array or filesystem");
  app.add_flag("-q,--quiet", quiet, "print nothing on success");
  app.add_option("devices", device_args, "member devices (or files), in role order")->required();
  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    if (e.get_exit_code() == 0) return app.exit(e);
    std::fprintf(stderr, "mkfs.stripefs: %s (see --help)\n", e.what());
    return 2;
  }

  // ---- every check first ----
  auto level = parse_raid_level(level_text);
  if (!level) return refuse(level.error().message);
  auto backend = parse_member_backend(backend_text);
  if (!backend) return refuse("--" + backend.error().message);
  const std::vector<std::string> paths = split_device_list(device_args);
  if (paths.size() != count) {
    return refuse(fmt::format("-n {} but {} devices given", count, paths.size()));
  }
  const unsigned minimum = Level::min_members(*level);
  if (count < minimum) {
    return refuse(
        fmt::format("{} needs at least {} devices, {} given", to_string(*level), minimum, count));
  }
  auto chunk = parse_size(chunk_text);
  if (!chunk || *chunk < 4096 || (*chunk & (*chunk - 1)) != 0 || *chunk > (1u << 30)) {
    return refuse(fmt::format("chunk size '{}' is not a power of two multiple of 4K", chunk_text));
  }
  uint64_t bitmap_chunk = 0;
  if (!bitmap_chunk_text.empty()) {
    auto size = parse_size(bitmap_chunk_text);
    if (!size || *size < *chunk || (*size & (*size - 1)) != 0) {
      return refuse(
          fmt::format("--bitmap-chunk '{}' must be a power of two of at least the chunk size",
                      bitmap_chunk_text));
    }
    bitmap_chunk = *size;
  }
  fs::MakeFsOptions make;
  make.label = label;
  make.inode_count = inodes;
  make.checksums = !no_checksums;
  if (label.size() > kLabelSize)
    return refuse(fmt::format("label longer than {} bytes", kLabelSize));
  if (!uuid_text.empty()) {
    auto uuid = parse_uuid(uuid_text);
    if (!uuid) return refuse(fmt::format("-U {}: {}", uuid_text, uuid.error().message));
    make.uuid = *uuid;
  }
  if (!journal_size_text.empty()) {
    auto size = parse_size(journal_size_text);
    if (!size || *size < (1u << 20) || *size % 4096 != 0) {
      return refuse(
          fmt::format("--journal-size '{}' must be at least 1M, in 4K blocks", journal_size_text));
    }
    make.journal_blocks = *size / 4096;
  }
  const bool parity = *level == RaidLevel::raid5 || *level == RaidLevel::raid6;
  if (!journal_device.empty() && !parity) {
    return refuse("--journal-device closes the RAID5/6 write hole; this level has none");
  }
  std::optional<uint64_t> write_journal_bytes;  // unset: the default
  if (!write_journal_text.empty()) {
    auto size = parse_size(write_journal_text);
    if (!size || *size % 4096 != 0) {
      return refuse(
          fmt::format("--write-journal-size '{}' is not a size in 4K blocks", write_journal_text));
    }
    if (*size != 0 && !parity) {
      return refuse(
          "--write-journal-size: a write-hole journal closes the RAID5/6 write hole; "
          "this level has none");
    }
    if (*size != 0 && !journal_device.empty()) {
      return refuse(
          "--write-journal-size and --journal-device both place the write-hole "
          "journal; give one");
    }
    write_journal_bytes = *size;
  }
  std::vector<std::string> all = paths;
  if (!journal_device.empty()) all.push_back(journal_device);
  if (!force) {
    for (const std::string& p : all) {
      auto signature = fs::signature_of(p);
      if (!signature) return refuse(signature.error().message);
      if (!signature->empty()) {
        return refuse(fmt::format("{} holds {} (use -f to overwrite it)", p, *signature));
      }
    }
  }
  auto devices = open_devices(paths, journal_device, *backend);
  if (!devices) return refuse(devices.error().message);
  uint64_t smallest = UINT64_MAX, largest = 0;
  std::string smallest_path, largest_path;
  for (const auto& m : (*devices)->members) {
    if (m->size() < smallest) smallest = m->size(), smallest_path = m->name();
    if (m->size() > largest) largest = m->size(), largest_path = m->name();
  }
  if (!force &&
      static_cast<double>(largest - smallest) > kSizeTolerance * static_cast<double>(largest)) {
    return refuse(
        fmt::format("member sizes differ by more than 1%: {} is {}, {} is {} (use -f to use the "
                    "smallest size on every member)",
                    smallest_path, format_size(smallest), largest_path, format_size(largest)));
  }

  ArrayOptions options;
  options.level = *level;
  options.chunk_size = static_cast<uint32_t>(*chunk);
  options.label = label;
  options.force = force;
  add_bitmap(options, bitmap_chunk);
  if ((*devices)->journal) {
    Member& device = *(*devices)->journal;
    add_stripe_journal(options, device, 0, device.size() / kJournalBlockSize);
  } else if (parity && write_journal_bytes.value_or(1) != 0) {
    const uint64_t blocks =
        write_journal_bytes ? *write_journal_bytes / kJournalBlockSize
                            : default_member_journal_blocks(count, options.chunk_size, smallest);
    add_member_journal(options, blocks);
  }
  // Once the array's geometry is known, and after the bitmap's and journal's checks: the
  // filesystem must fit. Only when every check passed are old signatures wiped (-f), before
  // the first write.
  options.validate = [previous = std::move(options.validate), &make](
                         std::span<Member* const> members, const Superblock& sb) -> Result<void> {
    if (previous) {
      if (auto r = previous(members, sb); !r) return r;
    }
    auto geometry = Geometry::create(sb.level, sb.member_count, sb.chunk_size, sb.data_size);
    if (!geometry) return fail(geometry.error());
    const uint64_t stripe_blocks =
        std::max<uint64_t>(geometry->stripe_data_size() / fs::kBlockSize, 1);
    auto layout = fs::plan_layout(geometry->volume_size() / fs::kBlockSize,
                                  static_cast<uint32_t>(stripe_blocks), make);
    if (!layout) return fail(layout.error());
    return {};
  };
  options.prepare = [previous = std::move(options.prepare), &all, force](
                        std::span<Member* const> members, Superblock& sb) -> Result<void> {
    if (force) {
      for (const std::string& p : all) {
        if (auto r = fs::wipe_signatures(p); !r) return r;
      }
    }
    return previous ? previous(members, sb) : Result<void>{};
  };
  auto members = (*devices)->member_pointers();
  auto created = create_array(members, options);
  if (!created) return refuse(created.error().message);
  ArraySetup setup;
  setup.journal_device = (*devices)->journal.get();
  setup.engine = (*devices)->engine.get();
  auto array = open_array(members, setup);
  if (!array) return refuse(array.error().message);
  auto made = fs::make_filesystem((*array)->volume(), make);
  if (!made) return refuse(made.error().message);
  if (auto r = array->close(); !r) return refuse(r.error().message);
  if (!quiet) {
    std::printf("array %s: %s of %u members, chunk %s, %s usable\n",
                format_uuid(created->array_uuid).c_str(), std::string(to_string(*level)).c_str(),
                count, format_size(*chunk).c_str(),
                format_size(made->total_blocks * fs::kBlockSize).c_str());
    std::printf(
        "filesystem %s%s%s: %llu inodes, metadata journal %s, data from block %llu (stripe %u "
        "blocks), %s\n",
        format_uuid(made->uuid).c_str(), label.empty() ? "" : " label ", label.c_str(),
        static_cast<unsigned long long>(made->inode_count),
        format_size(made->journal_blocks * fs::kBlockSize).c_str(),
        static_cast<unsigned long long>(made->data_start), made->stripe_blocks,
        made->has_checksums() ? "data checksums" : "no data checksums");
    if (parity && created->journal_size == 0) {
      std::printf(
          "note: without a write-hole journal the RAID5/6 write hole is open; the write-intent "
          "bitmap limits resync after a crash\n");
    } else if (parity) {
      std::printf("write-hole journal: %s %s\n", format_size(created->journal_size).c_str(),
                  journal_device.empty() ? "on each of the first members (mirrored)"
                                         : ("on " + journal_device).c_str());
    }
  }
  return 0;
}
