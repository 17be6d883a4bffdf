#include "core/FlatRun.hpp"

#include "core/Errors.hpp"
#include "core/Plan.hpp"
#include "core/StreamingStores.hpp"

#include <Kokkos_Core.hpp>

#include <fmt/format.h>

#include <algorithm>
#include <cstdint>
#include <cstdlib>
#include <exception>
#include <mutex>
#include <stdexcept>
#include <string>

namespace cvest::policy {

namespace {

FlatRun measure() {
  FlatRun run;
  const Topology& topology = machine_topology();
  run.l2_share = topology.l2.share();
  run.l2_assumed = run.l2_share ? run.l2_share : std::size_t(1) << 20;  // the stated default
  if (const char* dates = std::getenv("CVEST_FLAT_DATES"); dates && *dates) {
    const std::string v = dates;
    if (v != "1" && v != "2" && v != "4")
      throw InputError("CVEST_FLAT_DATES: expected 1, 2 or 4 (dates flat takes at once at most), found '" + v + "'");
    run.dates_forced = std::stoi(v);
  }
  if (const char* tile = std::getenv("CVEST_FLAT_TILE"); tile && *tile) {
    try {
      run.tile_forced = parse_bytes(tile);
    } catch (const std::exception& e) {
      throw InputError(std::string("CVEST_FLAT_TILE: ") + e.what());
    }
  }
  if (const char* walk = std::getenv("CVEST_FLAT_WALK"); walk && (std::string(walk) == "storage" || std::string(walk) == "dates"))
    run.walk_forced = walk;
  if (const char* forced = std::getenv("CVEST_FLAT_RUN"); forced && *forced) {
    run.bytes = parse_bytes(forced);
    run.source = "CVEST_FLAT_RUN";
    return run;
  }
  run.l2_bytes = run.l2_share;
  run.source = run.l2_share ? topology.source : "L2 size not readable: a stated default of 1 MiB assumed";
  run.bytes = std::clamp<std::size_t>(run.l2_assumed / 8, std::size_t(64) << 10, std::size_t(1) << 20);
  return run;
}

}  // namespace

const FlatRun& flat_run() {
  static const FlatRun run = measure();
  return run;
}

namespace {

// What sets flat's width (flat/left's streams, flat/right's dates at once)
// and its store kind besides the CVEST_FLAT_* variables: a trial (cvest
// tune's, the first use's), else a record; per precision.
struct WidthChoice {
  int measured[2] = {0, 0};  // below flat_many_dates, from it
  std::string source;        // the measured counts'
};
struct StoreChoice {
  StoreKind measured = StoreKind::unset;
  std::string source;
};
struct Choices {
  std::mutex lock;
  WidthChoice left[2], right[2];  // [0] double, [1] float
  StoreChoice stores[2];
  int left_trial = 0, right_trial = 0;
  StoreKind stores_trial = StoreKind::unset;
};
Choices& choices() {
  static Choices c;
  return c;
}

std::size_t precision_index(std::size_t element_size) { return element_size == 4 ? 1 : 0; }

void check_width(int most) {
  if (most != 0 && most != 1 && most != 2 && most != 4)
    throw std::invalid_argument("flat's streams or dates at once: 1, 2 or 4, not " + std::to_string(most));
}

using Widths = WidthChoice (Choices::*)[2];

int width_most(Widths which, int Choices::*trial, int stated, std::size_t element_size, Index T) {
  Choices& c = choices();
  std::lock_guard<std::mutex> hold(c.lock);
  if (c.*trial) return c.*trial;
  const WidthChoice& w = (c.*which)[precision_index(element_size)];
  const int forced = flat_run().dates_forced, measured = w.measured[T >= flat_many_dates];
  return forced ? forced : measured ? measured : stated;
}

std::string width_source(Widths which, int Choices::*trial, std::size_t element_size) {
  Choices& c = choices();
  std::lock_guard<std::mutex> hold(c.lock);
  if (c.*trial) return fmt::format("cvest tune's trial of {}", c.*trial);
  if (flat_run().dates_forced) return "CVEST_FLAT_DATES=" + std::to_string(flat_run().dates_forced);
  const WidthChoice& w = (c.*which)[precision_index(element_size)];
  return w.measured[1] ? w.source : std::string();
}

void set_measured(Widths which, FlatCounts counts, const std::string& source, std::size_t element_size) {
  check_width(counts.few);
  check_width(counts.many);
  if ((counts.few == 0) != (counts.many == 0))
    throw std::invalid_argument("flat's counts measured at few and many dates: both or neither");
  Choices& c = choices();
  std::lock_guard<std::mutex> hold(c.lock);
  WidthChoice& w = (c.*which)[precision_index(element_size)];
  w.measured[0] = counts.few, w.measured[1] = counts.many, w.source = counts.many ? source : std::string();
}

void set_trial(int Choices::*trial, int most) {
  check_width(most);
  Choices& c = choices();
  std::lock_guard<std::mutex> hold(c.lock);
  c.*trial = most;
}

// CVEST_FLAT_STORES=regular|streaming, read once (anything else: an error).
StoreKind stores_forced() {
  static const StoreKind forced = [] {
    const char* v = std::getenv("CVEST_FLAT_STORES");
    if (!v || !*v) return StoreKind::unset;
    if (std::string(v) == "regular") return StoreKind::regular;
    if (std::string(v) == "streaming") return StoreKind::streaming;
    throw InputError(std::string("CVEST_FLAT_STORES: expected regular or streaming, found '") + v + "'");
  }();
  return forced;
}

}  // namespace

std::string flat_counts_below(int few, int many, const std::string& many_said) {
  return few == many ? std::string() : fmt::format(" below {0} dates, {1} from {0}", flat_many_dates, many_said);
}

int flat_dates_most(std::size_t e, Index T) { return width_most(&Choices::right, &Choices::right_trial, 2, e, T); }
std::string flat_dates_source(std::size_t e) { return width_source(&Choices::right, &Choices::right_trial, e); }
void set_flat_dates_measured(FlatCounts counts, const std::string& source, std::size_t e) {
  set_measured(&Choices::right, counts, source, e);
}
void set_flat_dates_trial(int most) { set_trial(&Choices::right_trial, most); }

int flat_streams_most(std::size_t e, Index T) { return width_most(&Choices::left, &Choices::left_trial, 4, e, T); }
std::string flat_streams_source(std::size_t e) { return width_source(&Choices::left, &Choices::left_trial, e); }
void set_flat_streams_measured(FlatCounts counts, const std::string& source, std::size_t e) {
  set_measured(&Choices::left, counts, source, e);
}
void set_flat_streams_trial(int most) { set_trial(&Choices::left_trial, most); }

bool flat_streaming_stores(std::size_t element_size) {
  if (!CVEST_HAVE_STREAMING_STORES) return false;
  Choices& c = choices();
  std::lock_guard<std::mutex> hold(c.lock);
  StoreKind kind = c.stores_trial;
  if (kind == StoreKind::unset) kind = stores_forced();
  if (kind == StoreKind::unset) kind = c.stores[precision_index(element_size)].measured;
  return kind != StoreKind::regular;  // unset: the stated default, streaming
}

std::string flat_stores_source(std::size_t element_size) {
  if (!CVEST_HAVE_STREAMING_STORES) return "this build has no streaming stores";
  Choices& c = choices();
  std::lock_guard<std::mutex> hold(c.lock);
  if (c.stores_trial != StoreKind::unset) return "a trial";
  if (stores_forced() != StoreKind::unset) return "CVEST_FLAT_STORES";
  return c.stores[precision_index(element_size)].source;
}

void set_flat_stores_measured(StoreKind kind, const std::string& source, std::size_t element_size) {
  Choices& c = choices();
  std::lock_guard<std::mutex> hold(c.lock);
  StoreChoice& s = c.stores[precision_index(element_size)];
  s.measured = kind, s.source = kind == StoreKind::unset ? std::string() : source;
}

void set_flat_stores_trial(StoreKind kind) {
  Choices& c = choices();
  std::lock_guard<std::mutex> hold(c.lock);
  c.stores_trial = kind;
}

std::string flat_stores_text(std::size_t element_size) {
  const std::string source = flat_stores_source(element_size);
  return fmt::format("{} stores ({})", flat_streaming_stores(element_size) ? "streaming" : "regular",
                     source.empty() ? std::string("the stated default") : source);
}

std::size_t flat_tile_bytes(std::size_t slice_bytes, std::size_t element_size, int dates) {
  const FlatRun& r = flat_run();
  const std::size_t run = std::size_t(flat_run_elements(element_size)) * element_size;
  // The tile's multBy and the discount rows of the dates walked at once
  // beside it fit the L2 share together, so the next group of dates reads
  // multBy from L2 again: whole runs, one at least.
  std::size_t tile = r.l2_assumed / std::size_t(std::max(dates, 1) + 1) / run * run;
  if (r.tile_forced > 0) tile = r.tile_forced;
  if (r.walk_forced == "storage") tile = slice_bytes;
  if (r.walk_forced == "dates") tile = run;
  tile = std::max(run, std::min(tile, slice_bytes));
  // Tiles of one size: as few as that size allows, evened out (a last tile
  // almost empty would leave threads' shares of the chunks uneven).
  const std::size_t tiles = (slice_bytes + tile - 1) / tile;
  tile = tiles > 0 ? (slice_bytes + tiles - 1) / tiles : tile;
  return std::max(run, (tile + run - 1) / run * run);  // whole runs, one at least
}

namespace {

// Circular distance of two byte offsets within a 4 KiB page.
std::size_t page_distance(std::uintptr_t a, std::uintptr_t b) {
  const std::size_t x = (a - b) % 4096;
  return std::min(x, 4096 - x);
}

bool rows_apart(std::uintptr_t d, std::uintptr_t cv, std::size_t row_bytes, int dates) {
  constexpr std::size_t apart = 1024;
  for (int u = 0; u < dates; ++u)
    for (int v = 0; v < dates; ++v) {
      if (u == v) continue;  // a date's own discount and cv: as in a copy
      const std::uintptr_t du = d + std::uintptr_t(u) * row_bytes, dv = d + std::uintptr_t(v) * row_bytes,
                           cu = cv + std::uintptr_t(u) * row_bytes, cvv = cv + std::uintptr_t(v) * row_bytes;
      if (page_distance(du, dv) < apart || page_distance(du, cvv) < apart || page_distance(cu, cvv) < apart) return false;
    }
  return true;
}

// " (CVEST_FLAT_DATES=2)", " (measured here by cvest tune on DATE)": what
// sets flat/right's most dates at once, where not the stated default.
std::string cap_note(std::size_t element_size) {
  const std::string source = flat_dates_source(element_size);
  return source.empty() ? std::string() : " (" + source + ")";
}

}  // namespace

int host_threads() { return Kokkos::DefaultHostExecutionSpace().concurrency(); }

FlatDates flat_dates(const void* d, const void* cv, std::size_t stride_bytes, Index T, bool even, int most) {
  const auto d_at = reinterpret_cast<std::uintptr_t>(d), cv_at = reinterpret_cast<std::uintptr_t>(cv);
  for (int dates : {4, 2}) {
    if (dates > most) continue;
    for (Index step = 1; step <= 4 && Index(dates) * step <= T; ++step) {
      if (even && T % (Index(dates) * step) != 0) continue;
      const std::size_t row_bytes = std::size_t(step) * stride_bytes;
      if (row_bytes % 16 != 0) continue;  // the rows' streaming stores share one alignment
      if (rows_apart(d_at, cv_at, row_bytes, dates)) return {dates, step};
    }
  }
  return {};
}

FlatStreams flat_left_streams(const void* d, const void* cv, Index T, std::size_t element_size) {
  const std::size_t run_bytes = std::size_t(std::max<Index>(T, 0)) * element_size;
  // Streams are the streaming-store path's (a build without SSE2, or regular
  // stores chosen here, walk one), and whole runs stream only where they
  // share an alignment.
  if (!flat_streaming_stores(element_size) || T < 1 || run_bytes % 16 != 0) return {};
  const Index per = flat_run_elements(element_size);
  const auto d_at = reinterpret_cast<std::uintptr_t>(d), cv_at = reinterpret_cast<std::uintptr_t>(cv);
  for (int streams : {4, 2}) {
    if (streams > flat_streams_most(element_size, T)) continue;
    // Whole runs in any full work item (its first may be entered part way),
    // over the streams; then nearer spacings, until the page offsets (256
    // of 16-byte steps at most) have all been tried.
    const Index most = (per - T + 1) / T / streams;
    for (Index q = most; q >= 1 && q > most - 256; --q)
      if (rows_apart(d_at, cv_at, std::size_t(q) * run_bytes, streams)) return {streams, q};
  }
  return {};
}

std::string flat_streams_text(const FlatStreams& streams, std::size_t element_size, Index T) {
  const std::string source = flat_streams_source(element_size);
  if (streams.streams == 1)
    return flat_streams_most(element_size, T) == 1 ? "one stream (" + (source.empty() ? std::string("at most one") : source) + ")"
                            : "one stream (runs of T dates not a multiple of 16 bytes, or no spacing of them "
                              "1 KiB apart in a page)";
  return fmt::format("{} streams at once, {} runs apart{}", streams.streams, streams.runs_apart,
                     source.empty() ? std::string() : " (" + source + ")");
}

std::string flat_dates_text(const FlatDates& dates, std::size_t element_size, Index T) {
  if (dates.dates == 1)
    return flat_dates_most(element_size, T) == 1 ? "one at a time" + cap_note(element_size)
                            : "one at a time (no group of dates whose rows sit 1 KiB apart in a page and share an "
                              "alignment, leaving no dates over where a few tiles do not split into whole tiles a thread)";
  return fmt::format("{} at once, {} apart{}", dates.dates, dates.step, cap_note(element_size));
}

int flat_walked(bool right, Index T, Index per_date, std::size_t element_size, const void* d, const void* cv) {
  return right ? FlatWalk(T, per_date, element_size, d, cv).together.dates
               : flat_left_streams(d, cv, T, element_size).streams;
}

std::string flat_walk_dates_text(const FlatWalk& walk) {
  std::string text = flat_dates_text(walk.together, walk.element, walk.full * walk.span + walk.over);
  if (walk.together.dates == 1 || walk.over == 0) return text;
  const Index alone = walk.alone();
  text += fmt::format("; the {} date{} over them ", walk.over, walk.over > 1 ? "s" : "");
  if (walk.rest_full > 0)
    text += fmt::format("{} at once, {} apart{}", walk.rest.dates, walk.rest.step,
                        alone > 0 ? fmt::format(", {} alone", alone) : std::string());
  else
    text += "one at a time";
  return text;
}

namespace {

std::string walk_text(std::size_t element_size) {
  const FlatRun& r = flat_run();
  // The count from flat_many_dates dates (the tile's size follows it), and
  // the one below where it differs.
  const int dates = flat_dates_most(element_size), few = flat_dates_most(element_size, flat_many_dates - 1);
  const std::string below =
      few == dates ? std::string() : fmt::format(" from {} dates, {} below", flat_many_dates, few);
  const std::string tile_walk =
      " walked date by date, " +
      (dates == 1 ? "one at a time" + below
                  : fmt::format("up to {} dates at once{} where their rows allow", dates, below)) +
      ", one tile where it holds all of multBy";
  if (!r.walk_forced.empty())
    return "; LayoutRight walks " + std::string(r.walk_forced == "storage" ? "in storage order" : "a run's dates in turn") +
           " (CVEST_FLAT_WALK)";
  if (r.tile_forced > 0)
    return fmt::format("; LayoutRight: tiles of multBy of up to {} KiB (CVEST_FLAT_TILE){}", r.tile_forced >> 10,
                       tile_walk);
  return fmt::format("; LayoutRight: tiles of multBy of up to {} KiB (a {} of {} in whole runs, one at least, "
                     "beside the discount of {} at once){}",
                     flat_tile_bytes(std::size_t(1) << 40, 8, dates) >> 10, dates == 1 ? "half" : dates == 2 ? "third" : "fifth",
                     r.l2_share ? fmt::format("a thread's {} KiB share of the L2", r.l2_share >> 10)
                                : fmt::format("{} KiB (L2 size not readable: the stated default)", r.l2_assumed >> 10),
                     dates == 1 ? std::string("one date") : std::to_string(dates) + " dates", tile_walk);
}

std::string run_text(std::size_t element_size) {
  const FlatRun& r = flat_run();
  const std::string type = element_size == 8 ? "double" : element_size == 4 ? "float" : "element";
  if (r.source == "CVEST_FLAT_RUN")
    return fmt::format("{} elements of {} ({} KiB, CVEST_FLAT_RUN)", flat_run_elements(element_size), type,
                       r.bytes >> 10);
  if (r.l2_bytes == 0)
    return fmt::format("{} elements of {} ({} KiB; {})", flat_run_elements(element_size), type, r.bytes >> 10,
                       r.source);
  const bool clamped = r.bytes != r.l2_bytes / 8;
  return fmt::format("{} elements of {} ({} KiB: {} a thread's {} KiB of L2, {})", flat_run_elements(element_size),
                     type, r.bytes >> 10, clamped ? "within 64 KiB-1 MiB, for" : "an eighth of", r.l2_bytes >> 10,
                     r.source);
}

}  // namespace

std::string flat_run_text(std::size_t element_size) { return run_text(element_size) + walk_text(element_size); }

}  // namespace cvest::policy
