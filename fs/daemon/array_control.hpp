// The control plane's array commands, on a mounted filesystem's daemon: what an mdadm user
// does on the day a disk dies, through the control socket (control.hpp).
//
//   {"command": "fail",   "member": M}        take a member out of service (md's --fail); M
//                                             the new device of a hot replace: stop it
//   {"command": "remove", "member": M}        forget a spare, or a failed member
//   {"command": "add",    "device": PATH, "force": bool}
//                                             rebuild onto it if a role is out of service,
//                                             else keep it as a spare
//   {"command": "replace", "member": M, "device": PATH, "force": bool}
//                                             md's --replace: M keeps serving while it is
//                                             copied onto PATH (a spare, or a new device),
//                                             which then takes its role
//   {"command": "re-add", "device": PATH}     md's --re-add: a member of this array that
//                                             failed or was away rejoins its role, and only
//                                             what the bitmap recorded since is rebuilt
//   {"command": "rebuild"}                    start (onto a spare) or resume a rebuild
//   {"command": "speed",  "min": SIZE, "max": SIZE}
//                                             the rebuild's rate limits (per second)
//   {"command": "log-level", "level": NAME}   trace, debug, info, warn, error, critical, off
//   {"command": "scrub", "action": "start"|"stop"|"status", "repair": bool}
//                                             check every stripe's redundancy and file
//                                             data's checksums in the background (repair:
//                                             rewrite the chunks named bad); answers "scrub":
//                                             status.hpp's scrub_json
//
// M is a member's device path or its role number. Each answers {"ok": true, ...} or
// {"error": "..."}; a refused request changes nothing, on disk or in the daemon.
//
// Events (a member failed, the array degraded or failed, a rebuild started, finished or
// failed, a spare used, a scrub ended) go to the log and, when an event program is set, to that
// program: run as PROGRAM EVENT MOUNTPOINT DEVICE ROLE DETAIL, one at a time, on a thread of the
// daemon's own. A member failing while a spare is kept starts a rebuild onto the spare.
//
// A spare gets a spare's superblock (md's: the array's, with no role), so a mount given it
// again (or finding it by UUID=) keeps it as a spare; removing it wipes that superblock.
#pragma once
#include <condition_variable>
#include <deque>
#include <mutex>
#include <nlohmann/json.hpp>
#include <string>
#include <thread>
#include <vector>

#include "raid/array.hpp"
#include "raid/member_devices.hpp"
#include "raid/result.hpp"

namespace stripefs::fs {

class ArrayControl {
 public:
  // `array` and `devices` must outlive it; so must the array's use of what it adopts.
  ArrayControl(Array& array, Devices& devices, std::string mountpoint, std::string event_program);
  ~ArrayControl();  // stops hearing events; a running event program is waited for

  // Answers one of the commands above; nullopt for a command it does not know.
  std::optional<nlohmann::json> handle(const nlohmann::json& request);

  // The devices no role holds, for status: spares, failed members replaced since (faulty,
  // with their I/O figures), members a hot replace took over from, and removed ones:
  // {"path", "state": "spare"|"faulty"|"replaced"|"removed"}.
  nlohmann::json extra_members_json() const;
  // Whether `device` was removed (it may still hold its failed role).
  bool removed(const Member* device) const;

 private:
  struct Event {
    std::string kind;
    std::string device;
    std::optional<unsigned> role;
    std::string detail;
  };

  Result<unsigned> role_of(const nlohmann::json& member) const;
  Result<nlohmann::json> fail_member(const nlohmann::json& request);
  Result<nlohmann::json> remove_member(const nlohmann::json& request);
  Result<nlohmann::json> add_device(const nlohmann::json& request);
  Result<nlohmann::json> start_rebuild();
  Result<nlohmann::json> readd_device(const nlohmann::json& request);
  Result<nlohmann::json> replace_device(const nlohmann::json& request);
  Result<nlohmann::json> speed(const nlohmann::json& request);
  Result<nlohmann::json> scrub(const nlohmann::json& request);  // array_control_scrub.cpp
  Result<nlohmann::json> log_level(const nlohmann::json& request);

  // Every device the daemon opened for the array: the mount's and those added since.
  std::vector<Member*> owned_devices() const;
  bool holds_role(const Member* device) const;
  // The role `device` is the hot replacement of, if it is one.
  std::optional<unsigned> replacing(const Member* device) const;
  // Replaces the flock descriptor the devices keep for `device` (-1: none; the old closed).
  void set_lock(const Member* device, int lock);
  // Whether `device` (at `path`) may be rebuilt onto: no other array or filesystem on it
  // unless `force` (whose signatures are then wiped), and large enough. Under mutex_.
  Result<void> vet(Member& device, const std::string& path, bool force) const;
  // A role out of service and not being rebuilt, that the array can rebuild now.
  std::optional<unsigned> role_to_rebuild() const;
  // Rebuilds `role` onto the first spare; false (and the spare kept) when refused.
  Result<void> use_spare(unsigned role);

  void on_array_event(const ArrayEvent& event);
  void post(Event event);
  void event_loop();
  void run_program(const Event& event);

  Array& array_;
  Devices& devices_;
  const std::string mountpoint_;
  const std::string program_;

  mutable std::mutex mutex_;      // guards spares_ and removed_; taken before the array's locks
  std::vector<Member*> spares_;   // the devices own them
  std::vector<Member*> removed_;  // devices the daemon keeps open but never uses again

  std::mutex events_mutex_;  // guards events_ and stopping_ (a leaf)
  std::condition_variable events_cv_;
  std::deque<Event> events_;
  bool stopping_ = false;
  std::thread event_thread_;
};

}  // namespace stripefs::fs
