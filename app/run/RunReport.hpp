#pragma once
// What a run did: the deck's plan and each job's figures (its median run's;
// its roof's from all its runs), as the report formats print them
// (app/run/ReportFormats.hpp).
#include "app/run/RankStats.hpp"
#include "core/Names.hpp"
#include "core/Plan.hpp"
#include "core/Spaces.hpp"
#include "core/Strategy.hpp"
#include "core/pipeline/Pipeline.hpp"
#include "io/cube/CubeReader.hpp"

#include <string>
#include <vector>

namespace cvest::app {

struct JobReport {
  Strategy strategy;
  LayoutKind layout;
  Precision precision;
  bool wrote_output = false;  // the first job writes; the others are checked against it
  int runs = 1;
  PipelineKind pipeline = PipelineKind::overlapped;  // the one it ran (never automatic)
  int pipeline_threads = 0;                          // per_thread: how many
  bool read_ahead = false;  // per_thread: each thread reads its next block ahead (planned; as run once it ran)
  Index kernel_ids = 0;  // ids per kernel call: the plan's block ids, or a LayoutLeft per-thread tile's
  PipelineStats stats;        // the median run by total time
  double peak_rss_bytes = 0;
  // The job's kernel against a copy of the same bytes (PipelineStats'
  // roof), from the pairs of all its runs together (all its ranks' at rank
  // 0): a job's blocks may give each run only a few pairs of short calls,
  // and the median of one run's few swung 0.5-1.2 run to run (seed deck).
  std::vector<PipelineStats::RoofCall> roof_calls;
  double roof_GBps = 0;                   // the copies' median GB/s
  double kernel_roof_fraction = 0;        // the median over pairs of the kernel's GB/s over its copy's
  MedianInterval kernel_roof_interval;    // what holds that median with 95% confidence
  std::string roof_interval_text() const;  // "0.90-1.00", "-" where there is none
  double kernel_roof_min = 0, kernel_roof_max = 0;  // each run's own median: their range over the job's runs
  // roof_GBps, kernel_roof_fraction and its interval from roof_calls.
  void summarize_roof();
  // A distributed run (at rank 0): each rank's part, rank by rank; `stats`
  // then holds the ranks together (busy seconds and bytes summed, total_s
  // the slowest rank's). Empty in one process.
  std::vector<RankStats> per_rank;
  double parts_stored_s = 0;  // compressed output: rank 0 storing the other ranks' chunks
  // discount's chunks cvest decoded in its last run, and how many different
  // ones (equal: each once); 0 where it decoded none (read with pread or by HDF5).
  std::uint64_t chunks_decoded = 0, chunks_distinct = 0;
  int resumed_blocks = 0;     // blocks a killed run left on disk, not written again (summed over ranks at rank 0)
  int slowest_rank() const;
  double load_balance() const;  // the slowest rank's wall time over the mean
};

// Where the time goes, from the fastest job's own phases: each phase's busy
// seconds, the kernel's as it runs without the run's own measurement (the
// calls a roof copy warmed counted at the others' speed), and the share of
// them a faster kernel (a GPU) could save at most.
struct TimeShares {
  const JobReport* job = nullptr;    // the fastest; null where none was busy
  double seconds[phase_count] = {};  // busy seconds by phase, the kernel's unwarmed
  double kernel_as_run = 0;          // the kernel's busy seconds as measured
  double busy = 0;                   // their sum
  double share(Phase phase) const { return busy > 0 ? seconds[int(phase)] / busy : 0; }
};

struct RunReport {
  BuildFacts build;
  std::string deck, input, output;
  CompressionSpec output_compression;
  Index output_chunk_ids = 0;               // ids per (1, ids, K) output chunk
  // How the output's data reached the disk (io::OutputFile::writes_text):
  // "past the page cache (O_DIRECT, ...)" or "through the page cache: why".
  std::string output_writes;
  io::CubeStorage input_storage;               // discount's, and how it is read
  // How discount's bytes were read (io::InputFile::reads_text): "past the
  // page cache where it did not hold them (...)" or "through the page cache: why".
  std::string input_reads;
  double generated_input_bytes = 0;         // an input [input] generate makes first, else 0
  Index T = 0, N = 0, K = 0;
  std::size_t memory_budget = 0;
  // One plan per layout of the deck: blocks suit the layout they are
  // computed in (core/Plan.hpp).
  std::vector<BlockPlan> plans;
  const BlockPlan& plan(LayoutKind layout) const;
  // Distributed runs (app/Ranks.hpp): how many ranks, and each plan's
  // blocks by rank (rank r runs blocks [begin, end) of plans[p]:
  // rank_blocks[p][r]); one range of all blocks in one process.
  int ranks = 1, ranks_on_node = 1;
  std::vector<std::vector<Range>> rank_blocks;
  std::vector<JobReport> jobs;
  bool verified = false;
  // What flat measured on first use before this run's jobs (app/FirstUse.hpp):
  // one line, "" where nothing was measured.
  std::string first_use;
  double input_GBps(const JobReport& job) const;  // the cube's input bytes over the job's total time
  const JobReport* fastest() const;  // by total time; null where no job ran
  const JobReport* slowest() const;
  TimeShares time_shares() const;
};

}  // namespace cvest::app
