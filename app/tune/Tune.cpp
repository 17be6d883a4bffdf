#include "app/tune/Tune.hpp"

#include "app/tune/TuneReads.hpp"
#include "app/tune/TuneWalks.hpp"
#include "app/tune/WalkRecords.hpp"
#include "app/tune/WriteModes.hpp"
#include "core/Errors.hpp"
#include "core/FlatRun.hpp"
#include "core/Plan.hpp"
#include "core/Policies.hpp"
#include "core/Spaces.hpp"
#include "core/StreamingStores.hpp"
#include "io/os/DirectWriter.hpp"
#include "io/os/Disk.hpp"

#include <Kokkos_Core.hpp>
#include <fmt/format.h>
#include <fmt/ostream.h>

#include <filesystem>
#include <ostream>
#include <stdexcept>

namespace cvest::app {

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
  // Each precision on its own: float's best count differed from double's (issue 59).
  for (const Precision precision : {Precision::f64, Precision::f32})
    for (const Walk walk : {Walk::left_streams, Walk::right_dates}) {
      const bool right = walk == Walk::right_dates;
      const char* what = right ? "dates" : "streams";
      fmt::print(progress, "cvest tune: {} in {} with at most 1, 2 and 4 {} at once, {:.2f} GB of discount at {} "
                           "dates, {} threads, interleaved\n", flat_name(walk), to_string(precision), what,
                 bytes / 1e9, fmt::join(walk_dates, ", "), policy::host_threads());
      const WalkRecord record = measure_walks(walk, precision, bytes, repeats + 3, 2.0, progress);
      save_walk_record(record);
      apply_walk_record(record);
      const std::size_t size = element_size(precision);
      const std::string source = right ? policy::flat_dates_source(size) : policy::flat_streams_source(size);
      fmt::print(out_text, "{} now {} at once at most {}, in {} on this machine with {} threads{}\n{}\n",
                 flat_name(walk), right ? "takes" : "walks", record.counts(true), to_string(precision),
                 policy::host_threads(),
                 source.rfind("CVEST_FLAT_DATES", 0) == 0 ? " (" + source + " sets it in this shell)" : std::string(),
                 record.text());
    }
  fmt::print(out_text, "recorded in {}\n", walk_records_path());
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
             repeats, bytes / 1e9, args.folder, write_mode_key(args.folder));
  WriteModeRecord record = measure_write_modes(args.folder, bytes, repeats, progress);
  save_write_mode_record(record);  // kept should the read measurement fail
  fmt::print(progress, "cvest tune: cvest runs on an input of {:.2f} GB not cached, reading it both ways\n", bytes / 1e9);
  measure_reads(args.folder, bytes, repeats, record, progress);
  save_write_mode_record(record);
  fmt::print(out_text,
             "{}: [output] direct = \"auto\" now writes {} there\n{}\n[input] direct = \"auto\" reads an input the "
             "page cache does not hold {} there\n{}\nrecorded in {}\n",
             args.folder, record.direct() ? "past the page cache (O_DIRECT)" : "through the page cache", record.text(),
             record.read_direct() ? "past the page cache (O_DIRECT)" : "through the page cache", record.read_text(),
             write_mode_records_path());
  tune_walks(walks, args.repeats, progress, out_text);
}

}  // namespace cvest::app
