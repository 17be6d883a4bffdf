#include "app/run/Prepare.hpp"

#include "core/Errors.hpp"
#include "io/input/Generator.hpp"
#include "io/os/ReadyToWrite.hpp"
#include "io/output/OutputFile.hpp"

#include <fmt/format.h>
#include <fmt/ostream.h>

#include <filesystem>
#include <ostream>
#include <system_error>

namespace cvest::app {

namespace {

// Before anything is generated: both paths usable, and the input and the
// output fit their disk together.
void generate_input(const Deck& deck, const Ranks& ranks, bool plan_only, Preparation& prep, std::ostream& progress) {
  if (!deck.input.generate) throw InputError(deck.input.file + ": no such file (and the deck has no [input] generate)");
  const auto& g = *deck.input.generate;
  fmt::print(progress, "cvest: {} {} ({} x {} x {}, {})\n", plan_only ? "would generate" : "generating",
             deck.input.file, g.dates, g.ids, g.cols, to_string(g.precision));
  io::OutputSpec output;
  output.T = g.dates, output.N = g.ids, output.K = g.cols;
  output.precision = deck.run.precision.value_or(g.precision);
  output.compression = deck.output.compression;
  prep.generated_input_bytes = io::generated_bytes(g);
  // Neither directory made yet (a --plan makes none; the run makes the
  // output's after generating); what killed runs left removed by a run only.
  io::ready_to_write({{deck.input.file, prep.generated_input_bytes, false, false},
                      {deck.output.file, io::output_bytes(output), deck.output.overwrite, false, !plan_only}});
  if (!plan_only && ranks.root()) io::generate_input(deck.input.file, g, false);
}

}  // namespace

Preparation prepare_run(const Deck& deck, const Ranks& ranks, bool plan_only, std::ostream& progress) {
  Preparation prep;
  std::error_code ec;
  prep.input_to_generate = !std::filesystem::exists(deck.input.file, ec);
  ranks.barrier();  // every rank has looked before rank 0 generates it
  ranks.together([&] {
    if (prep.input_to_generate) generate_input(deck, ranks, plan_only, prep, progress);
    io::ready_to_write({{deck.output.file, 0, deck.output.overwrite, !plan_only}});  // its size comes with the plan
    // One run per output at a time: a second is refused here, not at its end.
    if (!plan_only && ranks.root()) prep.output_lock = std::make_unique<io::OutputLock>(deck.output.file);
  });
  return prep;
}

}  // namespace cvest::app
