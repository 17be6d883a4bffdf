// cvest: the command-line driver. Parses arguments and calls core/ and io/;
// all logic lives in the library. Exit codes: 0 success, 2 bad input or
// usage, 3 I/O failure, 4 verification mismatch, 1 anything else.
#include "core/Bench.hpp"
#include "core/Spaces.hpp"
#include "core/Strategy.hpp"

#include <CLI/CLI.hpp>
#include <Kokkos_Core.hpp>
#include <fmt/format.h>

#include <fstream>
#include <iostream>
#include <stdexcept>
#include <string>
#include <vector>

#ifndef CVEST_VERSION
#define CVEST_VERSION "0.0.0"
#endif

namespace {

int run_bench(const cvest::bench::Config& config, const std::string& json_path) {
  const auto report = cvest::bench::run(config, std::cerr);
  cvest::bench::print_table(report, std::cout);
  if (!json_path.empty()) {
    std::ofstream out(json_path);
    if (!out) throw std::system_error(errno, std::generic_category(), "cannot write " + json_path);
    out << cvest::bench::to_json(report).dump(2) << '\n';
    if (!out) throw std::system_error(errno, std::generic_category(), "cannot write " + json_path);
  }
  return 0;
}

int print_info() {
  const auto facts = cvest::build_facts();
  fmt::print("cvest {}\nKokkos {}\nexecution spaces: {} (default {})\nthreads: {}\nstrategies: {}\n", CVEST_VERSION,
             facts.kokkos_version, facts.spaces, facts.backend, facts.threads, cvest::strategy_names());
  return 0;
}

}  // namespace

int main(int argc, char* argv[]) {
  // Kokkos takes its own --kokkos-* flags (threads, device, tools) first.
  Kokkos::ScopeGuard kokkos(argc, argv);

  CLI::App app{"cvest: cv[t][i][k] = multBy[i][k] * discount[t][i][k] as batch jobs on Kokkos"};
  app.require_subcommand(1);
  app.set_version_flag("--version", CVEST_VERSION);

  cvest::bench::Config bench;
  std::vector<std::string> strategy_names{"all"}, layout_names{"right", "left"}, precision_names{"double"};
  std::string json_path;
  auto* bench_cmd = app.add_subcommand("bench", "time every strategy x layout on in-memory data against the copy roof");
  bench_cmd->add_option("--dates,-T", bench.dates, "dates T")->capture_default_str()->check(CLI::PositiveNumber);
  bench_cmd->add_option("--ids,-N", bench.ids, "ids N")->capture_default_str()->check(CLI::PositiveNumber);
  bench_cmd->add_option("--cols,-K", bench.cols, "columns K")->capture_default_str()->check(CLI::PositiveNumber);
  bench_cmd->add_option("--strategies", strategy_names, "strategies, or all: " + cvest::strategy_names())
      ->delimiter(',')->capture_default_str();
  bench_cmd->add_option("--layouts", layout_names, "right, left")->delimiter(',')->capture_default_str();
  bench_cmd->add_option("--precision", precision_names, "double, float")->delimiter(',')->capture_default_str();
  bench_cmd->add_option("--repeats", bench.repeats, "timed passes per variant (median)")
      ->capture_default_str()->check(CLI::PositiveNumber);
  bench_cmd->add_option("--json", json_path, "also write the results as JSON to this file");

  auto* info_cmd = app.add_subcommand("info", "print version, Kokkos version, execution spaces and threads");

  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    return app.exit(e) == 0 ? 0 : 2;
  }

  try {
    if (*bench_cmd) {
      bench.strategies = cvest::strategies_from_names(strategy_names);
      bench.layouts.clear();
      for (const auto& name : layout_names) bench.layouts.push_back(cvest::layout_from_name(name));
      bench.precisions.clear();
      for (const auto& name : precision_names) bench.precisions.push_back(cvest::precision_from_name(name));
      return run_bench(bench, json_path);
    }
    if (*info_cmd) return print_info();
  } catch (const std::invalid_argument& e) {
    std::cerr << "cvest: error: " << e.what() << '\n';
    return 2;
  } catch (const std::system_error& e) {
    std::cerr << "cvest: error: " << e.what() << '\n';
    return 3;
  } catch (const std::exception& e) {
    std::cerr << "cvest: error: " << e.what() << '\n';
    return 1;
  }
  return 0;
}
