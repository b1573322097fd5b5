// Looking at the array under an unmounted filesystem, and at a mounted daemon's statistics.
#pragma once
#include <filesystem>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "mounted/mounted_fs.hpp"

namespace stripefs::test {

// Opens the array on `members` (bitmap in use) and counts stripes whose parity does not
// match their data, over the whole array. Fails when the array cannot be opened.
std::expected<uint64_t, std::string> inconsistent_stripes(
    const std::vector<std::filesystem::path>& members);

// The byte range [offset, offset + size) of the write-hole journal on each member, as the
// first member's superblock records it ({0, 0}: none, or on a separate device).
std::expected<std::pair<uint64_t, uint64_t>, std::string> member_journal_area(
    const std::filesystem::path& member);

// The UUID of the array `member` belongs to, as its superblock records it (8-4-4-4-12).
std::expected<std::string, std::string> member_array_uuid(const std::filesystem::path& member);

// Where the data area starts on `member` (bytes), as its superblock records it.
std::expected<uint64_t, std::string> member_data_offset(const std::filesystem::path& member);

// Where volume byte `offset` lives on `members` (unmounted): every copy of its chunk (a
// parity level: the data chunk), each as the member's index and the byte in the member file.
struct MemberPlace {
  unsigned member;
  uint64_t offset;
};
std::expected<std::vector<MemberPlace>, std::string> volume_places(
    const std::vector<std::filesystem::path>& members, uint64_t offset);

// The daemon's `stripefsctl --json stats` (or status) for the filesystem mounted at `mountpoint`.
std::expected<nlohmann::json, std::string> daemon_query(const std::string& mountpoint,
                                                        const std::string& command);

}  // namespace stripefs::test
