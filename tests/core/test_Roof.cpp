// A bench row's roof moves the row's own bytes (app/bench/): roof::
// copy_and_read copies exactly its n elements and reads exactly its m
// multBy elements, no fewer (a roof that skipped some would flatter the
// roof) and no more (it would flatter the kernel), with either kind of store.
// The reads are counted by what they add to roof::read_sink: the 64-bit sum
// of what was read, so a word read twice adds twice (an XOR would cancel).
#include "core/Roof.hpp"

#include <catch2/catch.hpp>

#include <algorithm>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <vector>

using namespace cvest;

namespace {

// The sum of the 8-byte words a read of `rows` adds to roof::read_sink.
std::uint64_t summed(const std::vector<double>& rows, std::size_t m) {
  std::uint64_t acc = 0;
  for (std::size_t j = 0; j < m; ++j) {
    std::uint64_t x;
    std::memcpy(&x, &rows[j], 8);
    acc += x;
  }
  return acc;
}

// The sum of the elements a ReadAlong read of `rows` adds (copy_piece: as
// unsigned integers of the element's size).
template <class Scalar>
std::uint64_t summed_elements(const Scalar* rows, std::size_t m) {
  std::uint64_t acc = 0;
  for (std::size_t j = 0; j < m; ++j) acc += streaming::bits_of(rows[j]);
  return acc;
}

template <class Scalar>
void check_copy_and_read(std::size_t n, std::size_t m, roof::Stores stores, Index run = 0) {
  CAPTURE(n, m, sizeof(Scalar), stores == roof::Stores::streaming, run);
  Kokkos::DefaultHostExecutionSpace space;
  std::vector<Scalar> src(n + 1), dst(n + 1, Scalar(-1));
  for (std::size_t j = 0; j <= n; ++j) src[j] = Scalar(0.5) + Scalar(j % 1013);
  std::vector<double> rows(m + 1);
  for (std::size_t j = 0; j <= m; ++j) rows[j] = 1.0 + double(j) * 1e-3;
  const auto sink_of = [&](const std::vector<double>& r) {
    const std::uint64_t before = roof::read_sink.load();
    roof::copy_and_read(space, dst.data(), src.data(), Index(n), reinterpret_cast<const Scalar*>(r.data()),
                        Index(m * 8 / sizeof(Scalar)), stores, run);
    return roof::read_sink.load() - before;
  };
  const std::uint64_t read = sink_of(rows);
  CHECK(read == summed(rows, m));
  for (std::size_t j = 0; j < n; ++j)
    if (dst[j] != src[j]) FAIL_CHECK("element " << j << " not copied");
  CHECK(dst[n] == Scalar(-1));  // one past: untouched
  // One bit flipped in the last multBy word read changes the sum by it; one past it does not.
  if (m > 0) {
    std::vector<double> flipped = rows;
    std::uint64_t x;
    std::memcpy(&x, &flipped[m - 1], 8);
    const std::uint64_t was = x;
    x ^= 1u;
    std::memcpy(&flipped[m - 1], &x, 8);
    CHECK(sink_of(flipped) == read - was + x);
  }
  std::vector<double> past = rows;
  past[m] = -7.0;
  CHECK(sink_of(past) == read);
}

// LayoutLeft's third roof (flat's walk with the multiply removed): runs of
// T copied in the kernel's streams, each run's one multBy value read beside
// it as the kernel reads it: once in each work item the run reaches into
// (their sum at element size), none past.
template <class Scalar>
void check_copy_in_runs(std::size_t n, Index T) {
  CAPTURE(n, T, sizeof(Scalar));
  Kokkos::DefaultHostExecutionSpace space;
  std::vector<Scalar> src(n + 1), dst(n + 1, Scalar(-1));
  for (std::size_t j = 0; j <= n; ++j) src[j] = Scalar(0.5) + Scalar(j % 1013);
  const std::size_t values = (n + std::size_t(T) - 1) / std::size_t(T);
  std::vector<Scalar> rows(values + 1);
  for (std::size_t r = 0; r <= values; ++r) rows[r] = Scalar(1.0 + double(r) * 1e-3);
  const auto sink_of = [&](const std::vector<Scalar>& r) {
    const std::uint64_t before = roof::read_sink.load();
    roof::copy_and_read(space, dst.data(), src.data(), Index(n), r.data(), Index(values), roof::Stores::streaming, T);
    return roof::read_sink.load() - before;
  };
  const std::uint64_t read = sink_of(rows);
  const std::size_t per = std::size_t(policy::flat_run_elements(sizeof(Scalar)));
  std::uint64_t want = 0;  // a run across two work items is read in each: counted twice
  for (std::size_t b = 0; b < n; b += per)
    want += summed_elements(rows.data() + b / std::size_t(T), (std::min(n, b + per) - 1) / std::size_t(T) - b / std::size_t(T) + 1);
  CHECK(read == want);
  CHECK(read != 0);
  for (std::size_t j = 0; j < n; ++j)
    if (dst[j] != src[j]) FAIL_CHECK("element " << j << " not copied");
  CHECK(dst[n] == Scalar(-1));  // one past: untouched
  std::vector<Scalar> past = rows;
  past[values] = Scalar(-7);
  CHECK(sink_of(past) == read);
}

}  // namespace

TEST_CASE("a roof pass copies its n elements and reads its m multBy elements, exactly", "[roof]") {
  const Index run = policy::flat_run_elements(8);
  for (auto stores : {roof::Stores::regular, roof::Stores::streaming}) {
    // within one run, across several runs with a partial last one, and no multBy
    check_copy_and_read<double>(1000, 40, stores);
    check_copy_and_read<double>(std::size_t(3 * run + 17), std::size_t(run + 5), stores);
    check_copy_and_read<float>(std::size_t(5 * run + 3), std::size_t(2 * run + 1), stores);
    check_copy_and_read<double>(777, 0, stores);
  }
  // LayoutLeft's third roof: streaming stores in runs of T, T dividing a
  // chunk or not, runs crossing chunks, one stream or several (runs of a
  // multiple of 16 bytes: policy::flat_left_streams).
  for (const Index T : {Index(1), Index(4), Index(7), Index(8), Index(40), Index(run - 3)}) {
    check_copy_in_runs<double>(std::size_t(3 * run + 17), T);
    check_copy_in_runs<float>(std::size_t(2 * run + 5), T);
  }
}

// The walk's pieces, as the kernel and the walk copy take them: every
// element of the cube in exactly one piece's rows, and multBy's run of each
// piece marked `first` (where the kernel reads it from memory) covering
// multBy exactly once, whatever the grouping (4, 2 or 1 dates at most, dates
// left over). Only addresses are looked at: no arrays.
TEMPLATE_TEST_CASE("flat's walk: each element once, multBy read in each tile's first group only", "[roof][flat]", double,
                   float) {
  const std::size_t e = sizeof(TestType);
  const auto [T, row_bytes] = GENERATE(std::pair<Index, std::size_t>{11, 4096 + 1024},
                                       std::pair<Index, std::size_t>{9, 3 * 4096 + 512},
                                       std::pair<Index, std::size_t>{7, 2 * 4096 + 2048},
                                       std::pair<Index, std::size_t>{8, (std::size_t(2) << 20) + 1024},
                                       std::pair<Index, std::size_t>{10, (std::size_t(3) << 20) + 2048},
                                       std::pair<Index, std::size_t>{13, (std::size_t(5) << 20) + 512});
  const int most = GENERATE(1, 2, 4);
  const Index slice = Index(row_bytes / e), cube = T * slice;
  CAPTURE(e, T, slice, most);
  const std::uintptr_t d_at = std::uintptr_t(1) << 30, cv_at = d_at + (std::size_t(cube) * e + 4095) / 4096 * 4096;
  const policy::FlatWalk walk(T, slice, e, reinterpret_cast<const void*>(d_at), reinterpret_cast<const void*>(cv_at),
                              most);
  CHECK(walk.together.dates <= most);
  CAPTURE(walk.together.dates, walk.together.step, walk.tiles);
  std::vector<unsigned char> element(std::size_t(cube), 0), multby(std::size_t(slice), 0);
  for (Index c = 0; c < walk.chunks(); ++c) {
    const policy::FlatWalk::Piece p = walk.piece(c);
    if (p.n == 0) {
      CHECK_FALSE(p.first);
      continue;
    }
    for (int u = 0; u < p.dates; ++u)
      for (Index j = 0; j < p.n; ++j) ++element[std::size_t(p.e + u * p.stride + j)];
    if (p.first)
      for (Index j = 0; j < p.n; ++j) ++multby[std::size_t(p.j + j)];
  }
  CHECK(std::count(element.begin(), element.end(), 1) == cube);
  CHECK(std::count(multby.begin(), multby.end(), 1) == slice);
}

// LayoutRight's third roof: flat's own walk (its tiles, its dates at once)
// with the multiply removed copies every element of the cube once and reads
// multBy once, beside the copy (copy_piece). Arrays placed so that the
// walk takes its most dates (two; four under CVEST_FLAT_DATES=4) 1 or 2
// apart, or one at a time, or (four at most, with tiles enough) groups the
// dates its spans leave over two at once.
TEMPLATE_TEST_CASE("a roof pass in flat's walk copies the whole cube and reads multBy once", "[roof]", double, float) {
  using Scalar = TestType;
  const std::size_t e = sizeof(Scalar);
  // rows of 2 MiB + 1 KiB: several tiles (a third of a thread's L2 share at most)
  const auto [T, row_bytes] = GENERATE(std::pair<Index, std::size_t>{11, 4096 + 1024},
                                       std::pair<Index, std::size_t>{9, 3 * 4096 + 512},
                                       std::pair<Index, std::size_t>{3, 2 * 4096}, std::pair<Index, std::size_t>{5, 1024},
                                       std::pair<Index, std::size_t>{8, 3 * 4096 + 2048},
                                       std::pair<Index, std::size_t>{8, (std::size_t(2) << 20) + 1024},
                                       // four at most: the dates over the spans two at once, then one alone
                                       std::pair<Index, std::size_t>{7, 3 * 4096 + 1024},
                                       std::pair<Index, std::size_t>{13, 3 * 4096 + 512});
  const Index slice = Index(row_bytes / e), cube = T * slice;
  CAPTURE(e, T, slice);
  std::vector<Scalar> buffer(std::size_t(2 * cube) + 3 * 4096 / e);
  Scalar* src = reinterpret_cast<Scalar*>((reinterpret_cast<std::uintptr_t>(buffer.data()) + 4095) / 4096 * 4096);
  Scalar* dst = src + (std::size_t(cube) * e + 4095) / 4096 * 4096 / e;  // both at page offset 0
  for (Index j = 0; j < cube; ++j) src[j] = Scalar(0.5) + Scalar(j % 1013), dst[j] = Scalar(-1);
  const policy::FlatWalk walk(T, slice, e, src, dst);
  std::vector<double> rows(std::size_t(slice) + 1);
  for (std::size_t j = 0; j < rows.size(); ++j) rows[j] = 1.0 + double(j) * 1e-3;  // words all different
  auto* m = reinterpret_cast<Scalar*>(rows.data());
  // On the pool's threads (the bench; the overlapped pipeline's direct
  // path, with either kind of store), and on this thread with either kind
  // (a block of the per-thread pipeline).
  const auto how = GENERATE(0, 1, 2, 3);
  CAPTURE(how);
  Kokkos::DefaultHostExecutionSpace space;
  const auto stores = how % 2 == 0 ? roof::Stores::streaming : roof::Stores::regular;
  const auto sink_of = [&] {
    const std::uint64_t before = roof::read_sink.load();
    if (how < 2) roof::copy_in_walk(space, dst, src, walk, static_cast<const Scalar*>(m), stores);
    else roof::copy_in_walk_here(dst, src, walk, static_cast<const Scalar*>(m), stores);
    return roof::read_sink.load() - before;
  };
  const std::uint64_t read = sink_of();
  std::size_t wrong = 0;
  for (Index j = 0; j < cube; ++j) wrong += dst[j] != src[j];
  CHECK(wrong == 0);
  CHECK(read == summed_elements(static_cast<const Scalar*>(m), std::size_t(slice)));
  CHECK(read != 0);
  m[slice] = Scalar(-7);  // one past multBy: not read
  CHECK(sink_of() == read);
  const std::size_t mod = row_bytes % 4096;
  const bool few_tiles = policy::even_groups_needed(walk.tiles, policy::host_threads());  // no date left over
  if (policy::flat_dates_most() == 4) {
    const int expected = mod == 1024 ? (T % 4 == 0 || !few_tiles ? 4 : T % 2 == 0 ? 2 : 1)
                         : mod == 512 && T >= 8 ? (T % 8 == 0 || !few_tiles ? 4 : 1)
                         : mod == 2048 ? (T % 2 == 0 || !few_tiles ? 2 : 1)
                                       : 1;
    CHECK(walk.together.dates == expected);
  } else if (policy::flat_dates_most() == 2) {  // two dates where four would be, and where 4-at-once needed 8
    const int expected = mod == 1024 || mod == 2048 ? (T % 2 == 0 || !few_tiles ? 2 : 1)
                         : mod == 512 && T >= 4 ? (T % 4 == 0 || T % 6 == 0 || !few_tiles ? 2 : 1)
                                                : 1;
    CHECK(walk.together.dates == expected);
  }
}

TEST_CASE("a pipeline's roof copies with its kernel's stores, flat's as measured here", "[roof]") {
  using roof::Stores;
  struct Restore {
    ~Restore() { policy::set_flat_stores_measured(policy::StoreKind::unset, "", 8); }
  } restore;
  const Stores streaming = CVEST_HAVE_STREAMING_STORES ? Stores::streaming : Stores::regular;
  const auto right = [](Strategy s, std::size_t element, bool to_memory) {  // a block of 13 x 4000 x 5
    return roof::kernel_stores<Kokkos::DefaultHostExecutionSpace>(s, LayoutKind::right, 13, 4000, 5, element,
                                                                  to_memory ? CvNext::memory : CvNext::cache);
  };
  CHECK(right(Strategy::per_date, 8, true) == streaming);        // cv to memory: as CvNext says
  CHECK(right(Strategy::per_date, 8, false) == Stores::regular);  // cv read again from cache
  CHECK(right(Strategy::flat, 8, true) == streaming);
  // per_id and elementwise write regular stores on LayoutRight whatever CvNext says: so does their roof.
  CHECK(right(Strategy::per_id, 8, true) == Stores::regular);
  CHECK(right(Strategy::elementwise, 8, true) == Stores::regular);
  // per_date's rows under streaming::min_run_bytes (8 ids x 5 doubles): regular, as its kernel.
  CHECK(roof::kernel_stores<Kokkos::DefaultHostExecutionSpace>(Strategy::per_date, LayoutKind::right, 13, 8, 5, 8,
                                                               CvNext::memory) == Stores::regular);
  policy::set_flat_stores_measured(policy::StoreKind::regular, "measured", 8);
  CHECK(right(Strategy::flat, 8, true) == Stores::regular);  // flat's kernel writes regular then
  CHECK(right(Strategy::flat, 4, true) == streaming);        // float's own kind
  CHECK(right(Strategy::per_date, 8, true) == streaming);
}
