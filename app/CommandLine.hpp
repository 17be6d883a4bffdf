#pragma once
// The command line's words for app/Commands.hpp: each command's options
// bound to its arguments (CLI11), its help, and the call of the command
// parsed.
#include "app/Commands.hpp"
#include "app/Ranks.hpp"

#include <CLI/CLI.hpp>

#include <string>
#include <vector>

namespace cvest::app {

class CommandLine {
 public:
  CommandLine();
  CommandLine(const CommandLine&) = delete;
  CommandLine& operator=(const CommandLine&) = delete;

  // A mistyped command in `args` (argv without Kokkos' flags): the message
  // naming it, the nearest valid one and all of them; "" where there is none.
  std::string unknown_command(const std::vector<char*>& args) const;
  // Exit code 0 (done: --help, --version) or 2 (a usage error, said on
  // stderr) where parsing ends the program; -1 where a command is to run.
  int parse(std::vector<char*>& args);
  bool runs_over_ranks() const { return run_cmd_->parsed(); }  // only `run` runs over several ranks
  // Runs the parsed command: its table on stdout, progress on stderr. Throws
  // what the command throws.
  void call(const Ranks& ranks);

 private:
  void add_bench();
  void add_transfers();
  void add_run();
  void add_generate();
  void add_verify();
  void add_tune();

  CLI::App app_{"cvest: cv[t][i][k] = multBy[i][k] * discount[t][i][k] as batch jobs on Kokkos"};
  CLI::App *bench_cmd_ = nullptr, *transfers_cmd_ = nullptr, *run_cmd_ = nullptr, *generate_cmd_ = nullptr,
           *verify_cmd_ = nullptr, *info_cmd_ = nullptr, *tune_cmd_ = nullptr;
  BenchArgs bench_;
  bool bench_serve_ = false;
  TransfersArgs transfers_;
  RunArgs run_;
  GenerateArgs generate_;
  VerifyArgs verify_;
  TuneArgs tune_;
  std::string verify_input_, verify_deck_;
};

}  // namespace cvest::app
