// What the control socket reports about a mounted filesystem, as JSON.
#pragma once
#include <nlohmann/json.hpp>
#include <string>
#include "fs/core/filesystem.hpp"
#include "fs/daemon/array_control.hpp"
#include "raid/array.hpp"
#include "raid/io_engine.hpp"

namespace stripefs::fs {

// What `status` answers: the array's state ("clean", "degraded", "rebuilding", "resyncing",
// "failed"), members[] (role, path, state, error and I/O counts; spares and removed members
// with role null), the running task (kind, role, done, total, rate, eta_seconds: member bytes
// and seconds) or null, the action line (what to do next, as zpool status says), and the
// details under "array" and "filesystem". `control` (may be null) adds the spares.
nlohmann::json status_json(Array& array, Filesystem& fs, const std::string& mountpoint,
                           const ArrayControl* control = nullptr);
// The scrub of this mount, running or last ended, or null if none ran: running, repair,
// done and total (stripes), mismatched, repaired, unrepairable, bad_chunks[] (role, path,
// count: the chunks named bad on each member), seconds, stopped, error (or null) and ended
// (UTC, ISO 8601, or null while it runs).
nlohmann::json scrub_json(Array& array);
// I/O statistics: the volume's full/partial stripe counts, the buffer cache, the journal,
// and how member requests reached the kernel (`engine`, the members' ring: may be null).
nlohmann::json stats_json(Array& array, Filesystem& fs, const IoEngine* engine = nullptr);
// stats' volume group: the Volume's counters by name (iostat shares it).
nlohmann::json volume_stats_json(const VolumeStats& stats);
// The control socket's path for a filesystem.
std::string control_socket_path(const Uuid& fs_uuid);

}  // namespace stripefs::fs
