#include "fs/daemon/array_control.hpp"

#include <spawn.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <spdlog/spdlog.h>
#include <chrono>
#include <cstring>

#include "fs/core/fs_log.hpp"
#include "fs/daemon/device_check.hpp"
#include "raid/superblock.hpp"
#include "raid/units.hpp"

extern char** environ;

namespace stripefs::fs {

namespace {

using nlohmann::json;

constexpr auto kProgramTimeout = std::chrono::seconds(60);

// Whether two paths name the same device or file.
bool same_device(const std::string& a, const std::string& b) {
  struct stat sa {
  }, sb{};
  if (::stat(a.c_str(), &sa) != 0 || ::stat(b.c_str(), &sb) != 0) return a == b;
  if (S_ISBLK(sa.st_mode) && S_ISBLK(sb.st_mode)) return sa.st_rdev == sb.st_rdev;
  return sa.st_dev == sb.st_dev && sa.st_ino == sb.st_ino;
}

Result<std::string> string_field(const json& request, const char* name) {
  if (!request.contains(name) || !request[name].is_string() ||
      request[name].get<std::string>().empty()) {
    return fail(EINVAL, "the request needs \"{}\", a string", name);
  }
  return request[name].get<std::string>();
}

// A rate: bytes per second as a number, or a size such as "16M"; 0 is no limit.
Result<uint64_t> rate_field(const json& value, const char* name) {
  if (value.is_number_unsigned()) return value.get<uint64_t>();
  if (value.is_string()) {
    const std::string text = value.get<std::string>();
    if (text == "0") return uint64_t{0};
    auto size = parse_size(text);
    if (!size) return fail(EINVAL, "{}: {}", name, size.error().message);
    return *size;
  }
  return fail(EINVAL, "{}: a size per second such as \"16M\", or 0 for no limit", name);
}

std::string role_text(std::optional<unsigned> role) {
  return role ? std::to_string(*role) : "-";
}

}  // namespace

ArrayControl::ArrayControl(Array& array, Devices& devices, std::string mountpoint,
                           std::string event_program)
    : array_(array),
      devices_(devices),
      mountpoint_(std::move(mountpoint)),
      program_(std::move(event_program)) {
  spares_ = array_.spares();  // given at mount, with a spare's superblock
  event_thread_ = std::thread([this] { event_loop(); });
  array_.set_event_listener([this](const ArrayEvent& e) { on_array_event(e); });
}

ArrayControl::~ArrayControl() {
  array_.set_event_listener(nullptr);
  {
    std::lock_guard lock(events_mutex_);
    stopping_ = true;
  }
  events_cv_.notify_all();
  event_thread_.join();
}

std::optional<json> ArrayControl::handle(const json& request) {
  const std::string command = request["command"];
  Result<json> reply = json::object();
  if (command == "fail") {
    reply = fail_member(request);
  } else if (command == "remove") {
    reply = remove_member(request);
  } else if (command == "add") {
    reply = add_device(request);
  } else if (command == "re-add") {
    reply = readd_device(request);
  } else if (command == "replace") {
    reply = replace_device(request);
  } else if (command == "rebuild") {
    reply = start_rebuild();
  } else if (command == "speed") {
    reply = speed(request);
  } else if (command == "scrub") {
    reply = scrub(request);
  } else if (command == "log-level") {
    reply = log_level(request);
  } else {
    return std::nullopt;
  }
  if (!reply) {
    fs_log().warn("control: {} refused: {}", command, reply.error().message);
    return json{{"error", reply.error().message}};
  }
  (*reply)["ok"] = true;
  return *reply;
}

Result<unsigned> ArrayControl::role_of(const json& member) const {
  const unsigned members = array_.volume().geometry().members();
  if (member.is_number_unsigned()) {
    const unsigned role = member.get<unsigned>();
    if (role >= members)
      return stripefs::fail(EINVAL, "role {}: the array has {} members", role, members);
    return role;
  }
  if (!member.is_string() || member.get<std::string>().empty()) {
    return stripefs::fail(EINVAL, "the request needs \"member\": a device path or a role number");
  }
  const std::string text = member.get<std::string>();
  if (text.find_first_not_of("0123456789") == std::string::npos && text.size() < 4) {
    return role_of(json(static_cast<unsigned>(std::stoul(text))));
  }
  for (unsigned role = 0; role < members; ++role) {
    Member* m = array_.member_device(role);
    if (m != nullptr && same_device(m->name(), text)) return role;
  }
  return stripefs::fail(ENODEV, "{}: not a member of this array", text);
}

std::optional<unsigned> ArrayControl::replacing(const Member* device) const {
  for (unsigned role = 0; role < array_.volume().geometry().members(); ++role) {
    if (device != nullptr && array_.replacement(role) == device) return role;
  }
  return std::nullopt;
}

Result<json> ArrayControl::fail_member(const json& request) {
  // The new device of a hot replace: failing it stops the replace (md: --fail on the
  // replacement), and the old device serves on.
  if (const json& member = request.value("member", json()); member.is_string()) {
    for (Member* m : owned_devices()) {
      if (!same_device(m->name(), member.get<std::string>())) continue;
      if (auto role = replacing(m)) {
        if (auto r = array_.cancel_replace(*role); !r) return stripefs::fail(r.error());
        fs_log().warn("control: the replace of role {} by {} stopped on request", *role, m->name());
        return json{{"role", *role}, {"replace_stopped", true}};
      }
    }
  }
  auto role = role_of(request.value("member", json()));
  if (!role) return stripefs::fail(role.error());
  Member* device = array_.member_device(*role);
  if (auto r = array_.fail_member(*role); !r) return stripefs::fail(r.error());
  fs_log().warn("control: role {} ({}) failed on request", *role,
                device != nullptr ? device->name() : "");
  return json{{"role", *role}};
}

Result<json> ArrayControl::remove_member(const json& request) {
  std::lock_guard lock(mutex_);
  const json& member = request.value("member", json());
  const std::string text = member.is_string() ? member.get<std::string>() : "";
  for (auto it = spares_.begin(); it != spares_.end(); ++it) {
    if (!text.empty() && same_device((*it)->name(), text)) {
      Member* spare = *it;
      // Its spare's superblock goes, so the next mount does not take it back.
      if (auto w = array_.record_spare(*spare, false); !w) return stripefs::fail(w.error());
      spares_.erase(it);
      set_lock(spare, -1);
      removed_.push_back(spare);
      fs_log().warn("control: spare {} removed", spare->name());
      return json{{"spare", spare->name()}};
    }
  }
  // A device the array gave up: a failed member, still in its role or replaced since.
  Member* device = nullptr;
  std::optional<unsigned> role;
  if (auto r = role_of(member)) {
    role = *r;
    device = array_.member_device(*r);
  } else {
    for (Member* m : owned_devices()) {
      if (!text.empty() && same_device(m->name(), text)) device = m;
    }
    if (device == nullptr) return stripefs::fail(r.error());
  }
  if (device == nullptr) return stripefs::fail(ENODEV, "role {} has no device", *role);
  if (auto replaced = replacing(device)) {
    return stripefs::fail(EBUSY, "{} is replacing role {}: fail it first to stop the replace",
                          device->name(), *replaced);
  }
  Volume& volume = array_.volume();
  if (role && (volume.active(*role) || volume.recovering(*role))) {
    return stripefs::fail(EBUSY, "{} (role {}) is {}: fail it first", device->name(), *role,
                          volume.active(*role) ? "in service" : "being rebuilt");
  }
  if (std::find(removed_.begin(), removed_.end(), device) != removed_.end()) {
    return stripefs::fail(EALREADY, "{} is removed already", device->name());
  }
  // Out of service for good: nothing is written to it again. Its lock goes, so it may be
  // taken by another program; the daemon's descriptor stays open (I/O issued before the
  // failure may still complete on it) until unmount.
  set_lock(device, -1);
  removed_.push_back(device);
  fs_log().warn("control: {} removed", device->name());
  json reply = {{"device", device->name()}};
  if (role) reply["role"] = *role;
  return reply;
}

void ArrayControl::set_lock(const Member* device, int lock) {
  const auto swap = [lock](int& held) {
    if (held >= 0) close(held);
    held = lock;
  };
  for (size_t i = 0; i < devices_.members.size() && i < devices_.locks.size(); ++i) {
    if (devices_.members[i].get() == device) return swap(devices_.locks[i]);
  }
  for (OpenedDevice& d : devices_.added) {
    if (d.member.get() == device) return swap(d.lock);
  }
  if (lock >= 0) close(lock);  // not ours (cannot happen): never leak it
}

std::vector<Member*> ArrayControl::owned_devices() const {
  std::vector<Member*> out;
  for (const auto& m : devices_.members) out.push_back(m.get());
  for (const OpenedDevice& d : devices_.added) out.push_back(d.member.get());
  return out;
}

std::optional<unsigned> ArrayControl::role_to_rebuild() const {
  Volume& volume = array_.volume();
  for (unsigned role = 0; role < volume.geometry().members(); ++role) {
    if (volume.active(role) || volume.recovering(role)) continue;
    // A replace whose old device failed rebuilds onto its new device by itself.
    if (array_.replacement(role) != nullptr) continue;
    if (array_.runs_without(role)) return role;
  }
  return std::nullopt;
}

Result<void> ArrayControl::use_spare(unsigned role) {
  if (spares_.empty()) return stripefs::fail(ENODEV, "no spare");
  Member* device = spares_.front();
  // If the rebuild refuses it, it stays with the devices unused (its lock kept) rather than
  // becoming a spare again.
  spares_.erase(spares_.begin());
  return array_.rebuild(role, device);
}

Result<void> ArrayControl::vet(Member& device, const std::string& path, bool force) const {
  auto signature = signature_of(path);
  if (!signature) return stripefs::fail(signature.error());
  const Superblock ours = array_.superblock();
  auto sb = read_superblock(device);
  // A replacement of this array that went stale or was given up: its copy is worth nothing
  // now, and running the replace again (or adding it) is what its note asks for.
  const bool stale_replacement = sb && sb->array_uuid == ours.array_uuid && sb->replacement();
  if (sb && !force && !stale_replacement) {
    if (sb->array_uuid == ours.array_uuid) {
      return stripefs::fail(EEXIST,
                            "{} holds a superblock of this array (role {}); add --force to "
                            "rebuild it from scratch",
                            path, sb->role);
    }
    return stripefs::fail(EEXIST, "{} is a member of another stripefs array ({}); use --force",
                          path, format_uuid(sb->array_uuid));
  }
  if (!signature->empty() && !force) {
    return stripefs::fail(EEXIST, "{} holds {}; use --force to overwrite it", path, *signature);
  }
  if (auto f = array_.fits(device); !f) return f;
  if (force && !signature->empty()) {
    if (auto w = wipe_signatures(path); !w) return stripefs::fail(w.error());
  }
  return {};
}

bool ArrayControl::holds_role(const Member* device) const {
  const unsigned members = array_.volume().geometry().members();
  for (unsigned role = 0; role < members; ++role) {
    if (array_.member_device(role) == device) return true;
  }
  return false;
}

Result<json> ArrayControl::add_device(const json& request) {
  auto path = string_field(request, "device");
  if (!path) return stripefs::fail(path.error());
  const bool force = request.value("force", false);
  std::lock_guard lock(mutex_);
  const unsigned members = array_.volume().geometry().members();
  for (unsigned role = 0; role < members; ++role) {
    Member* m = array_.member_device(role);
    if (m != nullptr && same_device(m->name(), *path) &&
        std::find(removed_.begin(), removed_.end(), m) == removed_.end()) {
      return stripefs::fail(EEXIST, "{} is role {} of this array already", *path, role);
    }
  }
  for (Member* s : spares_) {
    if (same_device(s->name(), *path)) {
      return stripefs::fail(EEXIST, "{} is a spare already", *path);
    }
  }
  // A device the daemon holds already but no role does (kept out at mount for a damaged
  // superblock, failed and replaced since, removed): rebuilt onto in place, or a spare again.
  for (Member* m : owned_devices()) {
    if (!same_device(m->name(), *path) || holds_role(m)) continue;
    if (replacing(m)) return stripefs::fail(EBUSY, "{} is replacing a member", *path);
    const auto role = role_to_rebuild();
    if (auto v = vet(*m, *path, force); !v) return stripefs::fail(v.error());
    const bool was_removed = std::find(removed_.begin(), removed_.end(), m) != removed_.end();
    if (was_removed) {
      // Its lock went with the remove: taken again before anything is written to it.
      auto lock = lock_device(*path);
      if (!lock) return stripefs::fail(lock.error());
      set_lock(m, *lock);
    }
    if (!role) {
      if (auto w = array_.record_spare(*m); !w) return stripefs::fail(w.error());
      std::erase(removed_, m);
      spares_.push_back(m);
      fs_log().warn("control: {} added back as a spare", *path);
      return json{{"device", *path}, {"spare", true}};
    }
    if (auto r = array_.rebuild(*role, m); !r) return stripefs::fail(r.error());
    std::erase(removed_, m);
    fs_log().warn("control: {} added back", *path);
    return json{{"device", *path}, {"rebuilding", *role}};
  }
  auto opened = open_device(*path, *devices_.engine, devices_.backend);
  if (!opened) return stripefs::fail(opened.error());
  if (auto v = vet(*opened->member, *path, force); !v) return stripefs::fail(v.error());
  // Recorded on the device (md's spare superblock), so a mount given it knows it again; kept
  // by the devices from now on (the array needs whatever it rebuilds onto to outlive it).
  if (auto w = array_.record_spare(*opened->member); !w) return stripefs::fail(w.error());
  spares_.push_back(devices_.adopt(std::move(*opened)));
  fs_log().warn("control: {} added as a spare", *path);
  if (auto role = role_to_rebuild()) {
    if (auto r = use_spare(*role); !r) return stripefs::fail(r.error());
    post({"spare-used", *path, *role, ""});
    return json{{"device", *path}, {"rebuilding", *role}};
  }
  return json{{"device", *path}, {"spare", true}};
}

Result<json> ArrayControl::readd_device(const json& request) {
  auto path = string_field(request, "device");
  if (!path) return stripefs::fail(path.error());
  std::lock_guard lock(mutex_);
  // The daemon's own device (a member failed while mounted, or removed), or a new open.
  Member* device = nullptr;
  for (Member* m : owned_devices()) {
    if (same_device(m->name(), *path)) device = m;
  }
  std::optional<OpenedDevice> opened;
  if (device == nullptr) {
    auto o = open_device(*path, *devices_.engine, devices_.backend);
    if (!o) return stripefs::fail(o.error());
    opened = std::move(*o);
    device = opened->member.get();
  } else if (std::find(removed_.begin(), removed_.end(), device) != removed_.end()) {
    auto l = lock_device(*path);
    if (!l) return stripefs::fail(l.error());
    set_lock(device, *l);
  }
  auto sb = read_superblock(*device);
  if (!sb) return stripefs::fail(sb.error().code, "{}: {}", *path, sb.error().message);
  const unsigned role = sb->role;
  if (role >= array_.volume().geometry().members()) {
    return stripefs::fail(EINVAL, "{}: role {} is not one of this array's", *path, role);
  }
  // Refused, a device opened here is closed again (nothing was written to it); taken, it is
  // kept with the devices, as the array needs it to outlive it.
  if (auto r = array_.readd(role, device); !r) return stripefs::fail(r.error());
  if (opened) devices_.adopt(std::move(*opened));
  std::erase(removed_, device);
  fs_log().warn("control: {} re-added as role {}", *path, role);
  return json{{"device", *path}, {"rebuilding", role}};
}

Result<json> ArrayControl::replace_device(const json& request) {
  auto role = role_of(request.value("member", json()));
  if (!role) return stripefs::fail(role.error());
  auto path = string_field(request, "device");
  if (!path) return stripefs::fail(path.error());
  const bool force = request.value("force", false);
  std::lock_guard lock(mutex_);
  Member* old = array_.member_device(*role);
  // What the array would refuse, refused before the device is vetted (which may wipe it).
  if (!array_.volume().active(*role)) {
    return stripefs::fail(EBUSY, "role {} is not in service: add a device to rebuild it instead",
                          *role);
  }
  if (Member* busy = array_.replacement(*role)) {
    return stripefs::fail(EBUSY, "role {} is being replaced already (by {})", *role, busy->name());
  }
  const unsigned members = array_.volume().geometry().members();
  for (unsigned r = 0; r < members; ++r) {
    Member* m = array_.member_device(r);
    if (m != nullptr && same_device(m->name(), *path)) {
      return stripefs::fail(EEXIST, "{} is role {} of this array already", *path, r);
    }
  }
  // A spare is taken as it is (vetted when it was added); a device the daemon holds but no
  // role does (a failed member, one kept out at mount) is vetted again; any other is opened.
  for (auto it = spares_.begin(); it != spares_.end(); ++it) {
    if (!same_device((*it)->name(), *path)) continue;
    Member* device = *it;
    if (auto r = array_.replace(*role, device); !r) return stripefs::fail(r.error());
    spares_.erase(it);
    fs_log().warn("control: replacing role {} ({}) by spare {}", *role, old->name(), *path);
    return json{{"role", *role}, {"device", *path}, {"old", old->name()}};
  }
  Member* device = nullptr;
  for (Member* m : owned_devices()) {
    if (same_device(m->name(), *path) && !holds_role(m)) device = m;
  }
  std::optional<OpenedDevice> opened;
  if (device != nullptr) {
    if (std::find(removed_.begin(), removed_.end(), device) != removed_.end()) {
      auto l = lock_device(*path);
      if (!l) return stripefs::fail(l.error());
      set_lock(device, *l);
    }
  } else {
    auto o = open_device(*path, *devices_.engine, devices_.backend);
    if (!o) return stripefs::fail(o.error());
    opened = std::move(*o);
    device = opened->member.get();
  }
  if (auto v = vet(*device, *path, force); !v) return stripefs::fail(v.error());
  if (auto r = array_.replace(*role, device); !r) return stripefs::fail(r.error());
  if (opened) devices_.adopt(std::move(*opened));
  std::erase(removed_, device);
  fs_log().warn("control: replacing role {} ({}) by {}", *role, old->name(), *path);
  return json{{"role", *role}, {"device", *path}, {"old", old->name()}};
}

Result<json> ArrayControl::start_rebuild() {
  std::lock_guard lock(mutex_);
  json started = json::array();
  for (unsigned role : array_.resume_rebuilds()) started.push_back(role);
  while (!spares_.empty()) {
    auto role = role_to_rebuild();
    if (!role) break;
    const std::string name = spares_.front()->name();
    if (auto r = use_spare(*role); !r) return stripefs::fail(r.error());
    post({"spare-used", name, *role, ""});
    started.push_back(*role);
  }
  if (started.empty()) {
    if (array_.rebuild_progress().running) return json{{"roles", started}, {"running", true}};
    if (role_to_rebuild()) {
      return stripefs::fail(ENODEV, "a role is out of service but there is no spare: add one");
    }
    if (array_.volume().missing_members() > 0) {
      return stripefs::fail(EIO,
                            "the roles out of service cannot be rebuilt: too many members "
                            "are missing");
    }
    return stripefs::fail(EALREADY, "nothing to rebuild: every member is in service");
  }
  return json{{"roles", started}};
}

Result<json> ArrayControl::speed(const json& request) {
  auto [min, max] = array_.rebuild_speed();
  if (request.contains("min")) {
    auto v = rate_field(request["min"], "min");
    if (!v) return stripefs::fail(v.error());
    min = *v;
  }
  if (request.contains("max")) {
    auto v = rate_field(request["max"], "max");
    if (!v) return stripefs::fail(v.error());
    max = *v;
  }
  if (min == 0) {
    return stripefs::fail(EINVAL,
                          "min 0: the rebuild must move while the array is busy (at "
                          "least 1 byte per second)");
  }
  if (max != 0 && min > max) {
    return stripefs::fail(EINVAL, "min {}/s is above max {}/s", format_size(min), format_size(max));
  }
  array_.set_rebuild_speed(min, max);
  return json{{"min", min}, {"max", max}};
}

Result<json> ArrayControl::log_level(const json& request) {
  auto name = string_field(request, "level");
  if (!name) return stripefs::fail(name.error());
  static const char* const kLevels[] = {"trace", "debug",    "info", "warn",
                                        "error", "critical", "off"};
  const auto level = spdlog::level::from_str(*name);
  if (std::find(std::begin(kLevels), std::end(kLevels), *name) == std::end(kLevels)) {
    return stripefs::fail(
        EINVAL, "log level '{}': one of trace, debug, info, warn, error, critical, off", *name);
  }
  spdlog::set_level(level);
  return json{{"level", *name}};
}

bool ArrayControl::removed(const Member* device) const {
  std::lock_guard lock(mutex_);
  return std::find(removed_.begin(), removed_.end(), device) != removed_.end();
}

json ArrayControl::extra_members_json() const {
  std::lock_guard lock(mutex_);
  json out = json::array();
  for (Member* s : spares_) {
    out.push_back({{"path", s->name()}, {"state", "spare"}});
  }
  // Devices no role holds (a failed member replaced by a rebuild, or one kept out at mount),
  // as md lists a faulty device until it is removed; and the removed ones.
  for (Member* m : owned_devices()) {
    if (holds_role(m)) continue;  // on its role's line (state "removed" if removed)
    if (std::find(spares_.begin(), spares_.end(), m) != spares_.end()) continue;
    const bool removed = std::find(removed_.begin(), removed_.end(), m) != removed_.end();
    // Left its role to a hot replace's new device (not failed: it served until the end).
    const auto replaces = array_.replaces();  // this run's, resumed ones too
    const bool replaced = std::any_of(replaces.begin(), replaces.end(), [&](const auto& r) {
      return r.first == m && holds_role(r.second);
    });
    if (replacing(m)) continue;  // on its role's line, as its replacement
    const MemberCounters c = m->counters();
    out.push_back({{"path", m->name()},
                   {"state", removed    ? "removed"
                             : replaced ? "replaced"
                                        : "faulty"},
                   {"reads", c.reads},
                   {"writes", c.writes},
                   {"read_bytes", c.read_bytes},
                   {"written_bytes", c.written_bytes},
                   {"errors", c.errors},
                   {"corrected", c.corrected},
                   {"checksum_errors", c.checksum_errors}});
  }
  return out;
}

void ArrayControl::on_array_event(const ArrayEvent& event) {
  const bool whole_array = event.kind == ArrayEvent::Kind::scrub_finished;
  post({to_string(event.kind), event.device,
        whole_array ? std::nullopt : std::optional<unsigned>(event.role), event.detail});
}

void ArrayControl::post(Event event) {
  {
    std::lock_guard lock(events_mutex_);
    events_.push_back(std::move(event));
  }
  events_cv_.notify_one();
}

void ArrayControl::event_loop() {
  std::unique_lock lock(events_mutex_);
  for (;;) {
    events_cv_.wait(lock, [this] { return stopping_ || !events_.empty(); });
    if (events_.empty()) return;
    Event event = std::move(events_.front());
    events_.pop_front();
    lock.unlock();
    fs_log().warn("event {}: {} role {}{}{}", event.kind, event.device.empty() ? "-" : event.device,
                  role_text(event.role), event.detail.empty() ? "" : ": ", event.detail);
    // The spare first: a slow event program must not hold up the rebuild.
    if (event.kind == "member-failed") {
      Volume& volume = array_.volume();
      if (volume.failed()) {
        post({"array-failed", "", std::nullopt, "too many members are out of service"});
      } else {
        post({"array-degraded", "", std::nullopt,
              fmt::format("{} member(s) out of service", volume.missing_members())});
        std::lock_guard state(mutex_);
        if (auto role = role_to_rebuild(); role && !spares_.empty()) {
          const std::string name = spares_.front()->name();
          if (auto r = use_spare(*role); r) {
            post({"spare-used", name, *role, ""});
          } else {
            fs_log().error("rebuilding role {} onto spare {}: {}", *role, name, r.error().message);
          }
        }
      }
    }
    run_program(event);
    lock.lock();
  }
}

void ArrayControl::run_program(const Event& event) {
  if (program_.empty()) return;
  const std::string role = role_text(event.role);
  std::vector<std::string> args = {program_,     event.kind, mountpoint_,
                                   event.device, role,       event.detail};
  std::vector<char*> argv;
  for (std::string& a : args) argv.push_back(a.data());
  argv.push_back(nullptr);
  pid_t pid = 0;
  if (const int e = posix_spawn(&pid, program_.c_str(), nullptr, nullptr, argv.data(), environ);
      e != 0) {
    fs_log().error("event program {}: {}", program_, std::strerror(e));
    return;
  }
  const auto deadline = std::chrono::steady_clock::now() + kProgramTimeout;
  int status = 0;
  for (;;) {
    const pid_t done = waitpid(pid, &status, WNOHANG);
    if (done == pid || (done < 0 && errno != EINTR)) break;
    if (std::chrono::steady_clock::now() >= deadline) {
      fs_log().error("event program {}: still running after {} s; killed", program_,
                     kProgramTimeout.count());
      kill(pid, SIGKILL);
      waitpid(pid, &status, 0);
      return;
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  if (!WIFEXITED(status) || WEXITSTATUS(status) != 0) {
    fs_log().warn("event program {} {}: exit status {}", program_, event.kind,
                  WIFEXITED(status) ? WEXITSTATUS(status) : -1);
  }
}

}  // namespace stripefs::fs
