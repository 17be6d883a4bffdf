#pragma once
// How long a run of contiguous elements one work item of `flat` takes on the
// host (and the copy roofs alike, so a kernel and its roof are cut the
// same): an eighth of a thread's share of the L2 cache, read from the
// machine at run time (core/Topology.hpp), between 64 KiB and 1 MiB. A LayoutRight thread walks every date of
// one multBy run in turn, so that run stays in L2 beside the discount and cv
// streams going through; a longer run keeps the hardware prefetchers going
// longer between jumps from one date to the next (8,192 elements, 64 KiB of
// doubles, the old constant, reached 0.70-0.74 of a streaming copy on an
// Intel host with 2 MiB of L2; 32,768 reached 0.85-0.89).
#include "core/Topology.hpp"
#include "core/Types.hpp"

#include <algorithm>
#include <cstddef>
#include <string>

namespace cvest::policy {

struct FlatRun {
  std::size_t bytes = 0;     // a run's bytes
  std::size_t l2_bytes = 0;  // the L2 it was derived from (0: unknown)
  std::string source;        // where l2_bytes came from, or the stated default
  std::size_t l2_share = 0;  // a thread's share of the L2 (0: unknown), for the walk below
  std::size_t l2_assumed = 0;  // l2_share, or the stated default of 1 MiB where it is unknown
  int dates_forced = 0;        // CVEST_FLAT_DATES: 1, 2 or 4 (0: not set)
  std::string walk_forced;   // CVEST_FLAT_WALK: "storage" or "dates" (empty: tiles from the L2)
  std::size_t tile_forced = 0;  // CVEST_FLAT_TILE, bytes (0: from the L2)
};

// Read once per process, with the CVEST_FLAT_* variables below (a bad
// CVEST_FLAT_DATES, TILE or RUN fails the first flat run or header; a
// CVEST_FLAT_WALK other than storage or dates is ignored).
// CVEST_FLAT_RUN=BYTES (e.g. "256KiB") overrides the run, for measuring one
// length against another.
const FlatRun& flat_run();

// A run in elements of `element_size` bytes: a multiple of 64.
inline Index flat_run_elements(std::size_t element_size) {
  const Index n = Index(flat_run().bytes / element_size);
  return n < 64 ? 64 : n / 64 * 64;
}

// How a LayoutRight thread walks the cube: multBy's (N, K) slice of
// `slice_bytes` cut into tiles of ids, and each tile walked date by date, a
// date's part of the tile in storage order (long streams, as a copy's), so
// the tile's multBy, read from memory once, is read again from L2 for every
// other group of dates (the most dates at once: flat_dates_most). A tile and
// the discount rows of the dates walked at once beside it fill a thread's
// share of the L2 at most (a third of it for two dates; a cache no other
// core takes lines from), in whole runs, one at least, at most the slice:
// where the slice fits, one tile holds it; the tiles evened out over the
// slice. Tiles of the whole L2 share (the rule before, measured on an AMD
// host with one date at a time) let the four dates' discount evict multBy,
// read again from further out for every group: on a 2-CPU Intel VM (L2
// 2 MiB) tiles of 128-512 KiB read 0.91-1.01 of the copy roof over five
// shapes and two rounds, 1-2 MiB 0.89-0.95, and the kernel's GB/s rose
// alike (docs/benchmarks.md). CVEST_FLAT_WALK=storage|dates forces storage
// order or a tile of one run, CVEST_FLAT_TILE=BYTES a tile size. `dates`:
// the most dates the walk takes at once. Returns the tile's bytes.
std::size_t flat_tile_bytes(std::size_t slice_bytes, std::size_t element_size, int dates);

// Dates (T) from which flat takes the count measured at many dates (a
// shape of 100), below them the count measured at few (shapes of 8 and 20,
// the worse lag of the two; 8 alone before 12-07): between 8 and 100
// (their geometric middle, 28.3). The best count hangs on T: on a 2-CPU AMD
// EPYC VM (Zen 4) flat/left at 100 x 400,000 double ran at 0.95-0.98 of its
// roof with one stream and 0.76-0.86 with two, while at 8 dates the counts
// tied at the user's shapes and two led at 48 MiB (issue 59).
inline constexpr Index flat_many_dates = 28;
// A measured count at few dates and at many (flat_many_dates); one count
// for both where they agree.
struct FlatCounts {
  int few = 0, many = 0;
  FlatCounts(int both) : few(both), many(both) {}  // NOLINT: one count converts
  FlatCounts(int few_dates, int many_dates) : few(few_dates), many(many_dates) {}
};

// " below 28 dates, MANY from 28" where the count at few dates differs from
// the count at many (`many_said` names the latter), "" where they agree: how
// every text says a count that differs with the dates.
std::string flat_counts_below(int few, int many, const std::string& many_said);

// The most dates flat takes at once on LayoutRight at T dates (the count
// for many dates where T is not given): 1, 2 or 4, for elements
// of `element_size` bytes (8: double, 4: float; each precision measured on
// its own: float's best count differed from double's, issue 59). A tune
// trial (set_flat_dates_trial) where one runs; else CVEST_FLAT_DATES where
// set (for measuring one count against another; anything else is an
// error); else what was measured on this CPU model with this many threads
// and this precision, by `cvest tune` or on first use
// (set_flat_dates_measured: the app reads the record, app/tune/TuneWalks.hpp,
// app/FirstUse.hpp); else the stated default, 2. The best count is the
// host's: on a 2-CPU Intel Xeon VM (L2 2 MiB) two dates ran the kernel
// faster than four in all 16 pairs at the eight shapes of
// 400,000-10,000,000 ids (34.0-36.5 GB/s against 31.0-33.5), while on a
// 2-CPU AMD EPYC VM (Zen 5, L2 1 MiB) four ran faster than two in 6 of 8
// pairs at four shapes (docs/benchmarks.md). Each date at once adds a read
// and a streaming-store stream a core keeps going.
int flat_dates_most(std::size_t element_size = 8, Index T = flat_many_dates);
// Where flat_dates_most() comes from, as flat_streams_source says it.
std::string flat_dates_source(std::size_t element_size = 8);
void set_flat_dates_measured(FlatCounts counts, const std::string& source, std::size_t element_size = 8);
void set_flat_dates_trial(int most);  // both precisions
// The most streams flat/left walks at once (flat_left_streams) on runs of T
// dates: 1, 2 or 4, per precision and dates as flat_dates_most. A tune trial where one runs; else
// CVEST_FLAT_DATES where set; else what was measured here (by cvest tune
// or on first use); else the stated default, 4 (a 2-CPU Intel Xeon VM: one
// stream 31-34 GB/s, four 40-41 at 8 x 10,000,000 float). The best count
// is the host's: on a 2-CPU AMD EPYC VM (Zen 5) one stream ran at 0.88-1.01
// of the copy roof where four ran at 0.62-0.86 (T = 80-200; at T = 8 the
// two tied; docs/benchmarks.md).
int flat_streams_most(std::size_t element_size = 8, Index T = flat_many_dates);
// Where flat_streams_most() comes from, for the headers: "" (the stated
// default), "CVEST_FLAT_DATES=2", "measured here by cvest tune on DATE", or
// "cvest tune's trial of 4".
std::string flat_streams_source(std::size_t element_size = 8);
// The app's, at start: the count measured here and its text.
void set_flat_streams_measured(FlatCounts counts, const std::string& source, std::size_t element_size = 8);
// cvest tune's trials: `most` streams whatever else says (0: the rule above).
void set_flat_streams_trial(int most);

// Whether flat writes cv with streaming stores on the host (where the build
// has them, core/StreamingStores.hpp), per precision: a trial where one
// runs (set_flat_stores_trial); else CVEST_FLAT_STORES=regular|streaming;
// else what was measured here (set_flat_stores_measured); else the stated
// default, streaming. On a 2-CPU AMD EPYC VM (Zen 4) regular stores beat
// streaming ones for minutes at a time (42.0 against 48.3 GB/s) and
// streaming ones won again after (docs/benchmarks.md): a kind fixed at
// build time cannot follow the host.
bool flat_streaming_stores(std::size_t element_size);
std::string flat_stores_source(std::size_t element_size);  // "" where the stated default
enum class StoreKind { unset, regular, streaming };
void set_flat_stores_measured(StoreKind kind, const std::string& source, std::size_t element_size);
void set_flat_stores_trial(StoreKind kind);  // unset: the rule above
// Every trial undone, however a measurement ends (cvest tune's, first use's).
struct FlatTrialsUndone {
  FlatTrialsUndone() = default;
  FlatTrialsUndone(const FlatTrialsUndone&) = delete;
  FlatTrialsUndone& operator=(const FlatTrialsUndone&) = delete;
  ~FlatTrialsUndone() {
    set_flat_streams_trial(0);
    set_flat_dates_trial(0);
    set_flat_stores_trial(StoreKind::unset);
  }
};
// "streaming stores (measured on first use on DATE)", "regular stores (CVEST_FLAT_STORES)"
std::string flat_stores_text(std::size_t element_size);

// Threads of the default host execution space (the most a kernel splits over).
int host_threads();

// How many dates a LayoutRight work item takes at once, and how far apart:
// `dates` rows of discount and cv, `step` dates apart, walked together so
// each multBy vector is loaded once for all of them (core/StreamingStores.hpp
// rows_at_once). Grouped only where the rows' streams sit at least 1 KiB
// apart within a 4 KiB page, discount's and cv's alike: loads whose page
// offsets match an earlier store's wait on it (4K aliasing), and four dates
// at equal offsets ran at 0.19 of a copy against 0.89 at 1 KiB apart
// (docs/benchmarks.md); and where the rows share an alignment. Four dates
// before two, the nearest step first; else one date (the plain tile walk).
// `even`: only groups that leave no dates over (a few tiles split between
// threads by count would leave one thread the grouped chunks' work and
// another the left-over dates'). `most`: at most this many dates (the walk
// passes flat_dates_most(); its second grouping, of the dates the first
// leaves over, takes two).
struct FlatDates {
  int dates = 1;
  Index step = 1;
};
FlatDates flat_dates(const void* d, const void* cv, std::size_t stride_bytes, Index T, bool even = false,
                     int most = 4);
// "4 at once, 1 apart", or why one at a time.
std::string flat_dates_text(const FlatDates& dates, std::size_t element_size = 8, Index T = flat_many_dates);

// How a LayoutLeft work item walks its run of elements (runs of T dates of
// one multBy value after another: core/StreamingStores.hpp scaled_runs):
// `streams` stretches of its whole T-runs at once, `runs_apart` runs apart,
// so a thread keeps four reads and four writes going (LayoutRight's dates at
// once are counted apart: flat_dates_most). One stream at a time, flat/left ran
// at 31-34 GB/s against 37 for flat/right on the same bytes (8 x 10,000,000
// float, Intel Xeon VM); four at once, 40-41 (docs/benchmarks.md). As
// flat_dates: four before two, only where the streams sit at least 1 KiB
// apart within a 4 KiB page, discount's and cv's alike, and share an
// alignment (runs of a multiple of 16 bytes); the widest such spacing a full
// work item holds. One where the build has no streaming stores (the path that
// walks them). At most flat_streams_most().
struct FlatStreams {
  int streams = 1;
  Index runs_apart = 0;
};
FlatStreams flat_left_streams(const void* d, const void* cv, Index T, std::size_t element_size);
// "4 streams at once, 2016 runs apart", or why one stream.
std::string flat_streams_text(const FlatStreams& streams, std::size_t element_size = 8,
                              Index T = flat_many_dates);

// Whether a few tiles split between the threads call for groups that leave no
// dates over: fewer than 4 tiles a thread, not a whole number a thread. A
// thread taking whole tiles does the same work as the others whatever the
// groups: 4 tiles on 2 threads may take 4 dates two apart at T = 100 with 4
// dates over (four at most, 12-04: float at 100 x 400,000 ran at 0.88-0.91 of
// its roof so, at 0.80-0.82 taking 2 dates at once to leave none over). Whole
// tiles a thread holds only roughly: Kokkos 3.4's OpenMP split moves a
// thread's bounds by up to one of its power-of-two chunks of work items (a
// few per cent of a share), a schedule dealing chunks round-robin owns no
// whole tile, and the last tile may be short.
inline bool even_groups_needed(Index tiles, int threads) {
  return tiles < 4 * Index(threads) && tiles % Index(threads) != 0;
}

// flat's LayoutRight walk over a (T, N*K) cube: chunk c is run s of tile b
// in date group g, c = (b * groups + g) * runs + s. The dates fall into
// spans of dates * step; span p's group r holds dates p*span + r + i*step
// (i < dates); the dates past the last whole span are grouped again, two
// at once where their rows allow (`rest`, spans of rest_span from date
// full * span), and those past its last span go one at a time (a date
// taken alone reloads multBy for itself). The
// kernel (core/MultiplyKernels.hpp) and its copy roof (core/Roof.hpp) walk
// it alike. Dates are left over only where the threads' shares even out
// (even_groups_needed). `most`: the most dates at once (flat_dates_most()).
struct FlatWalk {
  Index slice = 0, per = 0, tile = 0, runs = 0, tiles = 0;
  FlatDates together, rest;
  Index span = 1, full = 0, over = 0, rest_span = 1, rest_full = 0, groups = 0;  // over: dates past the spans
  std::size_t element = 8;  // bytes of an element: which precision's choices it took
  FlatWalk() = default;
  // most: the most dates at once (0: flat_dates_most(element_size)).
  FlatWalk(Index T, Index slice_elements, std::size_t element_size, const void* d, const void* cv, int most = 0)
      : slice(slice_elements), per(flat_run_elements(element_size)),
        tile(Index(flat_tile_bytes(std::size_t(slice) * element_size, element_size,
                                   most = most > 0 ? most : flat_dates_most(element_size, T)) / element_size)),
        runs(tile / per), tiles((slice + tile - 1) / tile),
        together(flat_dates(d, cv, std::size_t(slice) * element_size, T, even_groups_needed(tiles, host_threads()),
                            most)),
        span(Index(together.dates) * together.step), full(T / span) {
    element = element_size;
    over = T - full * span;
    const std::size_t row = std::size_t(slice) * element_size, skip = std::size_t(full * span) * row;
    if (over >= 2)
      rest = flat_dates(static_cast<const char*>(d) + skip, static_cast<const char*>(cv) + skip, row, over, false,
                        std::min(most, 2));
    rest_span = Index(rest.dates) * rest.step, rest_full = rest.dates > 1 ? over / rest_span : 0;
    groups = full * together.step + rest_full * rest.step + alone();
  }
  Index alone() const { return over - rest_full * rest_span; }  // dates taken one at a time after the rest
  Index chunks() const { return tiles * groups * runs; }
  struct Piece {
    Index e = 0;       // the first element of cv and discount
    Index j = 0;       // the first of multBy
    Index n = 0;       // elements in each date's row (0: nothing)
    int dates = 1;     // rows, `stride` elements apart
    Index stride = 0;
    bool first = false;  // the tile's first group of dates: its multBy run comes from memory here
  };
  Piece piece(Index c) const {
    const Index q = c / runs, s = c - q * runs, g = q % groups, b = q / groups, j = b * tile + s * per;
    Piece p;
    if (j >= slice) return p;  // the last tile's runs past the slice have nothing
    p.j = j, p.n = std::min(per, slice - j), p.first = g == 0;
    const Index step = together.step, r = g - full * step, rest_groups = rest_full * rest.step;
    if (r < 0) {
      p.e = (g / step * span + g % step) * slice + j;
      p.dates = together.dates, p.stride = step * slice;
    } else if (r < rest_groups) {
      p.e = (full * span + r / rest.step * rest_span + r % rest.step) * slice + j;
      p.dates = rest.dates, p.stride = rest.step * slice;
    } else {
      p.e = (full * span + rest_full * rest_span + r - rest_groups) * slice + j;
    }
    return p;
  }
};

// "2 at once, 2 apart; the 1 date over them one at a time", or with four at
// most (CVEST_FLAT_DATES=4) "4 at once, 2 apart; the 4 dates over them 2 at
// once, 2 apart": the walk's groups of dates.
std::string flat_walk_dates_text(const FlatWalk& walk);

// What flat's host walk takes at once on these arrays with the counts and
// stores now in force (a trial, a record, CVEST_FLAT_DATES): flat/left's
// streams (right = false; one with regular stores) or flat/right's dates
// (T dates of `per_date` elements). A count whose spacing does not fit
// walks fewer: measurements record what each walked (app/tune).
int flat_walked(bool right, Index T, Index per_date, std::size_t element_size, const void* d, const void* cv);

// "16384 elements of double (128 KiB: an eighth of a thread's 1024 KiB of L2,
// sysfs); LayoutRight: tiles of multBy of up to 256 KiB (a third of a
// thread's 1024 KiB share of the L2 in whole runs, one at least, beside the
// discount of 2 dates at once) walked date by date, ..."
std::string flat_run_text(std::size_t element_size);

}  // namespace cvest::policy
