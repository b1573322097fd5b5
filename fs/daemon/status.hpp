// What the control socket reports about a mounted filesystem, as JSON.
#pragma once
#include <nlohmann/json.hpp>
#include <string>
#include "fs/core/filesystem.hpp"
#include "raid/array.hpp"

namespace stripefs::fs {

// The array (level, members and their state, resync) and the filesystem (usage).
nlohmann::json status_json(Array& array, Filesystem& fs, const std::string& mountpoint);
// I/O statistics: the volume's full/partial stripe counts, the buffer cache, the journal.
nlohmann::json stats_json(Array& array, Filesystem& fs);
// The control socket's path for a filesystem.
std::string control_socket_path(const Uuid& fs_uuid);

}  // namespace stripefs::fs
