#include "app/Commands.hpp"

#include "app/Deck.hpp"
#include "app/run/ReportFormats.hpp"
#include "app/run/RunDeck.hpp"
#include "app/run/RunSummary.hpp"
#include "app/run/Verify.hpp"
#include "core/Plan.hpp"
#include "core/Spaces.hpp"
#include "core/Strategy.hpp"
#include "core/Topology.hpp"
#include "core/Version.hpp"
#include "io/cube/CubeReader.hpp"
#include "io/input/Generator.hpp"
#include "io/hdf5/Hdf5.hpp"
#include "io/os/DirectWriter.hpp"
#include "io/os/Disk.hpp"
#include "io/WriteModes.hpp"
#include "app/TuneReads.hpp"
#include "app/FirstUse.hpp"
#include "app/TuneWalks.hpp"
#include "core/FlatRun.hpp"
#include "core/Policies.hpp"
#include "core/StreamingStores.hpp"
#include "io/WalkRecords.hpp"
#include <Kokkos_Core.hpp>
#include "core/Errors.hpp"

#include <fmt/format.h>
#include <fmt/ostream.h>

#include <filesystem>
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
      "cvest {}\nKokkos {}\nexecution spaces: {} (default {})\nthreads: {}\nHDF5 {}.{}.{}\nstrategies: {}\n",
      CVEST_VERSION, facts.kokkos_version, facts.spaces, facts.backend, facts.threads, major, minor, release,
      strategy_names());
  text += fmt::format("HDF5 filters: {}\ncoded by cvest's threads: {}\n", io::hdf5_filters_text(),
                      io::decoders_text());
  text += fmt::format("machine: {}, {} ({} logical CPUs, {:.0f} GiB)\n", facts.host,
                      facts.cpu.empty() ? "CPU unknown" : facts.cpu, facts.cpus, facts.memory_bytes / double(1ull << 30));
  text += fmt::format("caches: {}\n", policy::topology_text(policy::machine_topology()));
  if (!facts.gpu.empty()) text += fmt::format("gpu: {}\n", facts.gpu);
  std::string problem;
  const auto records = io::read_write_mode_records(problem);
  text += fmt::format("write modes measured (cvest tune, {}): {}\n", io::write_mode_records_path(),
                      !problem.empty() ? problem : records.empty() ? "none" : std::to_string(records.size()));
  for (const auto& r : records)
    text += fmt::format("  {}: writes {}; {}; reads {}; {}\n", r.key, r.direct() ? "direct" : "through the page cache",
                        r.text(), r.reads_measured() ? (r.read_direct() ? "direct" : "through the page cache") : "-",
                        r.read_text());
  const auto walks = io::read_walk_records(problem);
  text += fmt::format("flat's walks measured (cvest tune or first use, {}): {}\n", io::walk_records_path(),
                      !problem.empty() ? problem : walks.empty() ? "none" : std::to_string(walks.size()));
  for (const auto& r : walks)
    text += fmt::format("  {}, {}, {}: {}\n", r.key, io::to_string(r.walk), to_string(r.precision), r.text());
  text += first_use_text();
  if (policy::on_host<Kokkos::DefaultExecutionSpace>)
    for (const Precision p : {Precision::f64, Precision::f32}) {
      const std::size_t size = element_size(p);
      const auto in_force = [&](const char* what, int few, int many, const std::string& source) {
        const std::string most = few == many ? std::to_string(many)
                                             : fmt::format("{} below {} dates, {} from {}", few, policy::flat_many_dates,
                                                           many, policy::flat_many_dates);
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

namespace {

// The discount bytes at each shape of the walks: --walk-size, at most an
// eighth of memory (two arrays of it at a time), said where cut; checked
// before the disk passes so a bad value fails at once.
double walk_bytes(const TuneArgs& args, std::ostream& progress) {
  double asked = 0;
  try {
    asked = double(parse_bytes(args.walk_size));
  } catch (const InputError& e) {
    throw InputError(std::string("cvest tune --walk-size: ") + e.what());
  }
  const double most = build_facts().memory_bytes / 8;
  if (asked < double(std::size_t(1) << 20))
    throw std::invalid_argument("cvest tune needs --walk-size of at least 1 MiB, not " + args.walk_size);
  if (most > 0 && asked > most) {
    fmt::print(progress, "cvest tune: --walk-size {} cut to {:.2f} GB, an eighth of this machine's memory\n",
               args.walk_size, most / 1e9);
    return most;
  }
  return asked;
}

// flat/left's streams and flat/right's dates at once measured in memory and
// recorded; what the next runs take.
void tune_walks(double bytes, int repeats, std::ostream& progress, std::ostream& out_text) {
  if (!policy::on_host<Kokkos::DefaultExecutionSpace>) {
    fmt::print(out_text, "flat's walks: not measured (the kernels run on {}, not the host)\n",
               build_facts().backend);
    return;
  }
  if (!streaming::used_on<Kokkos::DefaultExecutionSpace>()) {
    fmt::print(out_text, "flat's walks: not measured (this build writes without streaming stores: flat walks one "
                         "stream and one date at a time whatever the count)\n");
    return;
  }
  for (const io::Walk walk : {io::Walk::left_streams, io::Walk::right_dates}) {
    const bool right = walk == io::Walk::right_dates;
    const char* what = right ? "dates" : "streams";
    fmt::print(progress, "cvest tune: {} with at most 1, 2 and 4 {} at once, {:.2f} GB of discount at each of two "
                         "shapes, {} threads, interleaved\n", io::flat_name(walk), what, bytes / 1e9,
               policy::host_threads());
    const io::WalkRecord record = measure_walks(walk, bytes, repeats + 3, 2.0, progress);
    io::save_walk_record(record);
    apply_walk_record(record);
    const std::string source = right ? policy::flat_dates_source() : policy::flat_streams_source();
    fmt::print(out_text, "{} now {} at most {} at once on this machine with {} threads{}\n{}\n",
               io::flat_name(walk), right ? "takes" : "walks", record.counts(true), policy::host_threads(),
               source.rfind("CVEST_FLAT_DATES", 0) == 0 ? " (" + source + " sets it in this shell)" : std::string(),
               record.text());
  }
  fmt::print(out_text, "recorded in {}\n", io::walk_records_path());
}

}  // namespace

void tune_command(const TuneArgs& args, std::ostream& progress, std::ostream& out_text) {
  const double walks = walk_bytes(args, progress);
  if (args.walks_only) return tune_walks(walks, args.repeats, progress, out_text);
  // Whole pages: O_DIRECT writes nothing else (1GB is not a multiple of 4096).
  const std::size_t asked = parse_bytes(args.size);
  const double bytes = double(asked / io::direct_alignment * io::direct_alignment);
  if (bytes < double(std::size_t(1) << 20) || args.repeats < 1)
    throw std::invalid_argument("cvest tune needs --size of at least 1 MiB and --repeats >= 1");
  const int repeats = args.repeats + args.repeats % 2;
  if (repeats != args.repeats)
    fmt::print(progress, "cvest tune: {} passes each way, not {}: an even count has each way follow each equally often "
                         "(a pass after the other kind measured 4x slower here)\n", repeats, args.repeats);
  if (double(asked) != bytes)
    fmt::print(progress, "cvest tune: {} bytes rounded down to {:.0f}, a multiple of 4096 (O_DIRECT's unit)\n", asked,
               bytes);
  if (!std::filesystem::is_directory(args.folder))
    throw InputError(args.folder + ": not a folder (cvest tune measures writes to a new file in it)");
  if (const double free = io::free_space(args.folder); free > 0 && free < 2.2 * bytes)
    throw IoError(fmt::format("{}: {:.2f} GB free, and cvest tune holds {:.2f} GB at a time (an input and its "
                              "output); pass a smaller --size", args.folder, free / 1e9, 2.2 * bytes / 1e9));
  fmt::print(progress, "cvest tune: {} x {:.2f} GB each way in {} ({}), interleaved, the device idle before each\n",
             repeats, bytes / 1e9, args.folder, io::write_mode_key(args.folder));
  io::WriteModeRecord record = io::measure_write_modes(args.folder, bytes, repeats, progress);
  io::save_write_mode_record(record);  // kept should the read measurement fail
  fmt::print(progress, "cvest tune: cvest runs on an input of {:.2f} GB not cached, reading it both ways\n", bytes / 1e9);
  measure_reads(args.folder, bytes, repeats, record, progress);
  io::save_write_mode_record(record);
  fmt::print(out_text,
             "{}: [output] direct = \"auto\" now writes {} there\n{}\n[input] direct = \"auto\" reads an input the "
             "page cache does not hold {} there\n{}\nrecorded in {}\n",
             args.folder, record.direct() ? "past the page cache (O_DIRECT)" : "through the page cache", record.text(),
             record.read_direct() ? "past the page cache (O_DIRECT)" : "through the page cache", record.read_text(),
             io::write_mode_records_path());
  tune_walks(walks, args.repeats, progress, out_text);
}

}  // namespace cvest::app
