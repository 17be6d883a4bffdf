#include "app/Commands.hpp"

#include "app/Deck.hpp"
#include "app/FirstUse.hpp"
#include "app/bench/Formats.hpp"
#include "app/bench/Harness.hpp"
#include "app/run/ReportFormats.hpp"
#include "app/run/RunDeck.hpp"
#include "app/run/RunSummary.hpp"
#include "app/run/Verify.hpp"
#include "app/tune/WalkRecords.hpp"
#include "app/tune/WriteModes.hpp"
#include "core/Errors.hpp"
#include "core/FlatRun.hpp"
#include "core/Plan.hpp"
#include "core/Policies.hpp"
#include "core/Spaces.hpp"
#include "core/Strategy.hpp"
#include "core/Topology.hpp"
#include "core/Version.hpp"
#include "io/cube/CubeReader.hpp"
#include "io/hdf5/Hdf5.hpp"
#include "io/input/Generator.hpp"

#include <Kokkos_Core.hpp>
#include <fmt/format.h>
#include <fmt/ostream.h>

#include <ostream>
#include <stdexcept>

namespace cvest::app {

RunReport run_command(const RunArgs& args, const Ranks& ranks, std::ostream& progress, std::ostream* table) {
  Deck deck;
  ranks.together([&] { deck = load_deck(args.deck, args.overrides); });
  if (args.no_resume) deck.output.resume = false;
  RunReport report = run_deck(deck, progress, ranks, args.plan_only);
  ranks.together([&] {
    if (!ranks.root()) return;
    if (table) (args.plan_only ? print_plan : args.explain ? print_run_table : print_run_summary)(report, *table);
    if (args.plan_only) return;
    if (!deck.report.json.empty()) write_report_file(deck.report.json, to_json(report).dump(2) + "\n");
    if (!deck.report.csv.empty()) write_report_file(deck.report.csv, to_csv(report));
  });
  return report;
}

void verify_command(const VerifyArgs& args, std::ostream& progress) {
  if (!args.input && !args.deck)
    throw std::invalid_argument("verify needs the input file (input=...) or the deck that wrote the output (deck=...)");
  VerifyOptions options;
  options.output = args.output;
  if (args.input) options.input = *args.input;
  if (args.deck) {
    const Deck deck = load_deck(*args.deck);
    options.dataset = deck.output.dataset;
    options.multby = deck.input.multby;
    options.discount = deck.input.discount;
    options.memory_budget = deck.run.memory_budget;
    if (!args.input) options.input = deck.input.file;
  } else {
    names_from_output(options);
  }
  if (args.memory_budget) options.memory_budget = parse_bytes(*args.memory_budget);
  verify_output(options, progress);
}

bench::Config bench_config(const BenchArgs& args) {
  bench::Config config = args.sizes;
  config.strategies = strategies_from_names(args.strategies);
  config.layouts.clear();
  for (const auto& name : args.layouts) config.layouts.push_back(layout_from_name(name));
  config.precisions.clear();
  for (const auto& name : args.precisions) config.precisions.push_back(precision_from_name(name));
  return config;
}

bench::Report bench_command(const BenchArgs& args, std::ostream& progress, std::ostream* table) {
  const bench::Report report = bench::run(bench_config(args), progress);
  if (table) (args.explain ? bench::print_table : bench::print_summary)(report, *table);
  if (!args.json.empty()) write_report_file(args.json, bench::to_json(report).dump(2) + "\n");
  return report;
}

transfers::Report transfers_command(const TransfersArgs& args, std::ostream& progress, std::ostream* table) {
  transfers::Config config = args.sizes;
  config.precision = precision_from_name(args.precision);
  config.strategy = strategy_from_name(args.strategy);
  config.layout = layout_from_name(args.layout);
  if (!args.block.empty()) config.block_bytes = parse_bytes(args.block);
  config.copy_bytes = parse_bytes(args.copy_size);
  const transfers::Report report = transfers::run(config, progress);
  if (table) transfers::print(report, *table);
  if (!args.json.empty()) write_report_file(args.json, transfers::to_json(report).dump(2) + "\n");
  return report;
}

void generate_command(const GenerateArgs& args, std::ostream& out_text) {
  GenerateSpec spec = args.spec;
  spec.precision = precision_from_name(args.precision);
  spec.values = generated_values_from_name(args.values);
  io::generate_input(args.out, spec, args.overwrite);
  fmt::print(out_text, "wrote {} ({} x {} x {}, {}, {} values)\n", args.out, spec.dates, spec.ids, spec.cols,
             args.precision, args.values);
}

namespace {

// Whether the first flat command measures flat's choices, and how to turn it off.
std::string first_use_text() {
  std::string state;
  try {
    state = first_use_allowed() ? "on" : "off (CVEST_FIRST_USE=off)";
  } catch (const std::exception& e) {
    state = e.what();
  }
  return fmt::format("flat measured on first use where unrecorded: {} (CVEST_FIRST_USE=off or [run] "
                     "measure_first_use = false turns it off)\n", state);
}

}  // namespace

std::string info_command() {
  const auto facts = build_facts();
  unsigned major = 0, minor = 0, release = 0;
  io::hdf5_version(major, minor, release);
  std::string text = fmt::format(
      "cvest {}\nKokkos {}\nexecution spaces: {} (default {})\nthreads: {}\nhost vectors: {}\nHDF5 {}.{}.{}\n"
      "strategies: {}\n",
      CVEST_VERSION, facts.kokkos_version, facts.spaces, facts.backend, facts.threads, facts.host_vectors, major,
      minor, release,
      strategy_names());
  text += fmt::format("HDF5 filters: {}\ncoded by cvest's threads: {}\n", io::hdf5_filters_text(),
                      io::decoders_text());
  text += fmt::format("machine: {}, {} ({} logical CPUs, {:.0f} GiB)\n", facts.host,
                      facts.cpu.empty() ? "CPU unknown" : facts.cpu, facts.cpus, facts.memory_bytes / double(1ull << 30));
  text += fmt::format("caches: {}\n", policy::topology_text(policy::machine_topology()));
  if (!facts.gpu.empty()) text += fmt::format("gpu: {}\n", facts.gpu);
  std::string problem;
  const auto records = read_write_mode_records(problem);
  text += fmt::format("write modes measured (cvest tune, {}): {}\n", write_mode_records_path(),
                      !problem.empty() ? problem : records.empty() ? "none" : std::to_string(records.size()));
  for (const auto& r : records)
    text += fmt::format("  {}: writes {}; {}; reads {}; {}\n", r.key, r.direct() ? "direct" : "through the page cache",
                        r.text(), r.reads_measured() ? (r.read_direct() ? "direct" : "through the page cache") : "-",
                        r.read_text());
  const auto walks = read_walk_records(problem);
  text += fmt::format("flat's walks measured (cvest tune or first use, {}): {}\n", walk_records_path(),
                      !problem.empty() ? problem : walks.empty() ? "none" : std::to_string(walks.size()));
  for (const auto& r : walks)
    text += fmt::format("  {}, {}, {}: {}\n", r.key, to_string(r.walk), to_string(r.precision), r.text());
  text += first_use_text();
  if (policy::on_host<Kokkos::DefaultExecutionSpace>)
    for (const Precision p : {Precision::f64, Precision::f32}) {
      const std::size_t size = element_size(p);
      const auto in_force = [&](const char* what, int few, int many, const std::string& source) {
        const std::string most = std::to_string(few) + policy::flat_counts_below(few, many, std::to_string(many));
        text += fmt::format("{} ({}), at most: {} ({})\n", what, to_string(p), most,
                            source.empty() ? "the stated default; measured on first use or by cvest tune" : source);
      };
      const Index few = policy::flat_many_dates - 1, many = policy::flat_many_dates;
      in_force("flat/left streams at once", policy::flat_streams_most(size, few), policy::flat_streams_most(size, many),
               policy::flat_streams_source(size));
      in_force("flat/right dates at once", policy::flat_dates_most(size, few), policy::flat_dates_most(size, many),
               policy::flat_dates_source(size));
      text += fmt::format("flat's stores ({}): {}\n", to_string(p), policy::flat_stores_text(size));
    }
  return text;
}

}  // namespace cvest::app
