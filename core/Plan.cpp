#include "core/Plan.hpp"

#include "core/Errors.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <tuple>
#include <cctype>
#include <cmath>
#include <stdexcept>
#include <utility>
#ifdef __GLIBC__
#include <malloc.h>
#endif

namespace cvest {

const BlockPlan& plan_for(const std::vector<BlockPlan>& plans, LayoutKind layout) {
  for (const BlockPlan& p : plans)
    if (p.layout == layout) return p;
  throw std::logic_error("cvest: no block plan for a layout the deck runs");
}

BlockQuantum block_quantum(BlockQuantum hdf5_row, std::array<Index, 2> decoded, Index output_chunk_ids,
                           std::array<Index, 3> held_cells) {
  if (hdf5_row.ids > 0) return hdf5_row;
  const Index dates = std::max<Index>(decoded[0], 1);
  BlockQuantum q{dates, output_chunk_ids > 0 ? output_chunk_ids : std::max<Index>(decoded[1], 1)};
  q.cells = held_cells;
  return q;
}

namespace {

// A block's extents within a budget: what fits it and the cap, in whole
// chunks (plan_blocks' rules).
class BlockSizer {
 public:
  BlockSizer(Index T, Index N, Index K, std::size_t element_size, std::size_t budget_bytes, BlockQuantum quantum,
             std::size_t max_block_bytes)
      : T_(T), N_(N), row_(double(K) * double(element_size)), per_id_date_(double(pipeline_buffers) * row_),
        budget_(double(budget_bytes)), max_block_(double(max_block_bytes)),
        id_quantum_(std::clamp<Index>(quantum.ids, 1, N)), date_quantum_(std::clamp<Index>(quantum.dates, 1, T)) {
    if (!in_budget(date_quantum_, 1)) date_quantum_ = 1;  // chunks along dates get cut
  }

  // multBy for the id block is resident too: one row per id.
  double bytes(Index dates, Index ids) const { return per_id_date_ * double(dates) * double(ids) + row_ * double(ids); }
  bool in_budget(Index dates, Index ids) const { return bytes(dates, ids) <= budget_; }
  bool fits(Index dates, Index ids) const {
    return in_budget(dates, ids) && (max_block_ == 0 || row_ * double(dates) * double(ids) <= max_block_);
  }
  Index id_quantum() const { return id_quantum_; }

  // LayoutLeft: dates first, all of them, else the most (in whole chunks)
  // that one id quantum's block holds within the budget; then ids.
  std::pair<Index, Index> left() const {
    Index dates = T_;
    if (!in_budget(dates, id_quantum_)) {  // id_quantum is within [1, N] already
      dates = date_quantum_;
      for (Index d = date_quantum_; d <= T_ && in_budget(d, id_quantum_); d += date_quantum_) dates = d;
    }
    Index ids = ids_for(dates);
    // Where the cap (not the budget) leaves each date's piece shorter than
    // left_min_run_bytes, trade dates for ids.
    const Index min_ids = std::min<Index>(N_, Index((double(left_min_run_bytes) + row_ - 1) / row_));
    if (ids < min_ids && in_budget(date_quantum_, min_ids)) {
      while (dates > date_quantum_ && ids_for(dates) < min_ids)
        dates = std::max(date_quantum_, dates / 2 - (dates / 2) % date_quantum_);
      ids = ids_for(dates);
    }
    // Keep a few blocks so reading, computing and writing overlap.
    if (ids >= N_ && dates >= T_ && N_ >= 4) {
      const Index quarter = (N_ + 3) / 4;
      ids = quarter >= id_quantum_ ? quarter - quarter % id_quantum_ : id_quantum_;
    }
    return {dates, ids};
  }

  // LayoutRight: whole dates where a date fits, as many as fit; else one
  // date's chunk of dates and as many ids as fit.
  std::pair<Index, Index> right() const {
    Index dates = date_quantum_;
    if (!fits(dates, N_)) return {dates, ids_for(dates)};
    while (dates < T_ && fits(std::min(T_, dates + date_quantum_), N_)) dates = std::min(T_, dates + date_quantum_);
    // Keep a few blocks so reading, computing and writing overlap.
    if (T_ >= 4) {
      const Index quarter = (T_ + 3) / 4;
      dates = std::min(dates, std::max(date_quantum_, quarter - quarter % date_quantum_));
    }
    return {dates, N_};
  }

 private:
  // Largest id count in [1, N] for which pred holds (pred(1) assumed).
  template <class Pred>
  Index most_ids(Pred&& pred) const {
    Index lo = 1, hi = N_;
    while (lo < hi) {
      const Index mid = lo + (hi - lo + 1) / 2;
      if (pred(mid)) lo = mid;
      else hi = mid - 1;
    }
    return lo;
  }
  // Ids for a block of `dates`: as many as fit, rounded down to whole output
  // chunks; one whole chunk even above the cap (not the budget).
  Index ids_for(Index dates) const {
    Index ids = most_ids([&](Index n) { return fits(dates, n); });
    if (ids >= N_) return N_;
    if (ids >= id_quantum_) ids -= ids % id_quantum_;
    else if (in_budget(dates, id_quantum_)) ids = id_quantum_;
    return ids;
  }

  Index T_, N_;
  double row_;          // one id of one date
  double per_id_date_;  // the pipeline's buffers of one id of one date
  double budget_, max_block_;
  Index id_quantum_, date_quantum_;
};

// The plan's blocks of `dates` x `ids`. Id ranges of `ids`; blocks thinner
// than a chunk stay inside it (the last of a chunk is shorter), so no block
// needs two chunks' worth of decoding. LayoutLeft blocks go id range by id
// range: each holds its dates already.
void list_blocks(BlockPlan& plan, Index dates, Index ids, Index id_quantum, bool ids_outer) {
  const Index T = plan.T, N = plan.N;
  std::vector<Range> id_ranges;
  const Index span = ids < id_quantum ? id_quantum : ids;
  for (Index q0 = 0; q0 < N; q0 += span)
    for (Index i0 = q0, q1 = std::min(N, q0 + span); i0 < q1; i0 += ids) id_ranges.push_back({i0, std::min(q1, i0 + ids)});
  if (plan.multby_resident && !ids_outer && plan.layout == LayoutKind::right) {
    for (Index t0 = 0; t0 < T; t0 += dates)
      for (const Range& r : id_ranges) plan.blocks.push_back({{t0, std::min(T, t0 + dates)}, r});
  } else {
    for (const Range& r : id_ranges)
      for (Index t0 = 0; t0 < T; t0 += dates) plan.blocks.push_back({{t0, std::min(T, t0 + dates)}, r});
  }
}

// Blocks cut at the edges of held cells (`cells`: dates, ids, dates in
// turn), then cell by cell in the file's order (dates, then ids; groups of
// cells[2] dates: ids, then dates), each cell's blocks in the order they
// had: the blocks of a cell run together, so a cell's chunks are let go
// before the next but one is decoded.
void in_cells(BlockPlan& plan, std::array<Index, 3> cells) {
  const Index ct = cells[0], ci = cells[1], together = std::max<Index>(cells[2], 1);
  std::vector<Block> cut;
  for (const Block& b : plan.blocks)
    for (Index t = b.dates.begin; t < b.dates.end; t = std::min(b.dates.end, t - t % ct + ct))
      for (Index i = b.ids.begin; i < b.ids.end; i = std::min(b.ids.end, i - i % ci + ci))
        cut.push_back({{t, std::min(b.dates.end, t - t % ct + ct)}, {i, std::min(b.ids.end, i - i % ci + ci)}});
  const auto order = [&](const Block& b) {
    const Index cell_date = b.dates.begin / ct;
    return std::tuple(cell_date / together, b.ids.begin / ci, cell_date);
  };
  std::stable_sort(cut.begin(), cut.end(), [&](const Block& a, const Block& b) { return order(a) < order(b); });
  plan.blocks = std::move(cut);
}

}  // namespace

BlockPlan plan_blocks(Index T, Index N, Index K, std::size_t element_size, std::size_t budget_bytes,
                      BlockQuantum quantum, std::size_t max_block_bytes, LayoutKind layout) {
  BlockPlan plan;
  plan.layout = layout;
  plan.T = T;
  plan.N = N;
  plan.K = K;
  plan.element_size = element_size;
  const double row = double(K) * double(element_size);
  // A resident multBy (and its copy in the compute space) takes its share first.
  const double multby_bytes = 2.0 * row * double(N);
  plan.multby_resident = quantum.multby_kept || multby_bytes <= double(budget_bytes) / 4;
  if (plan.multby_resident && !quantum.multby_kept) budget_bytes -= std::size_t(multby_bytes);
  plan.multby_reserved = quantum.multby_kept;
  const double per_id_date = double(pipeline_buffers) * row;
  if (per_id_date + row > double(budget_bytes))
    throw InputError(fmt::format("memory_budget {} is too small: one id row needs {} ({} buffers of {} columns)",
                                 format_bytes(double(budget_bytes)), format_bytes(per_id_date + row),
                                 pipeline_buffers, K));
  const BlockSizer sizer(T, N, K, element_size, budget_bytes, quantum, max_block_bytes);
  const auto [dates, ids] = layout == LayoutKind::left ? sizer.left() : sizer.right();
  plan.block_dates = dates;
  plan.block_ids = ids;
  plan.buffer_bytes = std::size_t(sizer.bytes(dates, ids));
  if (plan.multby_resident) plan.buffer_bytes += std::size_t(multby_bytes);
  list_blocks(plan, dates, ids, sizer.id_quantum(), quantum.ids_outer);
  const bool cells = quantum.cells[0] > 0 && quantum.cells[1] > 0;
  if (cells) in_cells(plan, quantum.cells);
  plan.id_ranges_together = !plan.multby_resident && !cells && !quantum.hdf5_cache;
  return plan;
}

void return_freed_buffers_to_the_system() {
#ifdef __GLIBC__
  mallopt(M_MMAP_THRESHOLD, 4 << 20);  // a fixed threshold: glibc no longer moves it
  mallopt(M_TRIM_THRESHOLD, 8 << 20);  // what is freed at the heap's top stays up to 8 MiB
  // ... in each arena: glibc gives threads that contend their own (up to 8
  // per core), and a Blosc-zstd output under the overlapped pipeline kept
  // 104-106 MiB with two, 111-113 MiB with the default (peer.budget_rss:
  // 48 MiB budget + 64 MiB); coding ran at the same rate either way.
  mallopt(M_ARENA_MAX, 2);
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
