#include "app/CommandLine.hpp"

#include "app/bench/Server.hpp"
#include "core/Strategy.hpp"
#include "core/Version.hpp"

#include <algorithm>
#include <iostream>

namespace cvest::app {

namespace {

// " (did you mean 'run'?)" where one valid name is within two edits of `typed`.
std::string closest(const std::string& typed, const std::vector<std::string>& names) {
  const auto distance = [](const std::string& a, const std::string& b) {
    std::vector<std::size_t> row(b.size() + 1);
    for (std::size_t j = 0; j <= b.size(); ++j) row[j] = j;
    for (std::size_t i = 1; i <= a.size(); ++i) {
      std::size_t diagonal = row[0];
      row[0] = i;
      for (std::size_t j = 1; j <= b.size(); ++j) {
        const std::size_t up = row[j];
        row[j] = std::min({row[j] + 1, row[j - 1] + 1, diagonal + (a[i - 1] != b[j - 1])});
        diagonal = up;
      }
    }
    return row[b.size()];
  };
  std::string best;
  std::size_t best_distance = 3;
  for (const auto& name : names)
    if (const std::size_t d = distance(typed, name); d < best_distance) best_distance = d, best = name;
  return best.empty() ? "" : " (did you mean '" + best + "'?)";
}

}  // namespace

CommandLine::CommandLine() {
  app_.require_subcommand(1);
  app_.set_version_flag("--version", CVEST_VERSION);
  add_bench();
  add_transfers();
  add_run();
  add_generate();
  add_verify();
  add_tune();
  info_cmd_ = app_.add_subcommand("info", "print version, Kokkos version, execution spaces, threads, HDF5 version and filters, cvest's decoders, the machine");
}

void CommandLine::add_bench() {
  auto& a = bench_;
  auto* cmd = bench_cmd_ = app_.add_subcommand("bench", "time every strategy x layout on in-memory data against the copy roof");
  cmd->add_option("--dates,-T", a.sizes.dates, "dates T")->capture_default_str()->check(CLI::PositiveNumber);
  cmd->add_option("--ids,-N", a.sizes.ids, "ids N")->capture_default_str()->check(CLI::PositiveNumber);
  cmd->add_option("--cols,-K", a.sizes.cols, "columns K")->capture_default_str()->check(CLI::PositiveNumber);
  cmd->add_option("--strategies", a.strategies, "strategies, or all: " + strategy_names())
      ->delimiter(',')->capture_default_str();
  cmd->add_option("--layouts", a.layouts, "right, left")->delimiter(',')->capture_default_str();
  cmd->add_option("--precision", a.precisions, "double, float")->delimiter(',')->capture_default_str();
  cmd->add_option("--repeats", a.sizes.repeats, "timed passes per variant (median)")
      ->capture_default_str()->check(CLI::PositiveNumber);
  cmd->add_option("--warm", a.sizes.warm_seconds,
                  "seconds of every variant and the roof in turn before timing (memory just touched is slow)")
      ->capture_default_str()->check(CLI::NonNegativeNumber);
  cmd->add_option("--json", a.json, "also write the results as JSON to this file");
  cmd->add_flag("--explain,-v", a.explain,
                "the full table instead of the summary: flat's walk on these arrays, the roofs' min-max, every "
                "column and what each means");
  cmd->add_flag("--serve", bench_serve_,
                "answer timing commands on stdin (warm S, time STRATEGY LAYOUT, roof, quit) with JSON lines: "
                "bench/compare interleaves cvest with its peers this way");
}

void CommandLine::add_transfers() {
  auto& a = transfers_;
  auto* cmd = transfers_cmd_ = app_.add_subcommand(
      "transfers", "host<->device copies (pageable vs pinned) and the in-memory pipeline against its pure copies");
  cmd->add_option("--dates,-T", a.sizes.dates, "dates T")->capture_default_str()->check(CLI::PositiveNumber);
  cmd->add_option("--ids,-N", a.sizes.ids, "ids N")->capture_default_str()->check(CLI::PositiveNumber);
  cmd->add_option("--cols,-K", a.sizes.cols, "columns K")->capture_default_str()->check(CLI::PositiveNumber);
  cmd->add_option("--precision", a.precision, "double or float")->capture_default_str();
  cmd->add_option("--strategy", a.strategy, "the pipeline's kernel: " + strategy_names())->capture_default_str();
  cmd->add_option("--layout", a.layout, "right or left")->capture_default_str();
  cmd->add_option("--block", a.block, "one block's discount bytes (default 64MiB on a device, 2MiB on the host)");
  cmd->add_option("--copy-size", a.copy_size, "array size of the pageable/pinned copy test")->capture_default_str();
  cmd->add_option("--repeats", a.sizes.repeats, "timed rounds (median)")->capture_default_str()->check(CLI::PositiveNumber);
  cmd->add_option("--json", a.json, "also write the results as JSON to this file");
}

void CommandLine::add_run() {
  auto* cmd = run_cmd_ = app_.add_subcommand("run", "run an input deck's job(s): HDF5 file to HDF5 file");
  cmd->add_option("deck", run_.deck, "the deck (TOML)")->required();
  cmd->add_option("--set", run_.overrides, "override a deck value: section.key=value (repeatable)");
  cmd->add_flag("--no-resume", run_.no_resume,
                "start over even where a killed run of this deck left a resumable output (it is removed)");
  cmd->footer(std::string(R"(A deck is TOML; paths in it are relative to the deck. The smallest:
  [input]
  file = "in.h5"                   # multBy (N, K) and discount (T, N, K)
  [output]
  file = "cv.h5"                   # cv (T, N, K)
  [run]
  strategy = ["flat", "per_id"]    # or "all"; layout = "right", "left" or "all"
Every key: "Input decks" in )") + CVEST_SOURCE_DIR + "/README.md\nExample decks: " + CVEST_SOURCE_DIR +
              "/inputs/ (seed.toml: the question's case, generated on first use)");
  cmd->add_flag("--plan", run_.plan_only, "check the deck, input, output and disk, print what the run would do, write nothing");
  cmd->add_flag("--explain,-v", run_.explain,
                "the full text instead of the summary: why the input is read and the output written as they are, "
                "flat's walk, the blocks, every phase and column, and what each column means");
}

void CommandLine::add_generate() {
  auto& a = generate_;
  auto* cmd = generate_cmd_ = app_.add_subcommand("generate", "write multBy (N,K) and discount (T,N,K) with reproducible values");
  cmd->add_option("--dates,-T", a.spec.dates, "dates T")->required()->check(CLI::PositiveNumber);
  cmd->add_option("--ids,-N", a.spec.ids, "ids N")->required()->check(CLI::PositiveNumber);
  cmd->add_option("--cols,-K", a.spec.cols, "columns K")->required()->check(CLI::PositiveNumber);
  cmd->add_option("--out,-o", a.out, "the HDF5 file to write")->required();
  cmd->add_option("--precision", a.precision, "double or float")->capture_default_str();
  cmd->add_option("--seed", a.spec.seed, "seed of the values")->capture_default_str();
  cmd->add_option("--values", a.values,
                  "uniform (each value drawn on its own) or smooth (discount factors falling with the date, "
                  "multipliers of two decimals: data that compresses as users' does)")
      ->check(CLI::IsMember({"uniform", "smooth"}))
      ->capture_default_str();
  cmd->add_flag("--overwrite", a.overwrite, "replace an existing file");
}

void CommandLine::add_verify() {
  auto* cmd = verify_cmd_ = app_.add_subcommand("verify", "recompute multBy * discount block by block and compare bit for bit");
  cmd->add_option("output", verify_.output, "the output file")->required();
  cmd->add_option("--input", verify_input_, "the input file")->required();
  cmd->add_option("--deck", verify_deck_, "take dataset names and the memory budget from this deck");
}

void CommandLine::add_tune() {
  auto* cmd = tune_cmd_ = app_.add_subcommand(
      "tune", "measure writing past the page cache (O_DIRECT) and through it here, and flat's walks in memory; "
              "[output] direct = \"auto\" and flat take the faster");
  cmd->add_option("folder", tune_.folder, "a folder on the file system outputs go to")->capture_default_str();
  cmd->add_option("--size", tune_.size, "bytes each pass writes (e.g. 1600MB, 6.5GB)")->capture_default_str();
  cmd->add_option("--repeats", tune_.repeats, "passes each way, interleaved (the walks: 3 rounds more)")->capture_default_str()->check(CLI::PositiveNumber);
  cmd->add_option("--walk-size", tune_.walk_size, "discount bytes at each shape of flat's walks in memory")
      ->capture_default_str();
  cmd->add_flag("--walks-only", tune_.walks_only, "measure only flat's walks in memory (no folder, no disk)");
}

std::string CommandLine::unknown_command(const std::vector<char*>& args) const {
  if (args.size() < 2 || args[1][0] == '-') return "";
  std::vector<std::string> names;
  for (const auto* sub : app_.get_subcommands({})) names.push_back(sub->get_name());
  if (std::find(names.begin(), names.end(), args[1]) != names.end()) return "";
  std::string valid;
  for (const auto& name : names) valid += (valid.empty() ? "" : ", ") + name;
  return "cvest: error: unknown command '" + std::string(args[1]) + "'" + closest(args[1], names) + "; valid: " +
         valid + " (cvest --help)\n";
}

int CommandLine::parse(std::vector<char*>& args) {
  try {
    app_.parse(int(args.size()), args.data());
  } catch (const CLI::ParseError& e) {
    return app_.exit(e) == 0 ? 0 : 2;
  }
  if (!verify_input_.empty()) verify_.input = verify_input_;
  if (!verify_deck_.empty()) verify_.deck = verify_deck_;
  return -1;
}

void CommandLine::call(const Ranks& ranks) {
  if (bench_cmd_->parsed() && bench_serve_) bench::serve(bench_config(bench_), std::cin, std::cout, std::cerr);
  else if (bench_cmd_->parsed()) bench_command(bench_, std::cerr, &std::cout);
  else if (transfers_cmd_->parsed()) transfers_command(transfers_, std::cerr, &std::cout);
  else if (run_cmd_->parsed()) run_command(run_, ranks, std::cerr, &std::cout);
  else if (generate_cmd_->parsed()) generate_command(generate_, std::cout);
  else if (verify_cmd_->parsed()) verify_command(verify_, std::cout);
  else if (info_cmd_->parsed()) std::cout << info_command();
  else if (tune_cmd_->parsed()) tune_command(tune_, std::cerr, std::cout);
}

}  // namespace cvest::app
