#include "fs/daemon/status.hpp"

#include "fs/daemon/control.hpp"
#include "journal/stripe_journal.hpp"

namespace stripefs::fs {

std::string control_socket_path(const Uuid& fs_uuid) {
  return std::string(kControlDirectory) + "/" + format_uuid(fs_uuid) + ".sock";
}

nlohmann::json status_json(Array& array, Filesystem& fs, const std::string& mountpoint) {
  const Superblock sb = array.superblock();
  Volume& volume = array.volume();
  nlohmann::json members = nlohmann::json::array();
  for (unsigned i = 0; i < volume.geometry().members(); ++i) {
    Member* m = volume.member(i);
    // Out of service: faulty if recorded so, or failed while running (its record on the
    // way); otherwise missing (not given, or kept out at assembly, perhaps after a re-add
    // that failed through no fault of its own).
    const bool recorded_faulty = sb.member_states[i] == MemberState::faulty ||
                                 (m != nullptr && sb.member_states[i] == MemberState::active);
    members.push_back({{"role", i},
                       {"device", m != nullptr ? m->name() : ""},
                       {"state", volume.active(i)  ? "active"
                                 : recorded_faulty ? "faulty"
                                                   : "missing"}});
  }
  const ResyncProgress resync = array.resync_progress();
  const FsStatfs usage = fs.statfs();
  const FsSuperblock& fsb = fs.superblock();
  return {{"mountpoint", mountpoint},
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
            {"block_size", kBlockSize},
            {"blocks", usage.blocks},
            {"blocks_free", usage.blocks_free},
            {"inodes", usage.files},
            {"inodes_free", usage.files_free}}}};
}

nlohmann::json stats_json(Array& array, Filesystem& fs) {
  const VolumeStats v = array.volume().stats();
  const FsStats f = fs.stats();
  const MetaStats m = fs.meta_stats();
  StripeJournalStats w;
  if (auto* log = dynamic_cast<StripeJournal*>(array.stripe_log())) w = log->stats();
  return {{"volume",
           {{"full_stripe_writes", v.full_stripe_writes},
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
            {"direct_reads", v.direct_reads}}},
          {"filesystem",
           {{"bytes_copied_in", f.bytes_copied_in},
            {"bytes_shared", f.bytes_shared},
            {"edge_fill_bytes", f.edge_fill_bytes},
            {"writeback_bytes", f.writeback_bytes},
            {"writeback_done_bytes", f.writeback_done_bytes},
            {"writebacks", f.writebacks},
            {"full_stripe_writebacks", f.full_stripe_writebacks}}},
          {"metadata",
           {{"commits", m.commits},
            {"committed_blocks", m.committed_blocks},
            {"checkpoints", m.checkpoints},
            {"checkpointed_blocks", m.checkpointed_blocks},
            {"block_reads", m.block_reads},
            {"journal_blocks_written", m.journal_blocks_written},
            {"journal_padding_blocks", m.journal_padding_blocks}}},
          {"write_hole_journal",
           {{"stripes_logged", w.stripes_logged},
            {"bytes_logged", w.bytes_logged},
            {"checkpoints", w.checkpoints},
            {"waits_for_space", w.waits_for_space}}}};
}

}  // namespace stripefs::fs
