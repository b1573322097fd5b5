#include "mounted/array_check.hpp"

#include <cstdio>

#include "journal/open_array.hpp"
#include "raid/array.hpp"
#include "raid/level.hpp"
#include "raid/member_devices.hpp"
#include "raid/superblock.hpp"

namespace stripefs::test {

std::expected<uint64_t, std::string> inconsistent_stripes(
    const std::vector<std::filesystem::path>& members) {
  std::vector<std::string> paths;
  for (const auto& m : members) paths.push_back(m.string());
  auto devices = open_devices(paths, "");
  if (!devices) return std::unexpected(devices.error().message);
  ArraySetup setup;  // the members' write-hole journal, if any
  setup.engine = (*devices)->engine.get();
  auto pointers = (*devices)->member_pointers();
  auto array = open_array(pointers, setup);
  if (!array) return std::unexpected(array.error().message);
  (*array)->wait_resync();
  Volume& volume = (*array)->volume();
  if (const unsigned missing = volume.missing_members(); missing > 0) {
    // Degraded, the count covers only the redundancy left: not what the callers ask.
    (void)array->close();
    return std::unexpected(std::to_string(missing) + " member(s) out of service");
  }
  auto bad = volume.count_inconsistent_stripes(0, volume.geometry().stripes());
  if (auto closed = array->close(); !closed) return std::unexpected(closed.error().message);
  if (!bad) return std::unexpected(bad.error().message);
  return *bad;
}

std::expected<std::pair<uint64_t, uint64_t>, std::string> member_journal_area(
    const std::filesystem::path& member) {
  auto devices = open_devices({member.string()}, "");
  if (!devices) return std::unexpected(devices.error().message);
  auto sb = read_superblock(*(*devices)->members[0]);
  if (!sb) return std::unexpected(sb.error().message);
  if (!is_zero(sb->journal_device_uuid)) return std::pair<uint64_t, uint64_t>{0, 0};
  return std::pair<uint64_t, uint64_t>{sb->journal_offset, sb->journal_size};
}

std::expected<std::string, std::string> member_array_uuid(const std::filesystem::path& member) {
  auto devices = open_devices({member.string()}, "");
  if (!devices) return std::unexpected(devices.error().message);
  auto sb = read_superblock(*(*devices)->members[0]);
  if (!sb) return std::unexpected(sb.error().message);
  return format_uuid(sb->array_uuid);
}

std::expected<uint64_t, std::string> member_data_offset(const std::filesystem::path& member) {
  auto devices = open_devices({member.string()}, "");
  if (!devices) return std::unexpected(devices.error().message);
  auto sb = read_superblock(*(*devices)->members[0]);
  if (!sb) return std::unexpected(sb.error().message);
  return sb->data_offset;
}

std::expected<std::vector<MemberPlace>, std::string> volume_places(
    const std::vector<std::filesystem::path>& members, uint64_t offset) {
  std::vector<std::string> paths;
  for (const auto& m : members) paths.push_back(m.string());
  auto devices = open_devices(paths, "");
  if (!devices) return std::unexpected(devices.error().message);
  auto sb = read_superblock(*(*devices)->members[0]);
  if (!sb) return std::unexpected(sb.error().message);
  ArraySetup setup;
  setup.engine = (*devices)->engine.get();
  auto pointers = (*devices)->member_pointers();
  auto array = open_array(pointers, setup);
  if (!array) return std::unexpected(array.error().message);
  const Geometry g = (*array)->volume().geometry();
  if (auto closed = array->close(); !closed) return std::unexpected(closed.error().message);
  if (offset >= g.stripes() * g.stripe_data_size()) return std::unexpected("past the volume");
  const uint64_t stripe = offset / g.stripe_data_size();
  const auto index = static_cast<unsigned>(offset % g.stripe_data_size() / g.chunk_size());
  std::vector<ChunkLocation> copies;
  Level::create(g)->write_targets(
      stripe, index, [](unsigned) { return true; }, copies);
  std::vector<MemberPlace> places;
  for (const ChunkLocation& c : copies) {
    places.push_back({c.member, sb->data_offset + c.member_offset + offset % g.chunk_size()});
  }
  return places;
}

std::expected<nlohmann::json, std::string> daemon_query(const std::string& mountpoint,
                                                        const std::string& command) {
  std::string ctl = STRIPEFSCTL_PATH;
  if (const char* env = std::getenv("STRIPEFSCTL_PATH")) ctl = env;
  const std::string line = ctl + " --json " + command + " '" + mountpoint + "' 2>&1";
  FILE* pipe = popen(line.c_str(), "r");
  if (pipe == nullptr) return std::unexpected("cannot run " + ctl);
  std::string out;
  char buffer[4096];
  size_t n;
  while ((n = fread(buffer, 1, sizeof(buffer), pipe)) > 0) out.append(buffer, n);
  const int status = pclose(pipe);
  if (status != 0) return std::unexpected(line + ": " + out);
  try {
    return nlohmann::json::parse(out);
  } catch (const nlohmann::json::exception& e) {
    return std::unexpected(line + ": not JSON: " + out);
  }
}

}  // namespace stripefs::test
