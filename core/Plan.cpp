#include "core/Plan.hpp"

#include "core/Errors.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <cctype>
#include <cmath>
#ifdef __GLIBC__
#include <malloc.h>
#endif

namespace cvest {

BlockQuantum block_quantum(BlockQuantum hdf5_row, std::array<Index, 2> decoded, Index output_chunk_ids) {
  if (hdf5_row.ids > 0) return hdf5_row;
  const Index dates = std::max<Index>(decoded[0], 1);
  if (output_chunk_ids > 0) return BlockQuantum{dates, output_chunk_ids};
  return BlockQuantum{dates, std::max<Index>(decoded[1], 1)};
}

BlockPlan plan_blocks(Index T, Index N, Index K, std::size_t element_size, std::size_t budget_bytes,
                      BlockQuantum quantum, std::size_t max_block_bytes, LayoutKind layout) {
  BlockPlan plan;
  plan.layout = layout;
  plan.T = T;
  plan.N = N;
  plan.K = K;
  plan.element_size = element_size;
  const double row = double(K) * double(element_size);  // one id of one date
  // multBy for the id block is resident too: one row per id.
  const double per_id_date = double(pipeline_buffers) * row;
  const auto in_budget = [&](Index dates, Index ids) {
    return per_id_date * double(dates) * double(ids) + row * double(ids) <= double(budget_bytes);
  };
  const auto fits = [&](Index dates, Index ids) {
    return in_budget(dates, ids) && (max_block_bytes == 0 || row * double(dates) * double(ids) <= double(max_block_bytes));
  };
  // A resident multBy (and its copy in the compute space) takes its share first.
  const double multby_bytes = 2.0 * row * double(N);
  plan.multby_resident = multby_bytes <= double(budget_bytes) / 4;
  if (plan.multby_resident) budget_bytes -= std::size_t(multby_bytes);
  if (per_id_date + row > double(budget_bytes))
    throw InputError(fmt::format("memory_budget {} is too small: one id row needs {} ({} buffers of {} columns)",
                                 format_bytes(double(budget_bytes)), format_bytes(per_id_date + row),
                                 pipeline_buffers, K));
  const Index id_quantum = std::clamp<Index>(quantum.ids, 1, N);
  Index date_quantum = std::clamp<Index>(quantum.dates, 1, T);
  if (!in_budget(date_quantum, 1)) date_quantum = 1;  // chunks along dates get cut
  // Largest id count in [1, N] for which pred holds (pred(1) assumed).
  const auto most_ids = [&](auto&& pred) {
    Index lo = 1, hi = N;
    while (lo < hi) {
      const Index mid = lo + (hi - lo + 1) / 2;
      if (pred(mid)) lo = mid;
      else hi = mid - 1;
    }
    return lo;
  };
  // Ids for a block of `dates`: as many as fit, rounded down to whole
  // output chunks; one whole chunk even above the cap (not the budget).
  const auto ids_for = [&](Index dates) {
    Index ids = most_ids([&](Index n) { return fits(dates, n); });
    if (ids >= N) return N;
    if (ids >= id_quantum) ids -= ids % id_quantum;
    else if (in_budget(dates, id_quantum)) ids = id_quantum;
    return ids;
  };
  Index dates = date_quantum, ids = N;
  if (layout == LayoutKind::left) {
    // Dates first: all of them, else the most (in whole chunks) that one id
    // quantum's block holds within the budget.
    dates = T;
    if (!in_budget(dates, id_quantum)) {  // id_quantum is within [1, N] already
      dates = date_quantum;
      for (Index d = date_quantum; d <= T && in_budget(d, id_quantum); d += date_quantum) dates = d;
    }
    ids = ids_for(dates);
    // Where the cap (not the budget) leaves each date's piece shorter than
    // left_min_run_bytes, trade dates for ids.
    const Index min_ids = std::min<Index>(N, Index((double(left_min_run_bytes) + row - 1) / row));
    if (ids < min_ids && in_budget(date_quantum, min_ids)) {
      while (dates > date_quantum && ids_for(dates) < min_ids)
        dates = std::max(date_quantum, dates / 2 - (dates / 2) % date_quantum);
      ids = ids_for(dates);
    }
    // Keep a few blocks so reading, computing and writing overlap.
    if (ids >= N && dates >= T && N >= 4) {
      const Index quarter = (N + 3) / 4;
      ids = quarter >= id_quantum ? quarter - quarter % id_quantum : id_quantum;
    }
  } else if (!fits(dates, N)) {
    ids = ids_for(dates);
  } else {
    while (dates < T && fits(std::min(T, dates + date_quantum), N)) dates = std::min(T, dates + date_quantum);
    // Keep a few blocks so reading, computing and writing overlap.
    if (T >= 4) {
      const Index quarter = (T + 3) / 4;
      dates = std::min(dates, std::max(date_quantum, quarter - quarter % date_quantum));
    }
  }
  plan.block_dates = dates;
  plan.block_ids = ids;
  plan.buffer_bytes = std::size_t(per_id_date * double(dates) * double(ids) + row * double(ids));
  // Id ranges of `ids`; blocks thinner than a chunk stay inside it (the last
  // of a chunk is shorter), so no block needs two chunks' worth of decoding.
  std::vector<Range> id_ranges;
  const Index span = ids < id_quantum ? id_quantum : ids;
  for (Index q0 = 0; q0 < N; q0 += span)
    for (Index i0 = q0, q1 = std::min(N, q0 + span); i0 < q1; i0 += ids) id_ranges.push_back({i0, std::min(q1, i0 + ids)});
  if (plan.multby_resident) plan.buffer_bytes += std::size_t(multby_bytes);
  // LayoutLeft blocks go id range by id range: each holds its dates already.
  if (plan.multby_resident && !quantum.ids_outer && layout == LayoutKind::right) {
    for (Index t0 = 0; t0 < T; t0 += dates)
      for (const Range& r : id_ranges) plan.blocks.push_back({{t0, std::min(T, t0 + dates)}, r});
  } else {
    for (const Range& r : id_ranges)
      for (Index t0 = 0; t0 < T; t0 += dates) plan.blocks.push_back({{t0, std::min(T, t0 + dates)}, r});
  }
  return plan;
}

void return_freed_buffers_to_the_system() {
#ifdef __GLIBC__
  mallopt(M_MMAP_THRESHOLD, 1 << 20);  // a fixed threshold: glibc no longer moves it
#endif
}

std::size_t parse_bytes(const std::string& text) {
  std::size_t pos = 0;
  while (pos < text.size() && std::isspace(static_cast<unsigned char>(text[pos]))) ++pos;
  std::size_t end = pos;
  while (end < text.size() && (std::isdigit(static_cast<unsigned char>(text[end])) || text[end] == '.' ||
                               text[end] == '-' || text[end] == '+' || text[end] == 'e'))
    ++end;
  double value = 0;
  try {
    std::size_t used = 0;
    value = std::stod(text.substr(pos, end - pos), &used);
    if (used != end - pos) throw std::invalid_argument("");
  } catch (const std::exception&) {
    throw InputError("memory size '" + text + "' is not a number with an optional unit (e.g. 2GiB, 512MiB)");
  }
  std::string unit = text.substr(end);
  unit.erase(std::remove_if(unit.begin(), unit.end(), [](unsigned char c) { return std::isspace(c); }), unit.end());
  for (auto& c : unit) c = char(std::toupper(static_cast<unsigned char>(c)));
  double scale = 0;
  if (unit.empty() || unit == "B") scale = 1;
  else if (unit == "K" || unit == "KB") scale = 1e3;
  else if (unit == "KIB") scale = 1024.0;
  else if (unit == "M" || unit == "MB") scale = 1e6;
  else if (unit == "MIB") scale = 1024.0 * 1024;
  else if (unit == "G" || unit == "GB") scale = 1e9;
  else if (unit == "GIB") scale = 1024.0 * 1024 * 1024;
  else if (unit == "T" || unit == "TB") scale = 1e12;
  else if (unit == "TIB") scale = 1024.0 * 1024 * 1024 * 1024;
  else if (unit == "P" || unit == "PB") scale = 1e15;
  else if (unit == "PIB") scale = 1024.0 * 1024 * 1024 * 1024 * 1024;
  else throw InputError("memory size '" + text + "' has an unknown unit; use B, KiB, MiB, GiB, TiB, PiB (or KB, MB, GB, TB, PB)");
  const double bytes = value * scale;
  if (!(bytes > 0) || !std::isfinite(bytes)) throw InputError("memory size '" + text + "' must be positive");
  if (bytes > 1e15) throw InputError("memory size '" + text + "' is absurd (over 1 PB)");
  return std::size_t(bytes);
}

std::string format_bytes(double bytes) {
  const char* units[] = {"B", "KiB", "MiB", "GiB", "TiB"};
  int u = 0;
  while (bytes >= 1024 && u < 4) {
    bytes /= 1024;
    ++u;
  }
  return fmt::format(u == 0 ? "{:.0f} {}" : "{:.2f} {}", bytes, units[u]);
}

}  // namespace cvest
