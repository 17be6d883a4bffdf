#pragma once
// A run's second stage: the deck and its input decided into values before
// any job starts (shapes, block plans, each rank's share, the output, each
// job's pipeline). A --plan prints it; the jobs run it.
#include "app/Deck.hpp"
#include "app/Ranks.hpp"
#include "core/Plan.hpp"
#include "core/Strategy.hpp"
#include "io/cube/CubeReader.hpp"
#include "io/os/DirectWriter.hpp"
#include "io/input/Input.hpp"
#include "io/output/OutputFile.hpp"

#include <iosfwd>
#include <memory>
#include <vector>

namespace cvest::app {

struct JobPlan {
  Strategy strategy = Strategy::flat;
  LayoutKind layout = LayoutKind::right;
  PipelineKind pipeline = PipelineKind::overlapped;  // the one it takes (never automatic)
  int pipeline_threads = 0;                          // per_thread: how many
  bool read_ahead = false;                           // per_thread: each thread reads its next block ahead
};

struct RunPlan {
  // The input, open, its chunk cache sized for the run's blocks; null in a
  // --plan of an input still to be generated (shape from the deck then).
  std::shared_ptr<const io::InputFile> input;
  io::InputShape shape;
  Precision precision = Precision::f64;  // the run's: [run] precision, else NumPy's promotion of the inputs
  io::CubeStorage input_storage;         // discount's at that precision, and how it is read
  // One block plan per layout of the deck, in its order: blocks suit the
  // layout they are computed in (core/Plan.hpp).
  std::vector<BlockPlan> blocks;
  // Each plan's blocks by rank: rank r runs blocks [begin, end) of
  // blocks[p] (rank_blocks[p][r]); one range of all blocks in one process.
  std::vector<std::vector<Range>> rank_blocks;
  io::OutputSpec output;       // what the first job writes
  std::size_t direct_memory = 0;  // the output's direct writes' aligned copies (io::direct_write_memory), in the budget
  std::size_t read_memory = 0;    // the input's direct reads' aligned buffers (io::direct_read_memory), in the budget
  std::size_t held_memory = 0;    // the input's held decoded chunks (app/run/ChunkHolding.hpp), in the budget
  std::size_t multby_memory = 0;  // multBy read once and kept (its chunks too large to read by rows), in the budget
  // what blocks cannot have
  std::size_t reserved_memory() const { return direct_memory + read_memory + held_memory + multby_memory; }
  std::vector<JobPlan> jobs;   // the deck's strategies x layouts, strategy by strategy

  const BlockPlan& plan(LayoutKind layout) const;
  BlockPlan share(LayoutKind layout, int rank) const;  // `rank`'s blocks of plan(layout)
};

// `input_on_disk` false: a --plan of an input the deck would generate.
// Prints what it decides to `progress` (the input's storage, each layout's
// blocks) and warns of what will be slow. Collective; throws InputError for
// what no job could run (an unreadable input, a pipeline that does not apply).
RunPlan plan_run(const Deck& deck, const Ranks& ranks, bool input_on_disk, std::ostream& progress);

}  // namespace cvest::app
