// An array's life: creation (superblocks on every member), assembly from whatever members
// are given (assembly.hpp), running (member failures recorded in the survivors'
// superblocks), and a clean shutdown. The Volume does the I/O; this keeps the members'
// records true.
//
// Failures while running: the Volume's failure listener queues the member, and a thread of
// the Array's own (the listener may run on an I/O thread, which must not wait for its own
// completions) records it faulty with the events bumped in every active member's
// superblock, then calls Volume::failure_recorded(), which lets the held writes and
// flushes go on. A member whose superblock write fails is failed in turn.
#pragma once

#include <algorithm>
#include <array>
#include <atomic>
#include <chrono>
#include <condition_variable>
#include <deque>
#include <functional>
#include <memory>
#include <mutex>
#include <optional>
#include <span>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "raid/assembly.hpp"
#include "raid/replacing_member.hpp"
#include "raid/stripe_log.hpp"
#include "raid/superblock.hpp"
#include "raid/volume.hpp"
#include "raid/write_intent.hpp"

namespace stripefs {

struct ArrayOptions {
  RaidLevel level = RaidLevel::raid5;
  ParityLayout layout = ParityLayout::left_symmetric;
  uint32_t chunk_size = 512 * 1024;  // md's default
  std::string label;
  Uuid uuid{};                     // zero: a random one
  uint64_t data_offset = 1 << 20;  // room for the superblock, bitmap and alignment
  // An area reserved on every member, before data_offset, for the write-ahead journal that
  // closes the write hole (journal/ formats it and decides which members keep a copy).
  // Recorded in the superblock before `validate` runs. 0: none.
  uint64_t journal_offset = 0;
  uint64_t journal_size = 0;
  bool force = false;         // overwrite members that belong to another array
  bool assume_clean = false;  // skip the initial parity sync (members known zeroed)
  // Runs once every member passed its checks and before any superblock is written: it may
  // fill in and format the bitmap/journal areas it records in `sb` (journal/ does).
  std::function<Result<void>(std::span<Member* const> members, Superblock& sb)> prepare;
  // Runs before `prepare`, once the geometry is known: every refusal belongs here, so that
  // nothing is written unless all pass. Chainable like `prepare`.
  std::function<Result<void>(std::span<Member* const> members, const Superblock& sb)> validate;
};

struct OpenOptions {
  // Start a dirty degraded array (its parity may be stale), and bring back stale members
  // when the array cannot start without them.
  bool force = false;
  // Builds the write-intent record (the bitmap) for an array whose superblock has one;
  // without it, an unclean array is resynced whole. Gets `force`: it may then rebuild a
  // damaged record instead of refusing.
  std::function<Result<std::unique_ptr<WriteIntent>>(Volume&, const Superblock&, bool force)>
      write_intent;
  // An array with a bitmap is refused without `write_intent`: writes it did not record
  // would be missing when a member is re-added. Benchmarks that measure the bitmap's cost
  // set this to run without it anyway; a crash during such a run is later resynced only
  // where the bits were set before it.
  bool ignore_bitmap = false;
  // Builds the stripe log (the write-ahead journal) for an array whose superblock has one.
  // It is replayed before anything else, so a stripe torn by a crash is consistent again
  // even if the array comes back degraded.
  // Gets `force` too: it may then rebuild a damaged log instead of refusing.
  std::function<Result<std::unique_ptr<StripeLog>>(Volume&, const Superblock&, bool force)>
      stripe_log;
  // false: the stripe log is replayed and emptied, but partial-stripe writes are not logged
  // (faster small writes). The write hole is then open until the next clean shutdown, and
  // the superblocks say so (Superblock::unlogged), so a crash during such a run is treated
  // as if the array had no log.
  bool log_partial_stripes = true;
  // The rebuild's speed limits (set_rebuild_speed), in force before a rebuild resumed at the
  // open starts: bytes per second with other I/O, and idle (0: no limit).
  uint64_t speed_min = 16u << 20;
  uint64_t speed_max = 0;
  // How often a rebuild or a hot replace records its progress in the new device's
  // superblock (what the next open resumes from).
  std::chrono::milliseconds checkpoint_every{5000};
};

struct ResyncProgress {
  uint64_t done = 0;      // stripes checked
  uint64_t total = 0;     // stripes to check
  uint64_t repaired = 0;  // stripes whose parity or mirrors were rewritten
  bool finished = true;
  std::optional<Error> error;
};

// The background rebuild (md's recovery) of members onto new devices, and the hot replace
// of members in service (md's --replace), which take turns on one thread.
struct RebuildProgress {
  std::vector<unsigned> roles;  // being rebuilt or replaced, or waiting to be
  unsigned current = 0;         // the role being rebuilt or replaced now (when running)
  bool replace = false;         // the current task is a hot replace
  uint64_t done = 0;            // rebuild: stripes of the current role rebuilt (checkpoint
                                // included); replace: bytes of the device copied
  uint64_t total = 0;           // rebuild: stripes of the array; replace: bytes to copy
  uint64_t bytes = 0;           // member bytes of the current role brought in sync so far
  uint64_t written = 0;         // of those, rebuilt and written (less for a re-add)
  double seconds = 0;           // time spent rebuilding the current role so far
  bool running = false;
  std::optional<Error> error;  // why the last rebuild stopped short
};

// A scrub of the whole array (array_scrub.cpp): every stripe's redundancy checked in the
// background, bad chunks named and, with repair, rewritten (Volume::scrub_stripes).
struct ScrubProgress {
  bool running = false;
  bool repair = false;
  uint64_t done = 0;          // stripes checked (from `first` on)
  uint64_t total = 0;         // stripes of the array
  uint64_t first = 0;         // where it started: 0, or where a scrub cut short had got to
  bool before_mount = false;  // the last scrub of an earlier run of the array (from the
                              // superblock: `ended` and the counts, nothing else)
  bool checksums = false;     // data blocks were checked against the layer above's checksums
  Volume::ScrubCounts counts;
  double seconds = 0;    // spent so far (or in all, once ended)
  bool stopped = false;  // ended early on request or by a close
  std::optional<Error> error;
  std::optional<std::chrono::system_clock::time_point> ended;  // the last scrub's end
};

// What happened to the array, for whoever watches it (the daemon's log and event program).
struct ArrayEvent {
  enum class Kind {
    member_failed,
    rebuild_started,
    rebuild_finished,
    rebuild_failed,
    replace_started,
    replace_finished,
    replace_failed,
    device_errors,
    scrub_finished  // no role: the whole array; the detail gives the counts
  };
  Kind kind = Kind::member_failed;
  unsigned role = 0;
  std::string device;  // the device the event is about
  std::string detail;  // why (a failure's error), or "" when there is nothing to add
};
// "member-failed", "rebuild-started", "rebuild-finished", "rebuild-failed",
// "replace-started", "replace-finished", "replace-failed", "device-errors", "scrub-finished".
const char* to_string(ArrayEvent::Kind kind);

struct ArrayOpening;  // array_opening.hpp

// Creates an array on `members` (in role order). Every member is checked first — the
// level's Level::min_members, size, block size, an existing array, the journal area's
// placement — then `validate` runs, and nothing is written unless all pass. Then `prepare`,
// then the superblocks, recorded dirty. Unless assume_clean, parity (or mirrors) is then
// made consistent with whatever the members hold and the array recorded clean; a crash
// before that leaves it dirty, so the next open resyncs it. Returns the superblock of role 0.
Result<Superblock> create_array(std::span<Member* const> members, const ArrayOptions& options);

class Array {
 public:
  // Assembles and starts the array, in these steps (array.cpp):
  // 1. assemble(members, force), and the Volume over the members it chose. Returning
  //    members (Assembly::returning) join it held out when the array has a bitmap,
  //    `write_intent` is set and the level has redundancy; otherwise they stay out, named
  //    in notes().
  // 2. If the superblock records a journal, `stripe_log` is required (the open is refused
  //    without it, naming the journal) and its log is replayed before any other I/O.
  // 3. An unclean array that is degraded is refused (EUCLEAN: its parity may not match its
  //    data) unless `force`, or a stripe log closed the write hole in the crashed run
  //    (Superblock::unlogged not set).
  // 4. The bitmap: refused without `write_intent` unless `ignore_bitmap`; the factory's
  //    WriteIntent is plugged into the Volume before the first write. If a factory fails,
  //    the open fails. Then the returning members are re-added (readd_returning in
  //    array_opening.hpp), before open returns.
  // 5. The superblocks record the array running (dirty, events bumped), with any member that
  //    failed during replay recorded faulty. Only then is the stripe log checkpointed: until
  //    that record is durable, the log is all that says what such a member missed. Re-added
  //    members take their superblock first and only then serve I/O; one that cannot take it
  //    stays out, recorded faulty, while the array starts.
  // 6. After an unclean shutdown with every member present, a background resync: only the
  //    ranges the bitmap recorded, or every stripe without a bitmap or when the stripe log
  //    lost its records. It goes 64 stripes at a time, each stripe checked and repaired under
  //    its own lock, so writes go on meanwhile. A forced, degraded open is not resynced.
  static Result<std::unique_ptr<Array>> open(std::span<Member* const> members,
                                             const OpenOptions& options = {});
  // Closes cleanly if close() was not called.
  ~Array();

  Volume& volume() { return *volume_; }
  WriteIntent* write_intent() { return intent_.get(); }
  StripeLog* stripe_log() { return stripe_log_.get(); }
  // Whether partial-stripe writes go through the stripe log in this run.
  bool logs_partial_stripes() const { return stripe_log_ && logging_; }
  ResyncProgress resync_progress() const;
  // Waits for the background resync, if any. Blocking.
  ResyncProgress wait_resync();

  // Rebuilds role `role` (out of service: failed or missing) onto `device`, a blank or
  // foreign device the caller has vetted, which must outlive the array. The device gets the
  // role's superblock at once (state rebuilding) and joins the Volume in sync below its
  // recovery point only; a background thread rebuilds it stripe by stripe while the array
  // is in use, and puts it in service when done. Its progress is recorded in its superblock
  // (rebuild_checkpoint) every few seconds, so a close or a crash resumes at the next open.
  // Refuses (nothing written) a role in service or being rebuilt, a device too small or of
  // another block size, and an array that could not rebuild it (beyond its redundancy).
  Result<void> rebuild(unsigned role, Member* device);
  // Re-adds role `role`'s own device that was away or failed (md's --re-add with a bitmap),
  // while the array is in use: it rejoins like a rebuild (state rebuilding, in sync below
  // its recovery point, checkpointed), but only the stripes the write-intent bitmap recorded
  // as written since the device's superblock events are rebuilt. A write above the recovery
  // point records its bits before its data goes out, under its stripes' locks, and the
  // re-add asks the bitmap under those same locks, so no write is missed. Interrupted (a
  // close, a crash), it resumes at the next open as a rebuild from its checkpoint: everything
  // above it is rebuilt, which is safe, only slower. Refused (nothing
  // written) without a bitmap, for a device that holds no superblock of this array's role
  // `role`, for one newer than the array, and as rebuild() refuses.
  Result<void> readd(unsigned role, Member* device);
  // Hot-replaces role `role`, in service, by `device` (md's --replace; array_replace.cpp):
  // the old device keeps serving while a background task copies it onto `device` (a
  // ReplacingMember stands in the Volume meanwhile and mirrors every write onto the copied
  // part), so redundancy never drops. When the copy is complete, `device` takes the role
  // (its superblock written, the others' events bumped twice, so the old device, if ever
  // assembled again beside it, is told apart as the older one) and the old device leaves.
  // `device` is a blank or foreign device the caller has vetted, which must outlive the
  // array. It gets a replacement's superblock at once (Superblock::replacement: no role, the
  // old device's UUID, how far the copy got), rewritten with every superblock update and,
  // after a flush of the device, every few seconds with the copy's progress; so a replace cut
  // short by a close or a crash resumes at the next open given both devices
  // (Assembly::replacing), from that checkpoint: the metadata areas, and after a crash the
  // ranges the bitmap recorded (everything below the checkpoint without one), are copied
  // again first, before any other I/O. A close keeps the copy mirroring until the array goes.
  // If the old device fails meanwhile (a write, or the copy's read), the replace
  // becomes a rebuild of the role onto `device`; if `device` fails or the replace is
  // cancelled, the replace stops, the old device stays, and `device` is left blank. Refused
  // (nothing written) for a role not in service or being replaced, a device that is a member
  // already, too small or of another block size.
  Result<void> replace(unsigned role, Member* device);
  // The device role `role` is being replaced by, or nullptr.
  Member* replacement(unsigned role) const;
  // Every hot replace of this run (resumed ones too), under way or ended however: the old
  // device and the new one, oldest first.
  std::vector<std::pair<Member*, Member*>> replaces() const;
  // Stops the hot replace of `role` (md's --fail on the replacement): the old device serves
  // on, the new one gets nothing more, and the replace ends as failed ("stopped on
  // request"). Refused for a role not being replaced, and (EBUSY) once the copy is complete
  // and the handover has begun.
  Result<void> cancel_replace(unsigned role);
  RebuildProgress rebuild_progress() const;
  // Starts a scrub of every stripe in the background, paced by the rebuild's speed limits;
  // with `repair`, bad chunks the level can name are rewritten. Refused (EAGAIN) while a
  // member is out of service, and (EBUSY) while a scrub, a resync, a rebuild or a replace
  // runs. A member failing meanwhile ends it with an error. Every few seconds how far it
  // got is recorded in the superblocks: a scrub cut short by a close (an unmount) or a crash
  // is resumed from there by resume_scrub(); one stopped on request or finished is not. A
  // finished scrub records when it ended and its counts (ScrubProgress::before_mount).
  Result<void> start_scrub(bool repair);
  // Starts again, from its checkpoint and with its repair setting, a scrub the array's last
  // run cut short (after set_scrub_checker, so that it checks what it checked before); after
  // a crash, once the resync the open started has finished. False when there is none; a
  // refusal (a member out of service, a rebuild running) is logged, and the checkpoint kept
  // for the next open.
  bool resume_scrub();
  // Stops a running scrub (its figures so far kept) and waits for it to end; it is not
  // resumed.
  void stop_scrub();
  // The running scrub, else the last since the open, else the last the superblocks record.
  ScrubProgress scrub_progress() const;
  // Waits for the running scrub, if any, to end. Blocking.
  ScrubProgress wait_scrub();
  // What scrubs check data blocks against from now on (the filesystem's checksums), or
  // nullptr: nothing but redundancy. A running scrub is stopped first, its checkpoint kept
  // (resume_scrub() goes on with it: the filesystem's unmount is such a stop); `checker`
  // must stay until it is replaced.
  void set_scrub_checker(ScrubChecker* checker);
  // Queues again the roles whose rebuild stopped short (a read error on a source, say) and
  // returns them; empty when every role being rebuilt is queued already.
  std::vector<unsigned> resume_rebuilds();
  // Waits for the rebuilds queued so far. Blocking.
  RebuildProgress wait_rebuild();
  // How fast a rebuild writes, in member bytes per second: `min` while the array has other
  // I/O, up to `max` (0: no limit) while it has none (md's speed_limit_min and _max).
  void set_rebuild_speed(uint64_t min, uint64_t max);
  std::pair<uint64_t, uint64_t> rebuild_speed() const { return {speed_min_, speed_max_}; }
  // Read errors corrected on a member (Volume::set_read_error_policy) before it is failed;
  // 0: a read error fails its member at once. Each correction is logged, and the first and
  // every doubling of a device's count raise a device-errors event.
  void set_max_read_errors(uint32_t max) { volume_->set_read_error_policy(max, nullptr); }
  Superblock superblock() const;
  const std::vector<std::string>& notes() const { return notes_; }
  // The spares assembly found among the devices given to open() (Assembly::spares).
  const std::vector<Member*>& spares() const { return spares_; }
  // Writes a spare's superblock on `device` (md's spare: the array's, with no role), so the
  // next assembly given it knows it as a spare of this array; `device` must fit (fits()).
  // record_spare(device, false) wipes it again (a spare removed for good).
  Result<void> record_spare(Member& device, bool spare = true);
  // The device role `role` holds (nullptr when missing): the one being rebuilt onto, once a
  // rebuild gave it a new one.
  Member* member_device(unsigned role) const;
  // Whether the array keeps every byte without role `role`: the other roles in service are
  // enough for its level.
  bool runs_without(unsigned role) const;
  // Whether `device` could take a role: large enough for a member's data area, and of the
  // members' logical block size. rebuild() checks it before writing; callers that prepare a
  // device (wipe it) ask first.
  Result<void> fits(const Member& device) const;

  // Takes role `role` out of service at the administrator's request (md's --fail), and
  // returns once its failure is recorded in the other members' superblocks. Refused, nothing
  // changed, for a role neither in service nor being rebuilt, and for one the array cannot
  // run without (it would fail the array, as md refuses to fail its last redundant member).
  Result<void> fail_member(unsigned role);

  // Hears every ArrayEvent, on the array's own threads (the failure recorder, the rebuild),
  // under a leaf lock of its own and none of the array's others: it must not block or call
  // back into the array (the daemon queues them). Setting another listener (or nullptr)
  // waits for a call in progress, so the old one's owner may go once this returns.
  using EventListener = std::function<void(const ArrayEvent&)>;
  void set_event_listener(EventListener listener);

  // Stops a rebuild (its checkpoint recorded), waits for the resync, flushes the members,
  // checkpoints the stripe log, and records a clean shutdown (and the write hole closed: unlogged
  // cleared) in every active member's superblock. If the resync, the flush or the checkpoint
  // failed, returns that error and does not record the array clean. Blocking.
  Result<void> close();

 private:
  Array(Superblock master, std::vector<Member*> by_role, std::vector<Uuid> member_uuids,
        std::unique_ptr<Volume> volume, std::vector<std::string> notes);

  // Writes `master_` (with each member's own role and UUID, and a member being rebuilt its
  // checkpoint) to every member in service or being rebuilt.
  Result<void> write_superblocks();
  Result<void> record_running(const std::vector<unsigned>& readded,
                              const std::vector<unsigned>& broken);
  void start_resync(std::vector<std::pair<uint64_t, uint64_t>> stripe_ranges);
  void on_member_failed(unsigned role, const Error& why);
  void record_loop();
  void resync(std::vector<std::pair<uint64_t, uint64_t>> stripe_ranges);
  // The rebuild (array_rebuild.cpp).
  void start_rebuilds(std::vector<unsigned> roles);
  void rebuild_loop();
  Result<void> rebuild_role(unsigned role);
  // The hot replace of `role` (array_replace.cpp): the copy, then the handover or, cut
  // short, the way back (the role's device again in the Volume).
  Result<void> replace_role(unsigned role);
  Result<void> finish_replace(unsigned role, ReplacingMember& copy);
  Result<void> abandon_replace(unsigned role, ReplacingMember& copy, const Error& why);
  // The replacement superblock of the hot replace of `role` (under mutex_): master_'s, with
  // the replacement flag, the new device's UUID, the old one's, and replace_checkpoints_.
  Superblock replacement_record(unsigned role) const;
  // After a flush of the new device: how far the copy of `role` got, in its superblock.
  Result<void> record_replace_checkpoint(unsigned role, ReplacingMember& copy);
  // Array::open's end: the replaces the opening resumed (and the copies it gave up) are
  // the Array's from now on.
  void adopt_replaces(ArrayOpening& opening);
  // md's speed limits, shared by rebuild and replace: pace() waits after each round of
  // `written` bytes for as long as the limits ask (waking early on a new limit or a stop).
  struct Pacing {
    std::chrono::steady_clock::time_point paced;
    double allowed = 0;
    uint64_t generation = 0;
    uint64_t user_ios = 0;
  };
  Pacing start_pacing();
  // The Volume's member I/Os so far (its requests': a rebuild's and a scrub's own are not
  // counted): what tells pacing that the array has user I/O.
  uint64_t user_ios() const;
  // I/O the task itself did through the Volume since `before` (user_ios() then), such as
  // a scrub checker's reads of the filesystem's metadata, is not the user's. (A user's I/O
  // in that span, which for the checker's walk of the inodes at the start can be long, goes
  // uncounted with it; one that goes on is seen the next round.)
  void discount_own_ios(Pacing& pacing, uint64_t before) const;
  // `stop`, if given, also ends a wait once it is set (rebuild_cv_ notified).
  void pace(Pacing& pacing, uint64_t written, const std::atomic<bool>* stop = nullptr);
  // The rate pace() would hold to now: the minimum if the array had user I/O since the
  // last round, else the maximum (0: no limit).
  uint64_t current_rate(const Pacing& pacing) const;
  // A round of a background task between two pace() calls: under a limit, step_bytes();
  // with none, all that is left, so its pipeline is never drained early, ended when a limit
  // starts to apply. start_round: false once the array is closing (new limits are counted
  // from here). round_progress, after each piece: counts it in the task's progress
  // (`done` in the task's units, `moved` and `written` bytes) and says whether the round
  // goes on (no stop, no new limits, and no limit come to apply to an unlimited round).
  struct Round {
    std::chrono::steady_clock::time_point window;  // progress counted up to here
    bool limited = false;
    uint64_t bytes = 0;  // moved in this round
  };
  bool start_round(Pacing& pacing, Round& round);
  bool round_progress(const Pacing& pacing, Round& round, uint64_t done, uint64_t moved,
                      uint64_t written);
  // Bytes per round between rate checks: at most 16 MiB, about a quarter second's worth at
  // the current limit.
  uint64_t step_bytes() const;
  // rebuild() and readd(): the checks, the device's superblock, and the start; `since` for
  // a re-add.
  Result<void> recover_onto(unsigned role, Member* device, std::optional<uint64_t> since);
  Result<void> record_checkpoint(unsigned role, uint64_t stripes);
  // Copies the array's per-member metadata areas onto role `role`'s device; fails it if not.
  Result<void> copy_member_areas(unsigned role);
  void stop_rebuild();

  mutable std::mutex mutex_;  // guards master_ and the superblock writes
  Superblock master_;
  std::vector<Member*> by_role_;
  std::vector<Uuid> member_uuids_;
  // Per role, under mutex_: the hot replace under way, its ReplacingMember in the Volume.
  // One that ended is kept in retired_ until the array goes (I/O submitted through it may
  // still be in flight); declared before the Volume and its users, so it outlives them.
  std::array<std::unique_ptr<ReplacingMember>, Geometry::kMaxMembers> replacing_;
  // Per role, under mutex_, while replacing_: the new device's member_uuid, and the device
  // bytes copied and flushed (recorded in its superblock).
  std::array<Uuid, Geometry::kMaxMembers> replace_uuids_{};
  std::array<uint64_t, Geometry::kMaxMembers> replace_checkpoints_{};
  std::vector<std::unique_ptr<ReplacingMember>> retired_;
  std::unique_ptr<Volume> volume_;
  std::unique_ptr<WriteIntent> intent_;    // destroyed before the Volume it records for
  std::unique_ptr<StripeLog> stripe_log_;  // likewise
  bool logging_ = true;                    // OpenOptions::log_partial_stripes
  std::vector<std::string> notes_;
  std::vector<Member*> spares_;
  // Re-added members between their rebuild and their first superblock write: held out of
  // I/O, but written to, so they are current before they serve.
  std::vector<unsigned> rejoining_;
  bool rejoining(unsigned role) const {
    return std::find(rejoining_.begin(), rejoining_.end(), role) != rejoining_.end();
  }

  mutable std::mutex resync_mutex_;
  ResyncProgress resync_;
  std::thread resync_thread_;
  bool closed_ = false;

  // The rebuild thread and its queue; rebuild_mutex_ is taken before mutex_, never after.
  mutable std::mutex rebuild_mutex_;
  std::condition_variable rebuild_cv_;
  std::deque<unsigned> rebuild_queue_;
  RebuildProgress rebuild_;
  bool rebuild_stopping_ = false;
  std::thread rebuild_thread_;
  // The scrub (array_scrub.cpp): its own thread, paced as the rebuild is. scrub_mutex_ is
  // taken before rebuild_mutex_ and resync_mutex_, never after.
  void scrub_loop(bool repair, ScrubChecker* checker, uint64_t from);
  Result<void> start_scrub_from(bool repair, uint64_t from, const Volume::ScrubCounts& so_far);
  // Stops a running scrub; with `keep`, its checkpoint stays for the next open (a close).
  void halt_scrub(bool keep);
  // The array closes: the scrub stops, its checkpoint kept, and none starts any more.
  void close_scrub();
  // The scrub's place (kNoScrub: none to resume) and, once one finished, its end and counts,
  // into master_ and the superblocks.
  // `so_far`: its counts up to there (kept with the checkpoint, a resume goes on from them).
  void record_scrub(uint64_t checkpoint, bool repair, const Volume::ScrubCounts& so_far,
                    bool finished);
  mutable std::mutex scrub_mutex_;
  ScrubChecker* scrub_checker_ = nullptr;  // under scrub_mutex_
  std::condition_variable scrub_cv_;
  ScrubProgress scrub_;
  std::atomic<bool> scrub_stopping_{false};      // set under scrub_mutex_; read by pace() too
  std::atomic<bool> scrub_keep_{false};          // the stop is a close's: the checkpoint stays
  bool scrub_closing_ = false;                   // under scrub_mutex_: no scrub starts any more
  std::atomic<bool> scrub_after_resync_{false};  // resume_scrub() waits for the resync
  std::thread scrub_thread_;
  std::atomic<uint64_t> speed_min_{16u << 20};
  std::atomic<uint64_t> speed_max_{0};
  std::chrono::milliseconds checkpoint_every_{5000};  // OpenOptions::checkpoint_every
  uint64_t speed_generation_ = 0;  // under rebuild_mutex_: bumped by each set_rebuild_speed
  // Per role, under mutex_: member bytes rebuilt (kNotRebuilding when not being rebuilt),
  // written into that member's own superblock.
  std::array<uint64_t, Geometry::kMaxMembers> checkpoints_;
  // Per role, under mutex_: re-added at run time, last current at these array events (the
  // rebuild then skips what the bitmap says it holds).
  std::array<std::optional<uint64_t>, Geometry::kMaxMembers> readd_since_;

  // Failures are recorded by a thread of their own: the listener runs on an I/O thread,
  // which must not wait for its own completions.
  std::mutex queue_mutex_;
  std::condition_variable queue_cv_;
  struct Failure {
    unsigned role;
    uint64_t incarnation;  // the device that failed
    std::string why;
  };
  std::deque<Failure> failed_roles_;
  uint64_t failures_queued_ = 0;    // ever, under queue_mutex_
  uint64_t failures_recorded_ = 0;  // ever, under queue_mutex_
  std::condition_variable recorded_cv_;

  std::mutex event_mutex_;  // guards events_ and is held while it is called (a leaf)
  EventListener events_;
  void emit(ArrayEvent event);
  bool stopping_ = false;
  std::thread recorder_;
};

}  // namespace stripefs
