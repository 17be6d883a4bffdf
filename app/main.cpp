// cvest: the command-line driver. Parses arguments and calls core/ and io/;
// all logic lives in the libraries. Exit codes: 0 success, 2 bad input, deck
// or usage, 3 I/O failure, 4 verification mismatch, 1 anything else.
#include "app/Bench.hpp"
#include "app/Deck.hpp"
#include "core/Errors.hpp"
#include "core/Plan.hpp"
#include "core/Spaces.hpp"
#include "core/Strategy.hpp"
#include "app/Transfers.hpp"
#include "core/Version.hpp"
#include "io/Disk.hpp"
#include "io/Generator.hpp"
#include "io/Input.hpp"
#include "io/OutputFile.hpp"
#include "io/OutputLock.hpp"
#include "app/run/ReportFormats.hpp"
#include "app/run/RunDeck.hpp"
#include "app/run/Verify.hpp"
#include "app/Ranks.hpp"
#include "app/ThreadPlacement.hpp"
#include "io/TempFiles.hpp"

#include <CLI/CLI.hpp>
#include <Kokkos_Core.hpp>
#include <fmt/format.h>
#include <hdf5.h>

#include <algorithm>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <stdexcept>
#include <string>
#include <string_view>
#include <system_error>
#include <vector>
#include <unistd.h>
#ifdef __linux__
#include <sched.h>
#endif
#ifdef _OPENMP
#include <omp.h>
#endif

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

int print_info() {
  const auto facts = cvest::build_facts();
  unsigned major = 0, minor = 0, release = 0;
  H5get_libversion(&major, &minor, &release);
  fmt::print("cvest {}\nKokkos {}\nexecution spaces: {} (default {})\nthreads: {}\nHDF5 {}.{}.{}\nstrategies: {}\n",
             CVEST_VERSION, facts.kokkos_version, facts.spaces, facts.backend, facts.threads, major, minor, release,
             cvest::strategy_names());
  fmt::print("HDF5 filters: {}\ndecoded by cvest's threads: {}\n", cvest::io::hdf5_filters_text(),
             cvest::io::decoders_text());
  fmt::print("machine: {}, {} ({} logical CPUs, {:.0f} GiB)\n", facts.host, facts.cpu.empty() ? "CPU unknown" : facts.cpu,
             facts.cpus, facts.memory_bytes / double(1ull << 30));
  if (!facts.gpu.empty()) fmt::print("gpu: {}\n", facts.gpu);
  return 0;
}

// Under a launcher with several ranks on a node, each rank's share of it:
// where the launcher bound the rank to some cores (mpiexec's default binding,
// srun's), those; otherwise the node's cores divided among its ranks.
// Kokkos' own --kokkos-threads / --kokkos-num-threads and OMP_NUM_THREADS
// win. Returns the threads set, 0 where nothing was set.
int share_the_node(const cvest::app::Ranks& ranks, const std::vector<char*>& kokkos_args) {
  if (ranks.local_size() < 2 || std::getenv("OMP_NUM_THREADS")) return 0;
  for (const char* arg : kokkos_args)
    if (std::string_view(arg).rfind("--kokkos-threads", 0) == 0 || std::string_view(arg).rfind("--kokkos-num-threads", 0) == 0)
      return 0;
  const int node = int(std::max(1L, sysconf(_SC_NPROCESSORS_ONLN)));
  int mine = node;
#ifdef __linux__
  cpu_set_t set;
  if (sched_getaffinity(0, sizeof set, &set) == 0) mine = CPU_COUNT(&set);
#endif
  const int threads = mine < node ? mine : std::max(1, node / ranks.local_size());
#ifdef _OPENMP
  omp_set_num_threads(threads);  // Kokkos' OpenMP space takes omp_get_max_threads()
#endif
  return threads;
}

// In a Cuda build with several ranks on a node: rank `local_rank` takes GPU
// local_rank % devices, unless Kokkos' own device flags say otherwise.
void pick_device(const cvest::app::Ranks& ranks, std::vector<char*>& kokkos_args) {
#ifdef KOKKOS_ENABLE_CUDA
  static std::string device_arg;
  for (const char* arg : kokkos_args)
    if (std::string_view(arg).rfind("--kokkos-device", 0) == 0 || std::string_view(arg).rfind("--kokkos-num-devices", 0) == 0 ||
        std::string_view(arg).rfind("--kokkos-map-device", 0) == 0)
      return;
  int devices = 0;
  if (ranks.local_size() < 2 || cudaGetDeviceCount(&devices) != cudaSuccess || devices < 1) return;
  device_arg = "--kokkos-device-id=" + std::to_string(ranks.local_rank() % devices);
  kokkos_args.push_back(device_arg.data());
#else
  (void)ranks;
  (void)kokkos_args;
#endif
}

}  // namespace

int main(int argc, char* argv[]) {
  cvest::app::place_threads_by_default(argc, argv);
  // Under mpiexec or srun, MPI first (before any thread starts).
  const auto ranks = cvest::app::Ranks::from_launcher(argc, argv);
  // Kokkos' own --kokkos-* flags (threads, device, tools) go to Kokkos, the
  // rest to the command line parser. Kokkos is initialised only after a
  // successful parse, so --help and --version work even where a Cuda build
  // finds no GPU.
  cvest::return_freed_buffers_to_the_system();  // memory_budget holds job after job
  std::vector<char*> ours{argv[0]}, kokkos_args{argv[0]};
  for (int i = 1; i < argc; ++i) (std::string_view(argv[i]).rfind("--kokkos-", 0) == 0 ? kokkos_args : ours).push_back(argv[i]);
  cvest::io::quiet_hdf5_errors();
  cvest::io::remove_temp_files_on_signals();

  CLI::App app{"cvest: cv[t][i][k] = multBy[i][k] * discount[t][i][k] as batch jobs on Kokkos"};
  app.require_subcommand(1);
  app.set_version_flag("--version", CVEST_VERSION);

  // bench
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
  bench_cmd->add_option("--warm", bench.warm_seconds,
                        "seconds of every variant and the roof in turn before timing (memory just touched is slow)")
      ->capture_default_str()->check(CLI::NonNegativeNumber);
  bench_cmd->add_option("--json", json_path, "also write the results as JSON to this file");
  bool bench_serve = false;
  bench_cmd->add_flag("--serve", bench_serve,
                      "answer timing commands on stdin (warm S, time STRATEGY LAYOUT, roof, quit) with JSON lines: "
                      "bench/compare interleaves cvest with its peers this way");

  // transfers
  cvest::transfers::Config transfers;
  std::string tr_strategy = "flat", tr_layout = "right", tr_precision = "double", tr_block, tr_copy = "1GiB", tr_json;
  auto* transfers_cmd = app.add_subcommand(
      "transfers", "host<->device copies (pageable vs pinned) and the in-memory pipeline against its pure copies");
  transfers_cmd->add_option("--dates,-T", transfers.dates, "dates T")->capture_default_str()->check(CLI::PositiveNumber);
  transfers_cmd->add_option("--ids,-N", transfers.ids, "ids N")->capture_default_str()->check(CLI::PositiveNumber);
  transfers_cmd->add_option("--cols,-K", transfers.cols, "columns K")->capture_default_str()->check(CLI::PositiveNumber);
  transfers_cmd->add_option("--precision", tr_precision, "double or float")->capture_default_str();
  transfers_cmd->add_option("--strategy", tr_strategy, "the pipeline's kernel: " + cvest::strategy_names())
      ->capture_default_str();
  transfers_cmd->add_option("--layout", tr_layout, "right or left")->capture_default_str();
  transfers_cmd->add_option("--block", tr_block, "one block's discount bytes (default 64MiB on a device, 2MiB on the host)");
  transfers_cmd->add_option("--copy-size", tr_copy, "array size of the pageable/pinned copy test")->capture_default_str();
  transfers_cmd->add_option("--repeats", transfers.repeats, "timed rounds (median)")
      ->capture_default_str()->check(CLI::PositiveNumber);
  transfers_cmd->add_option("--json", tr_json, "also write the results as JSON to this file");

  // run
  std::string deck_path;
  std::vector<std::string> overrides;
  auto* run_cmd = app.add_subcommand("run", "run an input deck's job(s): HDF5 file to HDF5 file");
  run_cmd->add_option("deck", deck_path, "the deck (TOML)")->required();
  run_cmd->add_option("--set", overrides, "override a deck value: section.key=value (repeatable)");
  bool plan_only = false, no_resume = false;
  run_cmd->add_flag("--no-resume", no_resume,
                    "start over even where a killed run of this deck left a resumable output (it is removed)");
  run_cmd->footer(std::string(R"(A deck is TOML; paths in it are relative to the deck. The smallest:
  [input]
  file = "in.h5"                   # multBy (N, K) and discount (T, N, K)
  [output]
  file = "cv.h5"                   # cv (T, N, K)
  [run]
  strategy = ["flat", "per_id"]    # or "all"; layout = "right", "left" or "all"
Every key: "Input decks" in )") + CVEST_SOURCE_DIR + "/README.md\nExample decks: " + CVEST_SOURCE_DIR +
                   "/inputs/ (seed.toml: the question's case, generated on first use)");
  run_cmd->add_flag("--plan", plan_only,
                    "check the deck, input, output and disk, print what the run would do, write nothing");

  // generate
  cvest::GenerateSpec gen;
  std::string gen_out, gen_precision = "double";
  bool gen_overwrite = false;
  auto* gen_cmd = app.add_subcommand("generate", "write multBy (N,K) and discount (T,N,K) with reproducible values");
  gen_cmd->add_option("--dates,-T", gen.dates, "dates T")->required()->check(CLI::PositiveNumber);
  gen_cmd->add_option("--ids,-N", gen.ids, "ids N")->required()->check(CLI::PositiveNumber);
  gen_cmd->add_option("--cols,-K", gen.cols, "columns K")->required()->check(CLI::PositiveNumber);
  gen_cmd->add_option("--out,-o", gen_out, "the HDF5 file to write")->required();
  gen_cmd->add_option("--precision", gen_precision, "double or float")->capture_default_str();
  gen_cmd->add_option("--seed", gen.seed, "seed of the values")->capture_default_str();
  gen_cmd->add_flag("--overwrite", gen_overwrite, "replace an existing file");

  // verify
  cvest::app::VerifyOptions verify;
  std::string verify_deck;
  auto* verify_cmd = app.add_subcommand("verify", "recompute multBy * discount block by block and compare bit for bit");
  verify_cmd->add_option("output", verify.output, "the output file")->required();
  verify_cmd->add_option("--input", verify.input, "the input file")->required();
  verify_cmd->add_option("--deck", verify_deck, "take dataset names and the memory budget from this deck");

  auto* info_cmd = app.add_subcommand("info", "print version, Kokkos version, execution spaces, threads, HDF5 version and filters, cvest's decoders, the machine");

  // A mistyped command: name it and the valid ones (CLI11 would say only
  // that a subcommand is required).
  if (ours.size() > 1 && ours[1][0] != '-') {
    std::vector<std::string> names;
    for (const auto* sub : app.get_subcommands({})) names.push_back(sub->get_name());
    if (std::find(names.begin(), names.end(), ours[1]) == names.end()) {
      std::string valid;
      for (const auto& name : names) valid += (valid.empty() ? "" : ", ") + name;
      std::cerr << "cvest: error: unknown command '" << ours[1] << "'" << closest(ours[1], names) << "; valid: " << valid
                << " (cvest --help)\n";
      return 2;
    }
  }
  try {
    app.parse(int(ours.size()), ours.data());
  } catch (const CLI::ParseError& e) {
    return app.exit(e) == 0 ? 0 : 2;
  }
  if (ranks->size() > 1 && !*run_cmd) {
    if (ranks->root())
      std::cerr << "cvest: error: only 'cvest run' runs over several ranks; start '" << ours[1]
                << "' as one process (without mpiexec or srun), not " << ranks->size() << "\n";
    return 2;
  }
  share_the_node(*ranks, kokkos_args);
  pick_device(*ranks, kokkos_args);
  int kokkos_argc = int(kokkos_args.size());
  Kokkos::ScopeGuard kokkos(kokkos_argc, kokkos_args.data());
  // An error reaches the user once: from rank 0 where every rank agreed on
  // it (Ranks::together), else from the rank it happened on, naming it, and
  // then every rank ends (others may wait for this one in MPI).
  const auto report = [&](const char* kind, const std::exception& e, int code) {
    if (ranks->agreed_error()) {
      if (ranks->root()) std::cerr << "cvest: " << kind << e.what() << '\n';
      return code;
    }
    if (ranks->size() == 1) {
      std::cerr << "cvest: " << kind << e.what() << '\n';
      return code;
    }
    std::cerr << "cvest: " << kind << "rank " << ranks->rank() << " of " << ranks->size() << ": " << e.what() << '\n';
    ranks->abort(code);
  };

  try {
    if (*bench_cmd) {
      bench.strategies = cvest::strategies_from_names(strategy_names);
      bench.layouts.clear();
      for (const auto& name : layout_names) bench.layouts.push_back(cvest::layout_from_name(name));
      bench.precisions.clear();
      for (const auto& name : precision_names) bench.precisions.push_back(cvest::precision_from_name(name));
      if (bench_serve) {
        cvest::bench::serve(bench, std::cin, std::cout, std::cerr);
        return 0;
      }
      const auto report = cvest::bench::run(bench, std::cerr);
      cvest::bench::print_table(report, std::cout);
      if (!json_path.empty()) cvest::app::write_report_file(json_path, cvest::bench::to_json(report).dump(2) + "\n");
      return 0;
    }
    if (*transfers_cmd) {
      transfers.precision = cvest::precision_from_name(tr_precision);
      transfers.strategy = cvest::strategy_from_name(tr_strategy);
      transfers.layout = cvest::layout_from_name(tr_layout);
      if (!tr_block.empty()) transfers.block_bytes = cvest::parse_bytes(tr_block);
      transfers.copy_bytes = cvest::parse_bytes(tr_copy);
      const auto report = cvest::transfers::run(transfers, std::cerr);
      cvest::transfers::print(report, std::cout);
      if (!tr_json.empty()) cvest::app::write_report_file(tr_json, cvest::transfers::to_json(report).dump(2) + "\n");
      return 0;
    }
    if (*run_cmd) {
      cvest::Deck deck;
      ranks->together([&] { deck = cvest::load_deck(deck_path, overrides); });
      if (no_resume) deck.output.resume = false;
      if (plan_only) {
        const auto planned = cvest::app::run_deck(deck, std::cerr, *ranks, true);
        if (ranks->root()) cvest::app::print_plan(planned, std::cout);
        return 0;
      }
      const auto run = cvest::app::run_deck(deck, std::cerr, *ranks);
      ranks->together([&] {
        if (!ranks->root()) return;
        cvest::app::print_run_table(run, std::cout);
        if (!deck.report.json.empty()) cvest::app::write_report_file(deck.report.json, cvest::app::to_json(run).dump(2) + "\n");
        if (!deck.report.csv.empty()) cvest::app::write_report_file(deck.report.csv, cvest::app::to_csv(run));
      });
      return 0;
    }
    if (*gen_cmd) {
      gen.precision = cvest::precision_from_name(gen_precision);
      cvest::io::generate_input(gen_out, gen, gen_overwrite);
      fmt::print("wrote {} ({} x {} x {}, {})\n", gen_out, gen.dates, gen.ids, gen.cols, gen_precision);
      return 0;
    }
    if (*verify_cmd) {
      if (verify_deck.empty()) {
        cvest::app::names_from_output(verify);
      } else {
        const auto deck = cvest::load_deck(verify_deck);
        verify.dataset = deck.output.dataset;
        verify.multby = deck.input.multby;
        verify.discount = deck.input.discount;
        verify.memory_budget = deck.run.memory_budget;
      }
      cvest::app::verify_output(verify, std::cout);
      return 0;
    }
    if (*info_cmd) return print_info();
  } catch (const cvest::VerifyError& e) {
    return report("mismatch: ", e, 4);
  } catch (const cvest::InputError& e) {
    return report("error: ", e, 2);
  } catch (const std::invalid_argument& e) {
    return report("error: ", e, 2);
  } catch (const cvest::IoError& e) {
    return report("I/O error: ", e, 3);
  } catch (const std::exception& e) {
    return report("error: ", e, 1);
  }
  return 0;
}
