#pragma once
// What both pipelines record as they run: phase spans, the progress line,
// and the first failure of any thread.
#include "core/pipeline/Pipeline.hpp"

#include <fmt/format.h>
#include <fmt/ostream.h>

#include <chrono>
#include <exception>
#include <iostream>
#include <mutex>
#include <utility>
#include <ostream>
#include <unistd.h>

namespace cvest::pipeline_detail {

using Clock = std::chrono::steady_clock;

// Records phase spans from several threads.
class Recorder {
 public:
  explicit Recorder(PipelineStats& stats) : stats_(stats), start_(Clock::now()) {}
  double now() const { return std::chrono::duration<double>(Clock::now() - start_).count(); }
  template <class F>
  void time(int block, Phase phase, double bytes, F&& f) {
    const double b = now();
    f();
    span(block, phase, bytes, b, now());
  }
  // A phase with nothing to do for this block (a host LayoutRight block is
  // computed where it was read): a span of no length, so timelines show none.
  void nothing(int block, Phase phase) {
    const double t = now();
    span(block, phase, 0.0, t, t);
  }
  // A phase that ran asynchronously, from when it was issued to when a fence
  // saw it finish.
  void span(int block, Phase phase, double bytes, double begin, double end) {
    std::lock_guard lock(m_);
    stats_.seconds[int(phase)] += end - begin;
    stats_.bytes[int(phase)] += bytes;
    stats_.timeline.push_back({block, phase, begin, end});
  }
  // A kernel call that ran right after a roof copy of its block
  // (PipelineStats::kernel_after_roof_s); its span is recorded as usual.
  void after_roof(double seconds, double bytes) {
    std::lock_guard lock(m_);
    stats_.kernel_after_roof_s += seconds;
    stats_.kernel_after_roof_bytes += bytes;
  }
  // The copy roof of a sampled kernel call (roof_sampled) of `bytes` that
  // took kernel_s, timed by `copy`.
  template <class F>
  void roof(double bytes, double kernel_s, F&& copy) {
    const double b = now();
    copy();
    const double s = now() - b;
    std::lock_guard lock(m_);
    stats_.roof.push_back({bytes, kernel_s, s});
  }

 private:
  PipelineStats& stats_;
  Clock::time_point start_;
  std::mutex m_;
};

// What a kernel call over `dates` x `ids` moves, and its roof alike: its
// discount read, its cv written and its multBy rows read once (as large as
// the discount itself for a one-date block).
inline double kernel_call_bytes(Index dates, Index ids, Index K, double esize) {
  return double((2 * dates + 1) * ids * K) * esize;
}
inline double block_kernel_bytes(const Block& blk, Index K, double esize) {
  return kernel_call_bytes(blk.dates.size(), blk.ids.size(), K, esize);
}

// A progress line as blocks finish, safe to call from several threads: on a
// terminal one line rewritten at most twice a second, the last block always
// shown; in a log (a batch job's stderr) a line at most every 10 s and the
// job's last block (PipelineOptions::ends_job), so an hour's job writes
// hundreds of lines, not thousands, and a deck of short jobs one a job.
class ProgressLine {
 public:
  ProgressLine(const BlockPlan& plan, const PipelineOptions& options, Recorder& rec, std::ostream& out, double esize)
      : plan_(plan), options_(options), rec_(rec), out_(out), esize_(esize),
        tty_((&out == &std::cerr || &out == &std::clog) && isatty(STDERR_FILENO)), last_(tty_ ? -1 : 0) {}
  void block_done(int blocks_done) {
    if (!options_.progress) return;
    std::lock_guard lock(m_);
    const int nblocks = int(plan_.blocks.size());
    const double elapsed = rec_.now();
    const bool last = blocks_done == nblocks && (tty_ || options_.ends_job);
    if (elapsed - last_ < (tty_ ? 0.5 : 10.0) && !last) return;
    last_ = elapsed;
    const double done = double(blocks_done) / nblocks;
    const double gbps = double(plan_.T * plan_.N * plan_.K) * esize_ * done / elapsed / 1e9;
    fmt::print(out_, "{}{} block {}/{}  {:.2f} GB/s in  {:.1f} s left{}", tty_ ? "\r" : "", options_.label,
               blocks_done, nblocks, gbps, elapsed / done - elapsed, tty_ ? "   " : "\n");
    out_.flush();
  }
  void finish() {
    if (options_.progress && tty_) fmt::print(out_, "\n");
  }

 private:
  const BlockPlan& plan_;
  const PipelineOptions& options_;
  Recorder& rec_;
  std::ostream& out_;
  double esize_;
  bool tty_;
  double last_;  // when the last line was written (a log's first waits 10 s)
  std::mutex m_;
};

// First exception wins; everyone else stops.
class Failure {
 public:
  void set(std::exception_ptr e) {
    std::lock_guard lock(m_);
    if (!first_) first_ = e;
  }
  void rethrow() {
    if (first_) std::rethrow_exception(first_);
  }
  bool failed() {
    std::lock_guard lock(m_);
    return bool(first_);
  }

 private:
  std::mutex m_;
  std::exception_ptr first_;
};

// A pipeline's end, once its threads are done: the progress line closed,
// the run's time taken, the first failure thrown, else the stats.
inline PipelineStats finish_run(ProgressLine& progress, PipelineStats& stats, const Recorder& rec, Failure& failure) {
  progress.finish();
  stats.total_s = rec.now();
  failure.rethrow();
  return std::move(stats);
}

}  // namespace cvest::pipeline_detail
