#include "fs/daemon/status.hpp"

#include <chrono>
#include <ctime>

#include "fs/daemon/control.hpp"
#include "fs/daemon/killpriv_v2.hpp"
#include "journal/stripe_journal.hpp"
#include "raid/local_ring.hpp"
#include "raid/member_devices.hpp"
#include "raid/pmem_member.hpp"

namespace stripefs::fs {

std::string control_socket_path(const Uuid& fs_uuid) {
  return std::string(kControlDirectory) + "/" + format_uuid(fs_uuid) + ".sock";
}

namespace {

using nlohmann::json;

// One role's state, as status names it.
std::string role_state(Array& array, const Superblock& sb, unsigned role) {
  Volume& volume = array.volume();
  if (volume.active(role)) return "active";
  if (volume.recovering(role)) return "rebuilding";
  Member* m = volume.member(role);
  // Out of service: faulty if recorded so, or failed while running (its record on the way);
  // otherwise missing (not given, or kept out at assembly, perhaps after a re-add that failed
  // through no fault of its own).
  const bool recorded_faulty = sb.member_states[role] == MemberState::faulty ||
                               sb.member_states[role] == MemberState::rebuilding ||
                               (m != nullptr && sb.member_states[role] == MemberState::active);
  return recorded_faulty ? "faulty" : "missing";
}

json counters_json(const Member* m) {
  const MemberCounters c = m != nullptr ? m->counters() : MemberCounters{};
  return {{"backend", m != nullptr ? std::string(member_backend_name(*m)) : ""},
          {"reads", c.reads},
          {"writes", c.writes},
          {"read_bytes", c.read_bytes},
          {"written_bytes", c.written_bytes},
          {"errors", c.errors},
          {"corrected", c.corrected},
          {"checksum_errors", c.checksum_errors}};
}

// The running task, in member bytes: a rebuild or a hot replace (per role), or a resync.
json task_json(Array& array) {
  const Geometry& g = array.volume().geometry();
  const RebuildProgress rebuild = array.rebuild_progress();
  if (rebuild.running) {
    const double rate = rebuild.seconds > 0 ? rebuild.bytes / rebuild.seconds : 0.0;
    const uint64_t unit = rebuild.replace ? 1 : g.chunk_size();  // a replace counts bytes
    const uint64_t done = rebuild.done * unit, total = rebuild.total * unit;
    return {
        {"kind", rebuild.replace ? "replace" : "rebuild"},
        {"role", rebuild.current},
        {"queued", rebuild.roles.size()},
        {"done", done},
        {"total", total},
        {"rate", static_cast<uint64_t>(rate)},
        {"eta_seconds", rate > 0 ? json(static_cast<uint64_t>((total - done) / rate)) : json()}};
  }
  const ScrubProgress scrub = array.scrub_progress();
  if (scrub.running) {
    const double rate =
        scrub.seconds > 0 ? (scrub.done - scrub.first) * g.chunk_size() / scrub.seconds : 0.0;
    const uint64_t done = scrub.done * g.chunk_size(), total = scrub.total * g.chunk_size();
    return {
        {"kind", scrub.repair ? "scrub (repair)" : "scrub"},
        {"role", nullptr},
        {"done", done},
        {"total", total},
        {"rate", static_cast<uint64_t>(rate)},
        {"eta_seconds", rate > 0 ? json(static_cast<uint64_t>((total - done) / rate)) : json()}};
  }
  const ResyncProgress resync = array.resync_progress();
  if (!resync.finished) {
    return {{"kind", "resync"},
            {"role", nullptr},
            {"done", resync.done * g.chunk_size()},
            {"total", resync.total * g.chunk_size()},
            {"rate", nullptr},
            {"eta_seconds", nullptr}};
  }
  return nullptr;
}

std::string utc(std::chrono::system_clock::time_point t) {
  const std::time_t seconds = std::chrono::system_clock::to_time_t(t);
  std::tm tm{};
  gmtime_r(&seconds, &tm);
  char text[32];
  std::strftime(text, sizeof(text), "%Y-%m-%dT%H:%M:%SZ", &tm);
  return text;
}

}  // namespace

nlohmann::json scrub_json(Array& array) {
  const ScrubProgress p = array.scrub_progress();
  if (!p.running && !p.ended) return nullptr;
  json bad = json::array();
  for (size_t role = 0; role < p.counts.bad_chunks.size(); ++role) {
    if (p.counts.bad_chunks[role] == 0) continue;
    Member* m = array.member_device(static_cast<unsigned>(role));
    bad.push_back({{"role", role},
                   {"path", m != nullptr ? m->name() : ""},
                   {"count", p.counts.bad_chunks[role]}});
  }
  return {{"running", p.running},
          {"repair", p.repair},
          {"done", p.done},
          {"total", p.total},
          {"mismatched", p.counts.mismatched},
          {"repaired", p.counts.repaired},
          {"unrepairable", p.counts.unrepairable},
          {"bad_data", p.counts.bad_data},
          {"bad_parity", p.counts.bad_parity},
          {"verified_blocks", p.counts.verified_blocks},
          {"checksum_failures", p.counts.checksum_failures},
          {"checksums", p.checksums},
          {"resumed_from", p.first},
          {"before_mount", p.before_mount},
          {"bad_chunks", bad},
          {"seconds", p.seconds},
          {"stopped", p.stopped},
          {"error", p.error ? json(p.error->message) : json()},
          {"ended", p.ended ? json(utc(*p.ended)) : json()}};
}

nlohmann::json status_json(Array& array, Filesystem& fs, const std::string& mountpoint,
                           const ArrayControl* control) {
  const Superblock sb = array.superblock();
  Volume& volume = array.volume();
  nlohmann::json members = nlohmann::json::array();  // the array's view (kept for scripts)
  nlohmann::json all = nlohmann::json::array();      // every device, spares included
  bool rebuilding = false, replacing = false;
  for (unsigned i = 0; i < volume.geometry().members(); ++i) {
    Member* m = array.member_device(i);
    const std::string state = control != nullptr && m != nullptr && control->removed(m)
                                  ? "removed"
                                  : role_state(array, sb, i);
    rebuilding = rebuilding || state == "rebuilding";
    members.push_back({{"role", i}, {"device", m != nullptr ? m->name() : ""}, {"state", state}});
    json entry = {{"role", i}, {"path", m != nullptr ? m->name() : ""}, {"state", state}};
    entry.update(counters_json(m));
    all.push_back(entry);
    if (Member* r = array.replacement(i)) {  // the new device of a hot replace
      replacing = true;
      json next = {{"role", i}, {"path", r->name()}, {"state", "replacement"}};
      next.update(counters_json(r));
      all.push_back(next);
    }
  }
  size_t spares = 0;
  if (control != nullptr) {
    for (json extra : control->extra_members_json()) {
      spares += extra["state"] == "spare";
      extra["role"] = nullptr;
      all.push_back(extra);
    }
  }
  const ResyncProgress resync = array.resync_progress();
  const RebuildProgress rebuild = array.rebuild_progress();
  const bool degraded = volume.missing_members() > 0;
  const std::string state = volume.failed()    ? "failed"
                            : rebuilding       ? "rebuilding"
                            : degraded         ? "degraded"
                            : replacing        ? "replacing"
                            : !resync.finished ? "resyncing"
                                               : "clean";
  std::string action;
  if (state == "failed") {
    action =
        "Too many members are out of service: the array cannot run. Bring the missing "
        "members back and remount (with -o force if they disagree).";
  } else if (state == "rebuilding" && !rebuild.running) {
    action = "The rebuild stopped" +
             (rebuild.error ? ": " + rebuild.error->message : std::string()) +
             ". Resume it with 'stripefsctl rebuild'.";
  } else if (state == "rebuilding") {
    action = "Wait for the rebuild to finish (stripefsctl status --wait).";
  } else if (state == "degraded" && rebuild.error && !rebuild.running) {
    action = "The rebuild stopped: " + rebuild.error->message +
             ". Resume it with 'stripefsctl rebuild', or add another device.";
  } else if (state == "degraded") {
    action = spares > 0 ? "Start the rebuild onto the spare with 'stripefsctl rebuild'."
                        : "Replace the failed member: 'stripefsctl add MOUNTPOINT DEVICE' "
                          "rebuilds onto a new device.";
  } else if (state == "replacing") {
    action =
        "Wait for the replace to finish (stripefsctl status --wait); the old device serves "
        "until then.";
  } else if (state == "clean" && rebuild.error && !rebuild.running) {
    action = "The last replace or rebuild stopped: " + rebuild.error->message + ".";
  } else if (state == "resyncing") {
    action = "Wait for the resync to finish; the array is usable meanwhile.";
  } else if (const ScrubProgress scrub = array.scrub_progress();
             state == "clean" && !scrub.running && scrub.counts.unrepairable > 0) {
    action = fmt::format(
        "The last scrub found {} inconsistent stripe(s) in which no chunk could be named bad "
        "(left as they were; the log names the stripes): the files there may hold wrong data.",
        scrub.counts.unrepairable);
  }
  const FsStatfs usage = fs.statfs();
  const FsSuperblock& fsb = fs.superblock();
  return {
      {"mountpoint", mountpoint},
      {"state", state},
      {"members", all},
      {"task", task_json(array)},
      {"scrub", scrub_json(array)},
      {"action", action},
      {"notes", array.notes()},
      {"rebuild_error", rebuild.error && !rebuild.running ? json(rebuild.error->message) : json()},
      {"rebuild_speed",
       {{"min", array.rebuild_speed().first}, {"max", array.rebuild_speed().second}}},
      {"array",
       {{"uuid", format_uuid(sb.array_uuid)},
        {"level", std::string(to_string(sb.level))},
        {"chunk_size", sb.chunk_size},
        {"size", volume.size()},
        {"degraded", volume.missing_members() > 0},
        {"failed", volume.failed()},
        {"members", members},
        {"write_hole_journal", sb.journal_size == 0              ? "none"
                               : is_zero(sb.journal_device_uuid) ? "members"
                                                                 : "device"},
        {"write_hole_logging", array.logs_partial_stripes()},
        {"resync",
         {{"finished", resync.finished},
          {"done", resync.done},
          {"total", resync.total},
          {"repaired", resync.repaired}}}}},
      {"filesystem",
       {{"uuid", format_uuid(fsb.uuid)},
        {"label", fsb.label},
        {"data_checksums", fsb.has_checksums()},
        {"block_size", kBlockSize},
        {"blocks", usage.blocks},
        {"blocks_free", usage.blocks_free},
        {"inodes", usage.files},
        {"inodes_free", usage.files_free}}}};
}

nlohmann::json volume_stats_json(const VolumeStats& v) {
  return {{"full_stripe_writes", v.full_stripe_writes},
          {"full_stripe_bytes", v.full_stripe_bytes},
          {"partial_stripe_writes", v.partial_stripe_writes},
          {"partial_stripe_bytes", v.partial_stripe_bytes},
          {"rmw_writes", v.rmw_writes},
          {"rcw_writes", v.rcw_writes},
          {"degraded_writes", v.degraded_writes},
          {"prereads", v.prereads},
          {"preread_bytes", v.preread_bytes},
          {"degraded_reads", v.degraded_reads},
          {"member_write_ios", v.member_write_ios},
          {"member_read_ios", v.member_read_ios},
          {"direct_reads", v.direct_reads}};
}

nlohmann::json stats_json(Array& array, Filesystem& fs, const IoEngine* engine) {
  const IoEngineStats e = engine != nullptr ? engine->stats() : IoEngineStats{};
  const DataArenaStats a = DataArena::shared().stats();
  const VolumeStats v = array.volume().stats();
  const FsStats f = fs.stats();
  const MetaStats m = fs.meta_stats();
  StripeJournalStats w;
  if (auto* log = dynamic_cast<StripeJournal*>(array.stripe_log())) w = log->stats();
  // Ranges the pmem members made durable (pmem_member.hpp): at flushes and FUA writes only.
  uint64_t pmem_persists = 0;
  for (unsigned i = 0; i < array.volume().geometry().members(); ++i) {
    if (auto* pmem = dynamic_cast<const PmemMember*>(array.member_device(i))) {
      pmem_persists += pmem->persist_calls();
    }
  }
  return {{"volume", volume_stats_json(v)},
          {"fuse",
           {{"killpriv_v2", killpriv::negotiated()},
            {"capability_queries", killpriv::capability_queries()}}},
          {"filesystem",
           {{"bytes_copied_in", f.bytes_copied_in},
            {"bytes_shared", f.bytes_shared},
            {"read_copy_bytes", f.read_copy_bytes},
            {"edge_copy_bytes", f.edge_copy_bytes},
            {"edge_fill_bytes", f.edge_fill_bytes},
            {"writeback_bytes", f.writeback_bytes},
            {"writeback_done_bytes", f.writeback_done_bytes},
            {"writebacks", f.writebacks},
            {"full_stripe_writebacks", f.full_stripe_writebacks},
            {"extent_leaves_written", f.extent_leaves_written},
            {"extent_index_blocks_written", f.extent_index_blocks_written},
            {"checksum_recovered", f.checksum_recovered},
            {"checksum_unrecoverable", f.checksum_unrecoverable}}},
          {"metadata",
           {{"commits", m.commits},
            {"committed_blocks", m.committed_blocks},
            {"checkpoints", m.checkpoints},
            {"checkpointed_blocks", m.checkpointed_blocks},
            {"block_reads", m.block_reads},
            {"healed_blocks", m.healed_blocks},
            {"journal_blocks_written", m.journal_blocks_written},
            {"journal_padding_blocks", m.journal_padding_blocks}}},
          {"write_hole_journal",
           {{"stripes_logged", w.stripes_logged},
            {"bytes_logged", w.bytes_logged},
            {"checkpoints", w.checkpoints},
            {"waits_for_space", w.waits_for_space}}},
          {"io",
           {{"engine_requests", e.requests},
            {"engine_fixed_requests", e.fixed_requests},
            {"engine_submissions", e.submit_calls},
            {"engine_largest_batch", e.largest_batch},
            {"local_ring_requests", LocalRing::requests()},
            {"local_ring_fixed_requests", LocalRing::fixed_requests()},
            {"data_arena_bytes", a.chunks * DataArena::kChunkBytes},
            {"data_arena_bytes_in_use", a.bytes_in_use},
            {"data_arena_heap_fallbacks", a.refused},
            {"pmem_persists", pmem_persists}}}};
}

}  // namespace stripefs::fs
