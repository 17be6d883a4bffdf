// Every strategy x layout x precision x execution space must give, bit for
// bit, what a plain host loop gives: IEEE multiplication is exact, so no
// tolerance is allowed.
#include "core/FlatRun.hpp"
#include "core/Multiply.hpp"
#include "core/Policies.hpp"
#include "core/Spaces.hpp"
#include "core/StreamingStores.hpp"

#include "tests/Skip.hpp"

#include <catch2/catch.hpp>

#include <algorithm>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <random>
#include <tuple>
#include <vector>

using namespace cvest;

namespace {

template <class Space_, class Scalar_, class Layout_>
struct Case {
  using Space = Space_;
  using Scalar = Scalar_;
  using Layout = Layout_;
};

template <class... Spaces>
auto all_cases(std::tuple<Spaces...>)
    -> decltype(std::tuple_cat(std::tuple<Case<Spaces, double, Kokkos::LayoutRight>, Case<Spaces, double, Kokkos::LayoutLeft>,
                                          Case<Spaces, float, Kokkos::LayoutRight>, Case<Spaces, float, Kokkos::LayoutLeft>>{}...));
using Cases = decltype(all_cases(EnabledSpaces{}));

template <class Scalar>
bool same_bits(Scalar a, Scalar b) {
  return std::memcmp(&a, &b, sizeof(Scalar)) == 0;
}

// Values spread over many binades and both signs, so products round.
template <class Scalar>
Scalar random_value(std::mt19937_64& rng) {
  std::uniform_real_distribution<double> mantissa(-1.0, 1.0);
  std::uniform_int_distribution<int> exponent(-20, 20);
  return Scalar(std::ldexp(mantissa(rng), exponent(rng)));
}

struct Shape {
  Index T, N, K;
};

// Host views (or mirrors): m and d filled with random values.
template <class Table, class Cube>
void fill_random(const Table& m, const Cube& d, std::mt19937_64& rng) {
  using Scalar = typename Cube::non_const_value_type;
  const Index T = d.extent(0), N = d.extent(1), K = d.extent(2);
  for (Index i = 0; i < N; ++i)
    for (Index k = 0; k < K; ++k) m(i, k) = random_value<Scalar>(rng);
  for (Index t = 0; t < T; ++t)
    for (Index i = 0; i < N; ++i)
      for (Index k = 0; k < K; ++k) d(t, i, k) = random_value<Scalar>(rng);
}

// Host views: how many elements of cv differ in any bit from m * d.
template <class Table, class Cube, class Out>
Index count_wrong(const Table& m, const Cube& d, const Out& cv) {
  using Scalar = typename Cube::non_const_value_type;
  Index wrong = 0;
  for (Index t = 0; t < Index(d.extent(0)); ++t)
    for (Index i = 0; i < Index(d.extent(1)); ++i)
      for (Index k = 0; k < Index(d.extent(2)); ++k) wrong += !same_bits<Scalar>(cv(t, i, k), m(i, k) * d(t, i, k));
  return wrong;
}

}  // namespace

TEMPLATE_LIST_TEST_CASE("every strategy equals the plain loop bit for bit", "[multiply]", Cases) {
  using Space = typename TestType::Space;
  using Scalar = typename TestType::Scalar;
  using Layout = typename TestType::Layout;
  using Mem = typename Space::memory_space;

  const Shape shape = GENERATE(Shape{3, 1001, 7}, Shape{1, 257, 5}, Shape{4, 1, 3}, Shape{1, 1, 1},
                               Shape{100, 40, 5}, Shape{2, 9000, 1}, Shape{7, 333, 2}, Shape{5, 4099, 5});
  const auto [T, N, K] = shape;
  CAPTURE(Space::name(), sizeof(Scalar), to_string(layout_kind<Layout>()), T, N, K);

  Table<Scalar, Layout, Mem> m("cvest::test::multBy", N, K);
  Cube<Scalar, Layout, Mem> d("cvest::test::discount", T, N, K);
  Cube<Scalar, Layout, Mem> cv("cvest::test::cv", T, N, K);
  auto m_h = Kokkos::create_mirror_view(m);
  auto d_h = Kokkos::create_mirror_view(d);
  auto cv_h = Kokkos::create_mirror_view(cv);

  std::mt19937_64 rng(T * 1000003 + N * 101 + K);
  fill_random(m_h, d_h, rng);
  Kokkos::deep_copy(m, m_h);
  Kokkos::deep_copy(d, d_h);

  const Operands<Scalar, Layout, Mem> ops{m, d, cv};
  for (const auto& entry : strategy_table)
    for (const CvNext next : {CvNext::memory, CvNext::cache}) {  // streaming and regular stores
      CAPTURE(entry.name, next == CvNext::cache);
      // A sentinel in every element catches any element a strategy skips.
      Kokkos::deep_copy(cv, Scalar(-12345.5));
      Space space;
      multiply(entry.id, space, ops, next);
      space.fence();
      Kokkos::deep_copy(cv_h, cv);
      CHECK(count_wrong(m_h, d_h, cv_h) == 0);
    }
}

// flat on host arrays (m and d filled here), with either kind of store,
// equals the plain loop bit for bit.
template <class Table, class Cube>
void check_flat_both_stores(const Table& m, const Cube& d, const Cube& cv, std::mt19937_64& rng) {
  using Scalar = typename Cube::non_const_value_type;
  using Layout = typename Cube::array_layout;
  using Host = Kokkos::DefaultHostExecutionSpace;
  fill_random(m, d, rng);
  for (const CvNext next : {CvNext::memory, CvNext::cache}) {
    CAPTURE(next == CvNext::cache);
    Kokkos::deep_copy(cv, Scalar(-12345.5));
    Host space;
    multiply(Strategy::flat, space, Operands<Scalar, Layout, Host::memory_space>{m, d, cv}, next);
    space.fence();
    CHECK(count_wrong(m, d, cv) == 0);
  }
}

// flat on LayoutRight takes up to two dates at once (four with
// CVEST_FLAT_DATES=4: ctest's unit.flat_four_dates) where their rows'
// streams sit apart in a page (policy::flat_dates): arrays placed in one
// buffer at chosen page offsets, with row strides that make each grouping
// (and the dates left over after the last whole span) happen.
TEMPLATE_TEST_CASE("every strategy equals the plain loop bit for bit with dates grouped", "[multiply][flat]", double, float) {
  using Host = Kokkos::DefaultHostExecutionSpace;
  using Mem = Host::memory_space;
  using Scalar = TestType;
  struct Grouping {
    Index T, N, K;
    std::size_t cv_offset;  // bytes from discount's page offset
    policy::FlatDates expected;  // four at most, with tiles enough for dates left over
    policy::FlatDates even;      // four at most, with few tiles: no date left over
    policy::FlatDates expected2, even2;  // the same, two at most
  };
  // Row bytes N*K*sizeof mod 4096: 1024 -> 4 dates 1 apart; 512 -> 4 dates 2
  // apart; 2048 -> 2 dates 1 apart; 0 -> one. Rows of 9 MiB: tiles enough
  // (a third of a thread's L2 share at most) for the dates left over after
  // the spans.
  // Two at most: two dates where four would be, the same steps.
  const std::size_t e = sizeof(Scalar);
  const Index big = Index(((std::size_t(9) << 20) + 1024) / e);
  const Grouping g =
      GENERATE_COPY(Grouping{11, Index((4096 + 1024) / e), 1, 0, {4, 1}, {1, 1}, {2, 1}, {1, 1}},
                    Grouping{12, Index((4096 + 1024) / e), 1, 0, {4, 1}, {4, 1}, {2, 1}, {2, 1}},
                    Grouping{16, Index((4096 + 512) / e), 1, 0, {4, 2}, {4, 2}, {2, 2}, {2, 2}},
                    Grouping{8, Index((4096 * 3 + 2048) / e / 2), 2, 0, {2, 1}, {2, 1}, {2, 1}, {2, 1}},
                    Grouping{6, Index(8192 / e / 4), 4, 0, {1, 1}, {1, 1}, {1, 1}, {1, 1}},
                    Grouping{4, Index((4096 + 1024) / e), 1, 1024, {2, 2}, {2, 2}, {2, 2}, {2, 2}},
                    Grouping{5, big, 1, 0, {4, 1}, {1, 1}, {2, 1}, {1, 1}},
                    Grouping{9, big / 4, 4, 0, {4, 1}, {1, 1}, {2, 1}, {1, 1}},
                    // four at most: the dates over the spans two at once, then one alone (FlatWalk::rest)
                    Grouping{7, Index((3 * 4096 + 1024) / e), 1, 0, {4, 1}, {1, 1}, {2, 1}, {1, 1}},
                    Grouping{13, Index((3 * 4096 + 512) / e), 1, 0, {4, 2}, {1, 1}, {2, 2}, {1, 1}});
  CAPTURE(sizeof(Scalar), g.T, g.N, g.K, g.cv_offset);
  const std::size_t cube = std::size_t(g.T * g.N * g.K), pages = (cube * e + 4095) / 4096 + 1;
  Kokkos::View<Scalar*, Mem> buffer("cvest::test::arrays", 2 * pages * 4096 / e + 4096 / e + g.N * g.K);
  Scalar* base = reinterpret_cast<Scalar*>((reinterpret_cast<std::uintptr_t>(buffer.data()) + 4095) / 4096 * 4096);
  Scalar* d_at = base;
  Scalar* cv_at = base + pages * 4096 / e + g.cv_offset / e;
  Scalar* m_at = base + 2 * pages * 4096 / e;
  Kokkos::View<Scalar***, Kokkos::LayoutRight, Mem> d(d_at, g.T, g.N, g.K), cv(cv_at, g.T, g.N, g.K);
  Kokkos::View<Scalar**, Kokkos::LayoutRight, Mem> m(m_at, g.N, g.K);
  const policy::FlatWalk walk(g.T, g.N * g.K, e, d.data(), cv.data());  // the kernel's own
  const int most = policy::flat_dates_most(e);
  CAPTURE(walk.tiles, most);
  if (most > 1) {
    const bool few = policy::even_groups_needed(walk.tiles, policy::host_threads());
    const policy::FlatDates want = most == 4 ? (few ? g.even : g.expected) : (few ? g.even2 : g.expected2);
    CHECK(walk.together.dates == want.dates);
    CHECK(walk.together.step == want.step);
  }
  std::mt19937_64 rng(std::uint64_t(g.T * 31 + g.N));
  check_flat_both_stores(m, d, cv, rng);
}

// flat on LayoutLeft walks its runs in stretches at once where they sit
// apart in a page (policy::flat_left_streams): arrays placed in one buffer
// at the same page offset, large enough for many work items of many runs,
// T whole vectors (one, two, three or four) or not.
TEMPLATE_TEST_CASE("flat on LayoutLeft equals the plain loop bit for bit with runs walked in streams",
                   "[multiply][flat]", double, float) {
  using Host = Kokkos::DefaultHostExecutionSpace;
  using Mem = Host::memory_space;
  using Scalar = TestType;
  const std::size_t e = sizeof(Scalar);
  const Index T = GENERATE(Index(4), Index(8), Index(12), Index(16), Index(5));
  const Index per = policy::flat_run_elements(e), K = 3, N = Index(3 * per / T / K + 17);
  CAPTURE(e, T, N, per);
  const std::size_t cube = std::size_t(T * N * K), pages = (cube * e + 4095) / 4096 + 1;
  Kokkos::View<Scalar*, Mem> buffer("cvest::test::arrays", 2 * pages * 4096 / e + 4096 / e + std::size_t(N * K));
  Scalar* base = reinterpret_cast<Scalar*>((reinterpret_cast<std::uintptr_t>(buffer.data()) + 4095) / 4096 * 4096);
  Kokkos::View<Scalar***, Kokkos::LayoutLeft, Mem> d(base, T, N, K), cv(base + pages * 4096 / e, T, N, K);
  Kokkos::View<Scalar**, Kokkos::LayoutLeft, Mem> m(base + 2 * pages * 4096 / e, N, K);
  const policy::FlatStreams streams = policy::flat_left_streams(d.data(), cv.data(), T, e);
  CAPTURE(streams.streams, streams.runs_apart);
  // Runs of whole 16-byte vectors at one page offset: four streams, or two
  // where a work item is too short for four 1 KiB apart (CVEST_FLAT_RUN=4KiB).
  // Streams are the streaming stores' path: regular ones walk one.
  if (policy::flat_streams_most(e) > 1 && policy::flat_streaming_stores(e)) {
    if (T * Index(e) % 16 == 0) CHECK(streams.streams > 1);
    else CHECK(streams.streams == 1);
  }
  std::mt19937_64 rng(std::uint64_t(T * 131 + Index(e)));
  check_flat_both_stores(m, d, cv, rng);
}

TEST_CASE("flat/left's streams: four, then two, then one, by where they fall in a page", "[flat]") {
  if (policy::flat_streams_most() < 4) return cvest::test::skip_part("CVEST_FLAT_DATES caps the streams");
  // From the L2, a work item is 64 KiB at least: room for four streams.
  if (std::getenv("CVEST_FLAT_RUN")) return cvest::test::skip_part("CVEST_FLAT_RUN sets the work items' length");
  const auto streams = [](std::uintptr_t d, std::uintptr_t cv, Index T, std::size_t e) {
    return policy::flat_left_streams(reinterpret_cast<const void*>(d), reinterpret_cast<const void*>(cv), T, e);
  };
  const std::uintptr_t d = 1 << 20, cv = 64 << 20;
  if (!policy::flat_streaming_stores(8) || !policy::flat_streaming_stores(4)) {
    // Streams are the streaming stores' path: regular stores (a build
    // without streaming ones) walk one, wherever the runs fall.
    CHECK(streams(d, cv, 8, 8).streams == 1);
    CHECK(streams(d, cv, 8, 4).streams == 1);
    return;
  }
  // Runs of 32, 64 and 48 bytes: four streams fit a work item of 64 KiB
  // (runs of 800 bytes need spacings of 32 runs and more: not in 64 KiB).
  for (const auto& [T, e] : {std::pair<Index, std::size_t>(8, 4), std::pair<Index, std::size_t>(8, 8),
                             std::pair<Index, std::size_t>(12, 4)}) {
    CAPTURE(T, e);
    const Index per = policy::flat_run_elements(e), most = (per - T + 1) / T / 4;
    const std::size_t run = std::size_t(T) * e;
    // discount and cv at one page offset: four streams 1 or 3 KiB apart in
    // a page (so 2 KiB and 3 or 1 from each other), the widest such spacing
    // a full work item holds
    const policy::FlatStreams got = streams(d, cv, T, e);
    CAPTURE(got.runs_apart);
    CHECK(got.streams == 4);
    CHECK(got.runs_apart <= most);
    const std::size_t offset = std::size_t(got.runs_apart) * run % 4096;
    CHECK((offset == 1024 || offset == 3072));
    for (Index q = got.runs_apart + 1; q <= most; ++q) {
      const std::size_t o = std::size_t(q) * run % 4096;
      CHECK_FALSE((o == 1024 || o == 3072));
    }
    // cv half a KiB on: no four fit (a stream's discount would meet its
    // neighbour's cv), two 1.5-2.5 KiB apart do
    const policy::FlatStreams two = streams(d, cv + 512, T, e);
    CHECK(two.streams == 2);
    const std::size_t o2 = std::size_t(two.runs_apart) * run % 4096;
    CHECK((o2 >= 1536 && o2 <= 2560));
  }
  CHECK(streams(d, cv, 5, 8).streams == 1);   // runs of 40 bytes: no shared alignment
  CHECK(streams(d, cv, 3, 4).streams == 1);   // 12 bytes
  CHECK(streams(d, cv, policy::flat_run_elements(8), 8).streams == 1);  // one run a work item
  CHECK(streams(d, cv, 0, 8).streams == 1);
  CHECK(policy::flat_streams_text(streams(d, cv, 8, 8)).find("4 streams at once") == 0);
  CHECK(policy::flat_streams_text(streams(d, cv, 5, 8)).find("one stream") == 0);
}

TEST_CASE("flat's dates: four, then two, then one, by where the rows' streams fall in a page", "[flat]") {
  const auto dates = [](std::uintptr_t d, std::uintptr_t cv, std::size_t row, Index T) {
    const policy::FlatDates got =
        policy::flat_dates(reinterpret_cast<const void*>(d), reinterpret_cast<const void*>(cv), row, T);
    return std::pair<int, Index>(got.dates, got.step);
  };
  const std::uintptr_t d = 1 << 20, cv = 64 << 20;
  CHECK(dates(d, cv, 40 * 4096 + 1024, 100) == std::pair<int, Index>(4, 1));  // 0, 1, 2, 3 KiB
  CHECK(dates(d, cv, 40 * 4096 + 3072, 100) == std::pair<int, Index>(4, 1));  // the other way round
  CHECK(dates(d, cv, 40 * 4096 + 512, 100) == std::pair<int, Index>(4, 2));   // every other date: 1 KiB apart
  CHECK(dates(d, cv, 40 * 4096 + 512, 7) == std::pair<int, Index>(2, 2));     // four need 8 dates
  CHECK(dates(d, cv, 40 * 4096 + 2048, 100) == std::pair<int, Index>(2, 1));  // four would pair equal offsets
  CHECK(dates(d, cv, 40 * 4096, 100) == std::pair<int, Index>(1, 1));         // every row at one offset
  CHECK(dates(d, cv, 40 * 4096 + 1024, 1) == std::pair<int, Index>(1, 1));    // one date
  CHECK(dates(d, cv, 40 * 4096 + 1032, 100) == std::pair<int, Index>(2, 2));  // rows 8 bytes off 16: two rows apart
  // cv 1 KiB past discount: date 0's discount meets date 3's cv at 4 dates 1 apart
  CHECK(dates(d, cv + 1024, 40 * 4096 + 1024, 100) == std::pair<int, Index>(2, 2));
  CHECK(dates(d, cv + 2048, 40 * 4096 + 1024, 100) == std::pair<int, Index>(2, 1));  // cv 2 KiB on: two 1 apart
  // even: no dates left over (few tiles split between threads)
  const auto even = [](Index T, std::size_t row) {
    const policy::FlatDates got = policy::flat_dates(reinterpret_cast<const void*>(std::uintptr_t(1) << 20),
                                                     reinterpret_cast<const void*>(std::uintptr_t(64) << 20), row, T, true);
    return std::pair<int, Index>(got.dates, got.step);
  };
  CHECK(even(8, 40 * 4096 + 1024) == std::pair<int, Index>(4, 1));
  CHECK(even(6, 40 * 4096 + 1024) == std::pair<int, Index>(2, 1));  // 4 would leave 2 over
  CHECK(even(5, 40 * 4096 + 1024) == std::pair<int, Index>(1, 1));
  CHECK(even(12, 40 * 4096 + 512) == std::pair<int, Index>(2, 2));  // 4 two apart spans 8: 4 over
  // at most two (the walk's second grouping)
  const auto two = [](std::size_t row) {
    const policy::FlatDates got = policy::flat_dates(reinterpret_cast<const void*>(std::uintptr_t(1) << 20),
                                                     reinterpret_cast<const void*>(std::uintptr_t(64) << 20), row, 100,
                                                     false, 2);
    return std::pair<int, Index>(got.dates, got.step);
  };
  CHECK(two(40 * 4096 + 1024) == std::pair<int, Index>(2, 1));
  CHECK(two(40 * 4096 + 512) == std::pair<int, Index>(2, 2));
  // few tiles, not a whole number a thread: no dates over
  CHECK(policy::even_groups_needed(1, 2));
  CHECK(policy::even_groups_needed(3, 2));
  CHECK(policy::even_groups_needed(6, 4));
  CHECK_FALSE(policy::even_groups_needed(4, 2));  // two tiles each
  CHECK_FALSE(policy::even_groups_needed(9, 2));  // tiles enough to even out
  CHECK_FALSE(policy::even_groups_needed(1, 1));
}

// The dates past flat's last whole span are grouped again, two at once where
// their rows allow, before any go alone; every (date, run) of the cube is
// walked once, and multBy's runs read in each tile's first group only. Rows
// of 512 bytes past whole pages, long enough for 4 tiles a thread (the
// largest tile this machine's L2 gives): dates may be left over. Four
// dates at most (CVEST_FLAT_DATES=4). Only addresses are looked at.
TEST_CASE("flat's walk groups the dates its spans leave over", "[flat]") {
  const std::size_t e = sizeof(double), largest_tile = policy::flat_tile_bytes(std::size_t(1) << 40, e, 4),
                    row = (4 * std::size_t(policy::host_threads()) * largest_tile + 4095) / 4096 * 4096 + 512;
  const Index slice = Index(row / e);
  const std::uintptr_t d = std::uintptr_t(1) << 30;
  struct Case {
    Index T, over, rest_full, alone, groups;
    const char* text;
  };
  const Case c = GENERATE(Case{100, 4, 1, 0, 26, "4 at once, 2 apart; the 4 dates over them 2 at once, 2 apart"},
                          Case{101, 5, 1, 1, 27, "4 at once, 2 apart; the 5 dates over them 2 at once, 2 apart, 1 alone"},
                          Case{97, 1, 0, 1, 25, "4 at once, 2 apart; the 1 date over them one at a time"},
                          Case{96, 0, 0, 0, 24, "4 at once, 2 apart"});
  CAPTURE(c.T);
  const std::uintptr_t cv = d + (std::size_t(c.T) * row + 4095) / 4096 * 4096;
  const policy::FlatWalk walk(c.T, slice, e, reinterpret_cast<const void*>(d), reinterpret_cast<const void*>(cv), 4);
  if (policy::even_groups_needed(walk.tiles, policy::host_threads()))  // CVEST_FLAT_WALK=storage: one tile
    return cvest::test::skip_part("the tiles do not split into whole tiles a thread here");
  CHECK(walk.together.dates == 4);
  CHECK(walk.together.step == 2);
  CHECK(walk.over == c.over);
  CHECK(walk.rest_full == c.rest_full);
  CHECK(walk.alone() == c.alone);
  CHECK(walk.groups == c.groups);
  if (!policy::flat_run().dates_forced) CHECK(policy::flat_walk_dates_text(walk) == c.text);  // no "(CVEST_FLAT_DATES=4)"
  const Index runs_per_date = (slice + walk.per - 1) / walk.per;
  std::vector<int> seen(std::size_t(c.T * runs_per_date), 0), multby(std::size_t(runs_per_date), 0);
  for (Index chunk = 0; chunk < walk.chunks(); ++chunk) {
    const policy::FlatWalk::Piece p = walk.piece(chunk);
    if (p.n == 0) {
      CHECK_FALSE(p.first);
      continue;
    }
    for (int u = 0; u < p.dates; ++u) {
      const Index at = p.e + u * p.stride, t = at / slice, j = at - t * slice;
      REQUIRE(j == p.j);
      REQUIRE(j % walk.per == 0);
      CHECK(p.n == std::min(walk.per, slice - j));
      ++seen.at(std::size_t(t * runs_per_date + j / walk.per));
    }
    if (p.first) ++multby.at(std::size_t(p.j / walk.per));
  }
  CHECK(std::count(seen.begin(), seen.end(), 1) == Index(seen.size()));
  CHECK(std::count(multby.begin(), multby.end(), 1) == Index(multby.size()));
}

TEST_CASE("streaming stores only where work items write runs of min_run_bytes", "[multiply]") {
  using Host = Kokkos::DefaultHostExecutionSpace;
  if (!streaming::used_on<Host>()) {
    return cvest::test::skip_part("no streaming stores in this build");
  }
  using S = Strategy;
  using L = LayoutKind;
  CHECK(writes_streaming<Host>(S::per_id, L::left, 100, 4000, 5, 8));  // 800-byte runs of dates
  CHECK_FALSE(writes_streaming<Host>(S::per_id, L::left, 1, 4000, 5, 8));  // one-date blocks: 8 bytes
  CHECK_FALSE(writes_streaming<Host>(S::per_id, L::right, 100, 4000, 5, 8));  // strided: never
  CHECK(writes_streaming<Host>(S::per_date, L::right, 1, 4000, 5, 4));
  CHECK_FALSE(writes_streaming<Host>(S::per_date, L::right, 100, 10, 5, 8));  // 400-byte dates
  CHECK(writes_streaming<Host>(S::flat, L::left, 1, 1, 1, 8));
  CHECK_FALSE(writes_streaming<Host>(S::elementwise, L::left, 100, 4000, 5, 8));
  // cv read again from cache next (the pipeline's transpose or write): never
  CHECK_FALSE(writes_streaming<Host>(S::flat, L::left, 100, 4000, 5, 8, CvNext::cache));
  CHECK_FALSE(writes_streaming<Host>(S::per_date, L::right, 1, 4000, 5, 4, CvNext::cache));
}

// flat's store kind is measured on the host (app/FirstUse.hpp), per
// precision: regular stores chosen for double leave float's streaming, and
// flat then walks its chunks with regular stores (LayoutLeft's runs of T
// whole in one loop, T known to the compiler at 2, 4, 8 and 16), bit for bit.
TEMPLATE_TEST_CASE("flat with the store kind measured here equals the plain loop bit for bit", "[multiply][flat]",
                   double, float) {
  using Host = Kokkos::DefaultHostExecutionSpace;
  using Scalar = TestType;
  const std::size_t size = sizeof(Scalar), other = size == 8 ? 4 : 8;
  if (std::getenv("CVEST_FLAT_STORES")) return cvest::test::skip_part("CVEST_FLAT_STORES sets the kind");
  struct Restore {
    ~Restore() { policy::set_flat_stores_measured(policy::StoreKind::unset, "", sizeof(Scalar)); }
  } restore;
  CHECK(policy::flat_streaming_stores(size) == bool(CVEST_HAVE_STREAMING_STORES));  // the stated default
  policy::set_flat_stores_measured(policy::StoreKind::regular, "measured here on first use on D", size);
  CHECK_FALSE(policy::flat_streaming_stores(size));
  CHECK(policy::flat_streaming_stores(other) == bool(CVEST_HAVE_STREAMING_STORES));  // the other precision's own
  CHECK_FALSE(writes_streaming<Host>(Strategy::flat, LayoutKind::left, 100, 4000, 5, size));
  CHECK_FALSE(writes_streaming<Host>(Strategy::flat, LayoutKind::right, 100, 4000, 5, size));
  if (CVEST_HAVE_STREAMING_STORES) {
    CHECK(policy::flat_stores_text(size) == "regular stores (measured here on first use on D)");
    CHECK(writes_streaming<Host>(Strategy::per_date, LayoutKind::right, 1, 4000, 5, size));  // flat's kind only
    CHECK(writes_streaming<Host>(Strategy::flat, LayoutKind::left, 100, 4000, 5, other));
    // Regular stores walk flat/left one stream (the streams are the streaming path's).
    std::vector<Scalar> a(4096), b(4096);
    CHECK(policy::flat_left_streams(a.data(), b.data(), 8, size).streams == 1);
  } else {
    CHECK(policy::flat_stores_text(size) == "regular stores (this build has no streaming stores)");
  }
  std::mt19937_64 rng(59);
  for (const Index T : {Index(2), Index(4), Index(8), Index(16), Index(5), Index(100)}) {
    CAPTURE(T);
    const Index N = 1031, K = 3;
    Kokkos::View<Scalar**, Kokkos::LayoutLeft, Kokkos::HostSpace> m("m", N, K);
    Kokkos::View<Scalar***, Kokkos::LayoutLeft, Kokkos::HostSpace> d("d", T, N, K), cv("cv", T, N, K);
    check_flat_both_stores(m, d, cv, rng);
    Kokkos::View<Scalar**, Kokkos::LayoutRight, Kokkos::HostSpace> mr("m", N, K);
    Kokkos::View<Scalar***, Kokkos::LayoutRight, Kokkos::HostSpace> dr("d", T, N, K), cvr("cv", T, N, K);
    check_flat_both_stores(mr, dr, cvr, rng);
  }
}

TEST_CASE("mismatched operands are rejected with both shapes", "[multiply]") {
  using Mem = ExecSpace::memory_space;
  Table<double, Kokkos::LayoutRight, Mem> m("m", 10, 5);
  Cube<double, Kokkos::LayoutRight, Mem> d("d", 2, 10, 4);
  Cube<double, Kokkos::LayoutRight, Mem> cv("cv", 2, 10, 4);
  const Operands<double, Kokkos::LayoutRight, Mem> ops{m, d, cv};
  CHECK_THROWS_WITH(multiply(Strategy::flat, ExecSpace(), ops),
                    Catch::Contains("multBy must be (N, K)") && Catch::Contains("multBy (10, 5)") &&
                        Catch::Contains("discount (2, 10, 4)"));

  Table<double, Kokkos::LayoutRight, Mem> m4("m4", 10, 4);
  Cube<double, Kokkos::LayoutRight, Mem> cv_short("cv", 1, 10, 4);
  const Operands<double, Kokkos::LayoutRight, Mem> short_out{m4, d, cv_short};
  CHECK_THROWS_WITH(multiply(Strategy::per_date, ExecSpace(), short_out), Catch::Contains("cv must have discount's shape"));
}

TEST_CASE("zero-length cubes are a no-op for every strategy", "[multiply]") {
  using Mem = ExecSpace::memory_space;
  Table<float, Kokkos::LayoutLeft, Mem> m("m", 0, 5);
  Cube<float, Kokkos::LayoutLeft, Mem> d("d", 3, 0, 5), cv("cv", 3, 0, 5);
  for (const auto& entry : strategy_table)
    CHECK_NOTHROW(multiply(entry.id, ExecSpace(), Operands<float, Kokkos::LayoutLeft, Mem>{m, d, cv}));
}

// A device launch over the cube is cut into slabs whose grids fit in every
// dimension (Kokkos 3.4 launched none past 65,535 blocks in y or z, and said
// nothing): the slabs for_cube_elements launches, checked on the host for
// the shapes users run and the extremes (one column; 100,000 columns).
TEMPLATE_TEST_CASE("device launches over a cube are cut into slabs whose grids fit", "[multiply]", Kokkos::LayoutRight,
                   Kokkos::LayoutLeft) {
  const auto blocks = [](Index extent, Index tile) { return (extent + tile - 1) / tile; };
  for (const auto& shape : {std::tuple<Index, Index, Index>{100, 4000, 5}, {100, 1000000, 5}, {200, 10000000, 5},
                             {8, 10000000, 5}, {1, 1, 1}, {1, 600000, 1}, {3, 7, 40}, {100000, 3, 2},
                             {5, 200000000, 1}, {2, 3, 100000}, {1, 1, 2000000}}) {
    // Plain variables, not structured bindings: the lambda below captures K
    // (capturing a structured binding is C++20; nvcc warned).
    const Index T = std::get<0>(shape), N = std::get<1>(shape), K = std::get<2>(shape);
    CAPTURE(T, N, K);
    const policy::DeviceSlabs s = policy::device_slabs<TestType>(T, K);
    CHECK(s.tile[0] * s.tile[1] * s.tile[2] <= 1024);  // threads a block
    CHECK(s.tile[0] * s.tile[1] * s.tile[2] >= 64);    // not a few threads a block (short date blocks, LayoutLeft)
    CHECK(s.tile[2] <= 64);                            // a block's z extent
    Index elements = 0, next[3] = {0, 0, 0};
    policy::for_each_slab(s, T, N, K, [&](const Index* lower, const Index* upper) {
      for (int d = 0; d < 3; ++d) {
        CHECK(lower[d] < upper[d]);
        CHECK(blocks(upper[d] - lower[d], s.tile[d]) <= policy::DeviceSlabs::max_grid);
      }
      CHECK(lower[2] == next[2]);  // columns in order within an id slab
      next[2] = upper[2] == K ? 0 : upper[2];
      elements += (upper[0] - lower[0]) * (upper[1] - lower[1]) * (upper[2] - lower[2]);
    });
    CHECK(elements == T * N * K);  // slabs in bounds, none overlapping (each element once)
  }
}

// The device path of `flat` (plain stores, one element per index, a division
// by reciprocal) never runs on this machine's host spaces, which stream.
// Checked here directly: the division, then the functor on the host.
#include "core/MultiplyKernels.hpp"

TEST_CASE("flat's division by reciprocal is exact", "[multiply]") {
  std::mt19937_64 rng(7);
  for (Index d : {Index(1), Index(2), Index(3), Index(5), Index(7), Index(100), Index(200), Index(4000 * 5),
                  Index(10000000) * 5, Index(2147483647), (Index(1) << 33) + 1}) {
    const detail::Divider by(d);
    CAPTURE(d);
    Index wrong = 0;
    const Index top = Index(1) << 40;
    const auto check = [&](Index e) { wrong += by.quotient(e) != e / d; };
    for (Index q : {Index(0), Index(1), Index(2), top / d - 1})  // around exact multiples
      for (Index off : {Index(-1), Index(0), Index(1)})
        if (q * d + off >= 0) check(q * d + off);
    std::uniform_int_distribution<Index> any(0, top);
    for (int n = 0; n < 200000; ++n) check(any(rng));
    CHECK(wrong == 0);
  }
}

TEMPLATE_TEST_CASE("flat's device functor equals the plain loop (run on the host)", "[multiply]", Kokkos::LayoutRight,
                   Kokkos::LayoutLeft) {
  using Layout = TestType;
  using Host = Kokkos::DefaultHostExecutionSpace;
  using Mem = Host::memory_space;
  for (const Shape shape : {Shape{3, 1001, 7}, Shape{1, 1, 1}, Shape{100, 40, 5}, Shape{7, 333, 2}}) {
    const auto [T, N, K] = shape;
    CAPTURE(to_string(layout_kind<Layout>()), T, N, K);
    Table<double, Layout, Mem> m("m", N, K);
    Cube<double, Layout, Mem> d("d", T, N, K), cv("cv", T, N, K);
    std::mt19937_64 rng(T + N + K);
    fill_random(m, d, rng);
    const Operands<double, Layout, Mem> ops{m, d, cv};
    Kokkos::parallel_for(policy::range(Host(), T * N * K), detail::Flat<double, Layout, Mem>(ops));
    Host().fence();
    CHECK(count_wrong(m, d, cv) == 0);
  }
}
