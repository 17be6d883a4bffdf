#pragma once
// The resume journal of an uncompressed output being written: which blocks
// are on disk, so the next run of the same deck after a kill (the OOM killer,
// a scheduler's time limit, a reboot) continues where the last one stopped.
//
// Order is what makes it true: a block is recorded only after its data is on
// disk. Blocks are recorded in batches, by a thread of the journal's own so
// no writer waits for a sync: written() notes a block whose pwrite
// returned; every 256 MiB or second of them, that thread syncs the output
// (fdatasync) and only then appends their records to the journal and syncs
// it. Paced: a batch's syncs are followed by a pause so that syncing takes
// about sync_share of the time, at most max_journal_pause (each sync
// flushes the device: on a cold 24 GB run written direct, back-to-back
// batches every ~0.35 s cost 2.9-10.8 s of 25-35 s; docs/benchmarks.md). A
// kill loses at most the blocks since the last batch, and those in flight.
// A failed sync is reported by the next written() (and by close()), never
// retried.
// Records carry a checksum: a journal cut short (power loss) ends at its
// last whole record, and one whose bytes are damaged ends before them; a
// block not recorded is simply written again.
// Its header names the output's temporary file (device and inode, which a
// rename keeps) besides the job's fingerprint: a journal resumes only the
// file it was written for, and only a regular file of the running user's is
// read (io/os/TempFiles.hpp: shared folders).
#include "core/Plan.hpp"

#include <algorithm>
#include <atomic>
#include <cstdint>
#include <map>
#include <condition_variable>
#include <mutex>
#include <thread>
#include <optional>
#include <string>
#include <vector>

namespace cvest::io {

// The share of the time a journal's syncs may take: after a batch whose
// syncs took S seconds, the next waits pause_after(S) = S x (1/share - 1),
// at most max_journal_pause (a sync slowed by write-back must not leave a
// kill to lose minutes of blocks); a share outside (0, 1): no pause.
inline constexpr double journal_sync_share = 0.05;
inline constexpr double max_journal_pause = 30.0;
inline double pause_after(double sync_seconds, double share = journal_sync_share) {
  if (!(share > 0 && share < 1)) return 0.0;
  return std::min(max_journal_pause, sync_seconds * (1 / share - 1));
}

// What must be the same for a journal to be resumed: named fields, so a
// refusal can say which one changed.
using Fingerprint = std::map<std::string, std::string>;

class Journal {
 public:
  // Starts the journal at `path` for the output at `data_path` (synced):
  // its fingerprint and the output's identity, then `done` (blocks an
  // earlier run left on disk). Created exclusively at `path`.new and moved
  // to `path` without replacing anything: IoError where either name is taken.
  // `batch_bytes` and `batch_seconds`: a batch is synced when it is that
  // large, or that long after the last, and no sooner than pause_after(its
  // syncs, `sync_share`) after them (tests take other values; 1: no pause).
  Journal(const std::string& path, const std::string& data_path, const Fingerprint& fingerprint,
          const std::vector<Block>& done = {}, std::size_t batch_bytes = std::size_t(256) << 20,
          double batch_seconds = 1.0, double sync_share = journal_sync_share);
  ~Journal();
  Journal(const Journal&) = delete;
  Journal& operator=(const Journal&) = delete;
  // `block` (of `bytes`) was written; recorded once it is on disk. From any
  // thread. Throws IoError where an earlier batch's sync failed.
  void written(const Block& block, std::size_t bytes);
  // Everything written so far: on disk, then recorded.
  void sync();
  // Stops the journal's thread (after its batch in progress); IoError where
  // a sync failed.
  void close();
  // How many batches were synced (a report says so).
  int syncs() const { return syncs_.load(); }
  // The seconds its thread spent in those batches' syncs (batch_times).
  double sync_seconds() const;
  // "journal: N batches synced (S s of syncs, paced to ~P% of the time)", or "not paced".
  std::string text() const;
  // When each batch's syncs began and ended, seconds since the journal started.
  struct Span {
    double begin, end;
  };
  std::vector<Span> batch_times() const;
  // Its header's size: a journal smaller than it plus one record records no block.
  long long header_bytes() const { return header_bytes_; }
  static constexpr long long record_bytes = 40;  // one block's record

  // The blocks the journal at `path` records as on disk, where its
  // fingerprint is `fingerprint` and it names the file at `data_path`;
  // nullopt, with the reason in `why_not` (the field that changed, or that
  // it cannot be read or is not the running user's), otherwise.
  // The seal of a finished output: written once its data and metadata are
  // synced, before it is renamed into place, so that a run killed between
  // the two leaves a file the next run of the same job puts in place rather
  // than computes again. A journal's header with the field state=sealed and
  // no blocks, at `path` (written whole to PATH.new, created exclusively,
  // synced, renamed onto the free name, the folder synced: a seal is there
  // whole or not at all).
  static void seal(const std::string& path, const std::string& data_path, const Fingerprint& fingerprint);
  // Whether the seal at `path` is that of the file at `data_path` for this
  // job (`why_not` says why not).
  static bool sealed(const std::string& path, const std::string& data_path, const Fingerprint& fingerprint,
                     std::string& why_not);

  static std::optional<std::vector<Block>> read(const std::string& path, const std::string& data_path,
                                                const Fingerprint& fingerprint, std::string& why_not);

 private:
  std::string path_, data_path_;
  int fd_ = -1, data_fd_ = -1;
  std::size_t batch_bytes_;
  double batch_seconds_, sync_share_;
  long long header_bytes_ = 0;
  mutable std::mutex pending_m_;
  std::mutex append_m_;
  std::condition_variable wake_;
  std::vector<Block> pending_;
  std::size_t pending_bytes_ = 0;
  bool stopping_ = false;
  std::string failed_;  // the failed sync's message; empty while none failed
  std::thread syncer_;
  void start_syncer();
  std::atomic<int> syncs_{0};  // read by other threads while the journal's thread counts
  std::vector<Span> batch_times_;  // under pending_m_
  long written_count_ = 0;        // blocks written() (under pending_m_)
  std::atomic<long> recorded_{0};  // blocks recorded and synced (a fault's message says so)
};

}  // namespace cvest::io
