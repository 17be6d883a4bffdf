#pragma once
// Batch jobs: a deck's strategy x layout product run file to file through the
// pipeline, and the verifier. Reports as a table, JSON and CSV.
#include "app/Bench.hpp"
#include "app/Deck.hpp"
#include "app/Ranks.hpp"
#include "core/pipeline/Pipeline.hpp"
#include "core/Plan.hpp"
#include "core/Spaces.hpp"
#include "io/Disk.hpp"
#include "io/Generator.hpp"
#include "io/Input.hpp"
#include "io/OutputFile.hpp"
#include "io/OutputLock.hpp"

#include <nlohmann/json.hpp>

#include <iosfwd>
#include <string>
#include <vector>

namespace cvest::app {

// One rank's part of a job in a distributed run (its median run).
struct RankStats {
  double seconds[phase_count] = {};
  double bytes[phase_count] = {};
  double total_s = 0;
  int blocks = 0;
  double peak_rss_bytes = 0;
};

struct JobReport {
  Strategy strategy;
  LayoutKind layout;
  Precision precision;
  bool wrote_output = false;  // the first job writes; the others are checked against it
  int runs = 1;
  PipelineKind pipeline = PipelineKind::overlapped;  // the one it ran (never automatic)
  int pipeline_threads = 0;                          // per_thread: how many
  Index kernel_ids = 0;  // ids per kernel call: the plan's block ids, or a LayoutLeft per-thread tile's
  PipelineStats stats;        // the median run by total time
  double peak_rss_bytes = 0;
  // The job's kernel against a copy of the same bytes: every other kernel
  // call's cv copied into its consumed discount buffer right after it, on
  // the thread(s) that ran it, with the stores it used (PipelineStats'
  // roof). Both count a call's discount read and cv written.
  double roof_GBps = 0;                   // the copies' GB/s in the median run
  double kernel_roof_fraction = 0;        // the kernel's GB/s over roof_GBps, median run
  double kernel_roof_min = 0, kernel_roof_max = 0;  // that fraction's range over the job's runs
  // A distributed run (at rank 0): each rank's part, rank by rank; `stats`
  // then holds the ranks together (busy seconds and bytes summed, total_s
  // the slowest rank's). Empty in one process.
  std::vector<RankStats> per_rank;
  double parts_stored_s = 0;  // compressed output: rank 0 storing the other ranks' chunks
  int resumed_blocks = 0;     // blocks a killed run left on disk, not written again (summed over ranks at rank 0)
  int slowest_rank() const;
  double load_balance() const;  // the slowest rank's wall time over the mean
};

struct RunReport {
  BuildFacts build;
  std::string deck, input, output;
  Compression output_compression = Compression::none;
  int output_gzip_level = 0;                // 0 when not compressed
  Index output_chunk_ids = 0;               // ids per (1, ids, K) output chunk
  // How the output's data reached the disk (io::OutputFile::writes_text):
  // "past the page cache (O_DIRECT, ...)" or "through the page cache: why".
  std::string output_writes;
  io::CubeStorage input_storage;               // discount's, and how it is read
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
};

// Runs every job of the deck. With plan_only, checks everything that can be
// checked before a job starts (deck, input, output path, disk space, which
// pipeline each job takes) and returns the plan without writing anything:
// jobs carry no timings then.
RunReport run_deck(const Deck& deck, std::ostream& progress, bool plan_only = false);
// The same over `ranks`: every rank runs its share of each job's blocks and
// the ranks write one output, the same bytes as one process writes. Every
// rank returns; rank 0's report holds every rank's figures. An error on any
// rank is thrown on every rank (Ranks::together).
RunReport run_deck(const Deck& deck, std::ostream& progress, const Ranks& ranks, bool plan_only = false);

void print_run_table(const RunReport& report, std::ostream& out);
// What a plan_only report says a run would do: input and how it is read,
// blocks and memory, output size against free disk, each job's pipeline.
void print_plan(const RunReport& report, std::ostream& out);
nlohmann::json to_json(const RunReport& report);
std::string to_csv(const RunReport& report);

struct VerifyOptions {
  std::string output, input;
  std::string dataset = "cv", multby = "multBy", discount = "discount";
  std::size_t memory_budget = std::size_t(1) << 30;
};

// Where `cvest verify` has no deck: the names a cvest output records. The cv
// dataset is the one carrying cvest's attributes (where `options.dataset` is
// not it, e.g. one written into a group), and the input's multBy and
// discount are the names its attributes give. Unchanged where the output
// records none.
void names_from_output(VerifyOptions& options);

// Recomputes multBy * discount block by block and compares bit for bit.
// Throws VerifyError naming the first differing element.
void verify_output(const VerifyOptions& options, std::ostream& progress);

// The check above reads the input and the output with cvest's own readers,
// as the jobs do; a reader that finds the wrong bytes (it once read datasets
// behind an external link in the wrong file) would fool both the same way.
// So verify_output also reads a sample through HDF5's H5Dread alone, which
// must give the same bits: the first and the last rows of the plan's first,
// last and six blocks between. VerifyError names the first that differs.
void cross_check_readers(const VerifyOptions& options, const io::InputFile& input, const io::CubeReader& cv_reader,
                         const BlockPlan& plan, Precision precision);

// Writes a report's `text` to `path` through a temporary file, so a failed
// write leaves nothing half-written (IoError naming the path).
void write_report_file(const std::string& path, const std::string& text);

// Peak resident set size of this process so far, in bytes.
double peak_rss_bytes();

}  // namespace cvest::app
