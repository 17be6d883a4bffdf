#pragma once
// cvest's commands (run, verify, bench, transfers, generate, info; tune in
// app/tune/Tune.hpp, included here), each
// taking its arguments as values and returning its report. The command line
// (app/main.cpp, app/CommandLine.hpp) and `import cvest` (python/module.cpp)
// are front ends over these alone: what a command does is written once.
// Every command but info needs Kokkos initialised.
#include "app/bench/Report.hpp"
#include "app/Ranks.hpp"
#include "app/Transfers.hpp"
#include "app/run/RunReport.hpp"
#include "app/tune/Tune.hpp"
#include "io/input/Generate.hpp"

#include <iosfwd>
#include <optional>
#include <string>
#include <vector>

namespace cvest::app {

struct RunArgs {
  std::string deck;
  std::vector<std::string> overrides;  // section.key=value, values in TOML (as --set takes them)
  bool plan_only = false;              // check and plan; nothing is written (--plan)
  bool no_resume = false;              // start over rather than resume a killed run's output
  bool explain = false;                // the full text (--explain), not the short summary
};
// Loads the deck (on every rank), runs it over `ranks`, and at rank 0 prints
// the run's summary (explained: the full text; a plan: what it would do) to
// `table` where given, then
// writes the report files the deck names (not for a plan). Progress lines go
// to `progress`.
RunReport run_command(const RunArgs& args, const Ranks& ranks, std::ostream& progress, std::ostream* table);

struct VerifyArgs {
  std::string output;
  std::optional<std::string> input;          // default: the deck's input
  std::optional<std::string> deck;           // dataset names and budget from it; else the names the output records
  std::optional<std::string> memory_budget;  // "1GiB": over the deck's or the default
};
// Throws VerifyError naming the first difference; std::invalid_argument
// where neither the input nor a deck is given.
void verify_command(const VerifyArgs& args, std::ostream& progress);

struct BenchArgs {
  bench::Config sizes;  // dates, ids, cols, repeats, warm_seconds (its strategies, layouts, precisions: below)
  std::vector<std::string> strategies{"all"};
  std::vector<std::string> layouts{"right", "left"};
  std::vector<std::string> precisions{"double"};
  std::string json;  // also write the report here
  bool explain = false;  // the full table and its legend (--explain), not the short summary
};
bench::Config bench_config(const BenchArgs& args);  // names checked (std::invalid_argument)
// Prints the summary (explained: the full table) to `table` where given,
// writes the JSON where asked.
bench::Report bench_command(const BenchArgs& args, std::ostream& progress, std::ostream* table);

struct TransfersArgs {
  transfers::Config sizes;  // dates, ids, cols, repeats (the rest: below)
  std::string precision = "double", strategy = "flat", layout = "right";
  std::string block;               // one block's discount bytes; "": the build's default
  std::string copy_size = "1GiB";  // array size of the pageable / pinned copy test
  std::string json;
};
transfers::Report transfers_command(const TransfersArgs& args, std::ostream& progress, std::ostream* table);

struct GenerateArgs {
  GenerateSpec spec;  // dates, ids, cols, seed (its precision: below)
  std::string out;
  std::string precision = "double";
  std::string values = "uniform";  // or "smooth" (io/input/Generate.hpp)
  bool overwrite = false;
};
// Says what it wrote on `out_text`.
void generate_command(const GenerateArgs& args, std::ostream& out_text);

// Version, Kokkos, execution spaces, threads, HDF5 and its filters, cvest's
// decoders, the machine, the write modes and flat's walks (flat/left's
// streams, flat/right's dates at once) measured on it, and the counts in force.
std::string info_command();


}  // namespace cvest::app
