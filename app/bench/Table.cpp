// What `cvest bench` prints: the short summary by default (no line past 120
// columns), the full table with flat's walk, every column and the legend
// under --explain.
#include "app/bench/Formats.hpp"

#include "app/bench/RoofStats.hpp"
#include "core/FlatRun.hpp"
#include "core/Policies.hpp"

#include <fmt/format.h>
#include <fmt/ostream.h>

#include <ostream>
#include <string>

namespace cvest::app::bench {

namespace {

std::string header(const Report& report) {
  return fmt::format("\ncvest bench  {} x {} x {}  backend {} (Kokkos {}, {} threads, {} host vectors), median of {}\n{}",
                     report.config.dates, report.config.ids, report.config.cols, report.build.backend,
                     report.build.kokkos_version, report.build.threads, report.build.host_vectors,
                     report.config.repeats,
                     report.first_use.empty() ? std::string() : "first use: " + report.first_use + "\n");
}

// The rows `which` finds: "flat right double, ...".
template <class Which>
std::string rows_where(const Report& report, Which which) {
  std::string rows;
  for (const auto& res : report.results)
    if (which(res))
      rows += fmt::format("{}{} {} {}", rows.empty() ? "" : ", ", to_string(res.strategy), to_string(res.layout),
                          to_string(res.precision));
  return rows;
}
// The rows above their roof beyond their spread (above_roof).
std::string faults(const Report& report) { return rows_where(report, above_roof); }

// The rows whose pairs swung (pairs_unsteady): one line, empty where none;
// `brief` within the summary's 120 columns (with a few rows named).
std::string unsteady_line(const Report& report, bool brief = false) {
  const std::string rows = rows_where(report, pairs_unsteady);
  if (rows.empty()) return {};
  if (brief)
    return fmt::format("UNSTEADY: {}: x roof and best-of part by more than {:.2f}; run again (--explain)\n", rows,
                       unsteady_pairs);
  return fmt::format("UNSTEADY: {}: x roof and best-of part by more than {:.2f}: the copies beside its passes ran at "
                     "another pace than its kernel (the machine's bandwidth moved from pass to pass), so its x roof "
                     "measures the machine, not the kernel; run it again, with more --repeats\n",
                     rows, unsteady_pairs);
}

// The row of the most GB/s whose x roof measured it (not above its roof,
// not unsteady); null where there is none.
const Result* best_row(const Report& report) {
  const Result* best = nullptr;
  for (const auto& res : report.results)
    if (!above_roof(res) && !pairs_unsteady(res) && (!best || res.GBps > best->GBps)) best = &res;
  return best;
}

std::string best_line(const Result* best) {
  return best ? fmt::format("best: {} ({}, {}) at {:.2f} of the copy roof on its arrays\n", to_string(best->strategy),
                            to_string(best->layout), to_string(best->precision), best->roof_fraction)
              : std::string();
}

// How flat walks these arrays on the host: its runs, tiles, dates and streams.
void print_flat_walk(const Report& report, std::ostream& out) {
  if (!policy::on_host<Kokkos::DefaultExecutionSpace>) return;
  fmt::print(out, "flat's runs on the host (and the roofs'): {} (float: {} elements)\n", policy::flat_run_text(8),
             policy::flat_run_elements(4));
  const std::size_t slice = std::size_t(report.config.ids * report.config.cols) * 8,
                    tile = policy::flat_tile_bytes(slice, 8, policy::flat_dates_most(8, report.config.dates));
  fmt::print(out, "flat/right at this shape: {} (multBy {} MiB in double, tiles of {} KiB)\n",
             tile >= slice ? "one tile holds all of multBy" : "tiles of ids walked date by date", slice >> 20,
             tile >> 10);
  if (!report.flat_dates.empty()) fmt::print(out, "flat/right dates at once on these arrays: {}\n", report.flat_dates);
  if (!report.flat_streams.empty()) fmt::print(out, "flat/left streams on these arrays: {}\n", report.flat_streams);
}

}  // namespace

void print_table(const Report& report, std::ostream& out) {
  const auto& r = report.roof;
  fmt::print(out, "{}", header(report));
  print_flat_walk(report, out);
  fmt::print(out, "roof (same run, same size, medians (min-max)): copy {:.1f} ({:.1f}-{:.1f}) GB/s, copy with streaming "
                  "stores {:.1f} ({:.1f}-{:.1f}) GB/s, triad {:.1f} GB/s; warmed {:.0f} s first\n\n",
             r.copy_GBps, r.copy_min_GBps, r.copy_max_GBps, r.copy_streaming_GBps, r.copy_streaming_min_GBps,
             r.copy_streaming_max_GBps, r.triad_GBps, report.config.warm_seconds);
  fmt::print(out, "{:<15} {:<6} {:<7} {:<9} {:>12} {:>9} {:>13} {:>7} {:>7} {:>11} {:>7}  {}\n", "strategy", "layout",
             "prec", "stores", "median ms", "GB/s", "min-max", "roof", "x roof", "(quartiles)", "best-of", "work items");
  for (const auto& res : report.results) {
    const double moved = bytes_moved(report.config.dates, report.config.ids, report.config.cols, res.precision);
    fmt::print(out, "{:<15} {:<6} {:<7} {:<9} {:>12.3f} {:>9.1f} {:>13} {:>7.1f} {:>7.2f} {:>11} {:>7.2f}  {}\n",
               to_string(res.strategy), to_string(res.layout), to_string(res.precision),
               res.streaming ? "streaming" : "regular", res.median_s * 1e3, res.GBps,
               fmt::format("{:.1f}-{:.1f}", moved / res.max_s / 1e9, moved / res.min_s / 1e9), res.roof_GBps,
               res.roof_fraction, fmt::format("{:.2f}-{:.2f}", res.roof_fraction_q1, res.roof_fraction_q3),
               res.roof_fraction_best, info(res.strategy).work_items);
  }
  fmt::print(out, "\nroof: GB/s of the kind of copy of the row's bytes with the fastest median: its discount into its cv "
                  "and its multBy read, on the same arrays beside each pass, with regular or streaming stores in flat's "
                  "runs, or with streaming stores in flat's own walk, the multiply removed (on LayoutLeft runs of T, on "
                  "LayoutRight its dates at once); x roof: the median over repeats of GB/s over that kind's pass in the "
                  "same repeat, and its quartiles (a row within them of 1.00 is at the roof); best-of: the kernel's fastest pass "
                  "against the fastest pass of any of those copies (each at its quietest moment; where the two part by "
                  "more than {:.2f} the row is marked UNSTEADY below)\n", unsteady_pairs);
  if (const std::string above = faults(report); !above.empty())
    fmt::print(out, "MEASUREMENT FAULT: {} outran a copy of its own bytes beside it in every repeat (or its fastest "
                    "pass the fastest copy's by more than {:.0f}%); a kernel is that "
                    "copy plus a multiply, so this run's figures cannot be trusted (report it, with this output)\n",
               above, (best_above - 1) * 100);
  fmt::print(out, "{}{}", unsteady_line(report), best_line(best_row(report)));
}

void print_summary(const Report& report, std::ostream& out) {
  const auto& r = report.roof;
  fmt::print(out, "{}", header(report));
  fmt::print(out, "roof: copy {:.1f} GB/s, with streaming stores {:.1f} GB/s, triad {:.1f} GB/s (medians, this run)\n\n",
             r.copy_GBps, r.copy_streaming_GBps, r.triad_GBps);
  fmt::print(out, "{:<15} {:<6} {:<7} {:<9} {:>10} {:>9} {:>7} {:>11} {:>7}\n", "strategy", "layout", "prec",
             "stores", "median ms", "GB/s", "x roof", "(quartiles)", "best-of");
  for (const auto& res : report.results)
    fmt::print(out, "{:<15} {:<6} {:<7} {:<9} {:>10.3f} {:>9.1f} {:>7.2f} {:>11} {:>7.2f}\n", to_string(res.strategy),
               to_string(res.layout), to_string(res.precision), res.streaming ? "streaming" : "regular",
               res.median_s * 1e3, res.GBps, res.roof_fraction,
               fmt::format("{:.2f}-{:.2f}", res.roof_fraction_q1, res.roof_fraction_q3), res.roof_fraction_best);
  fmt::print(out, "\n");
  if (const std::string above = faults(report); !above.empty())
    fmt::print(out, "MEASUREMENT FAULT: {} outran a copy of its own bytes: these figures cannot be "
                    "trusted\n", above);
  fmt::print(out, "{}{}", unsteady_line(report, true), best_line(best_row(report)));
  fmt::print(out, "(--explain: flat's walk on these arrays, each copy's min-max, min-max per row, work items, what "
                  "each column means)\n");
}

}  // namespace cvest::app::bench
