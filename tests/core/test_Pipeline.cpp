// The pipeline over in-memory "files": every block lands, in order, bit for
// bit, whatever the layout, precision, block plan, and however slow a stage.
#include "core/pipeline/BlockRuns.hpp"
#include "core/pipeline/Pipeline.hpp"
#include "core/pipeline/Staging.hpp"

#include "tests/Skip.hpp"

#include <catch2/catch.hpp>

#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <cstring>
#include <algorithm>
#include <atomic>
#include <mutex>
#include <random>
#include <sstream>
#include <stdexcept>
#include <thread>
#include <vector>

#include <sys/mman.h>

using namespace cvest;

namespace {

template <class Scalar>
struct MemoryFiles {
  Index T, N, K;
  std::vector<Scalar> m, d, cv;
  std::vector<int> written_order;
  MemoryFiles(Index T_, Index N_, Index K_) : T(T_), N(N_), K(K_), m(N * K), d(T * N * K), cv(T * N * K, Scalar(-7)) {
    std::mt19937_64 rng(T * 31 + N * 7 + K);
    std::uniform_real_distribution<double> u(-4, 4);
    for (auto& x : m) x = Scalar(u(rng));
    for (auto& x : d) x = Scalar(u(rng));
  }
  BlockIO<Scalar> io(const BlockPlan& plan) {
    BlockIO<Scalar> io;
    io.read_multby = [this](Range ids, Scalar* out) {
      std::memcpy(out, m.data() + ids.begin * K, sizeof(Scalar) * std::size_t(ids.size() * K));
    };
    io.read_discount = [this](const Block& b, Scalar* out) {
      for (Index t = b.dates.begin; t < b.dates.end; ++t)
        std::memcpy(out + (t - b.dates.begin) * b.ids.size() * K, d.data() + (t * N + b.ids.begin) * K,
                    sizeof(Scalar) * std::size_t(b.ids.size() * K));
    };
    io.write_cv = [this, &plan](const Block& b, const Scalar* in) {
      for (std::size_t i = 0; i < plan.blocks.size(); ++i)
        if (plan.blocks[i].dates.begin == b.dates.begin && plan.blocks[i].ids.begin == b.ids.begin)
          written_order.push_back(int(i));
      for (Index t = b.dates.begin; t < b.dates.end; ++t)
        std::memcpy(cv.data() + (t * N + b.ids.begin) * K, in + (t - b.dates.begin) * b.ids.size() * K,
                    sizeof(Scalar) * std::size_t(b.ids.size() * K));
    };
    return io;
  }
  Index mismatches() const {
    Index bad = 0;
    for (Index t = 0; t < T; ++t)
      for (Index j = 0; j < N * K; ++j) {
        const Scalar expected = m[j] * d[t * N * K + j];
        bad += std::memcmp(&expected, &cv[t * N * K + j], sizeof(Scalar)) != 0;
      }
    return bad;
  }
};

template <class Scalar, class Layout>
void check_pipeline(Index T, Index N, Index K, std::size_t budget, Strategy strategy, bool slow,
                    bool force_staging = false) {
  CAPTURE(T, N, K, budget, sizeof(Scalar), to_string(layout_kind<Layout>()), to_string(strategy), slow, force_staging);
  MemoryFiles<Scalar> files(T, N, K);
  const auto plan = plan_blocks(T, N, K, sizeof(Scalar), budget, {1, 3});
  PipelineOptions options;
  options.strategy = strategy;
  options.progress = false;
  options.force_staging = force_staging;
  if (slow)  // uneven delays on both I/O threads: order must hold anyway
    options.before_io = [](Phase phase, int block) {
      if ((block + int(phase)) % 3 == 0) std::this_thread::sleep_for(std::chrono::milliseconds(3));
    };
  std::ostringstream progress;
  const auto stats = run_pipeline<Scalar, Layout>(plan, files.io(plan), options, progress);
  CHECK(files.mismatches() == 0);
  REQUIRE(files.written_order.size() == plan.blocks.size());
  for (std::size_t i = 0; i < files.written_order.size(); ++i) CHECK(files.written_order[i] == int(i));
  CHECK(stats.total_s > 0);
  CHECK(stats.timeline.size() == 5 * plan.blocks.size());
}

}  // namespace

TEST_CASE("pipeline output equals m * d bit for bit, in order", "[pipeline]") {
  for (bool slow : {false, true}) {
    check_pipeline<double, Kokkos::LayoutRight>(20, 500, 5, 1 << 20, Strategy::flat, slow);
    check_pipeline<double, Kokkos::LayoutLeft>(20, 500, 5, 1 << 20, Strategy::flat, slow);
    check_pipeline<float, Kokkos::LayoutRight>(7, 1001, 3, 1 << 16, Strategy::per_date, slow);
    check_pipeline<float, Kokkos::LayoutLeft>(7, 1001, 3, 1 << 16, Strategy::per_id, slow);
    check_pipeline<double, Kokkos::LayoutLeft>(1, 1, 1, 4096, Strategy::elementwise, slow);
  }
}

TEST_CASE("progress in a log: the last block's line, no line per block", "[pipeline]") {
  MemoryFiles<double> files(20, 500, 5);
  const auto plan = plan_blocks(20, 500, 5, 8, 1 << 18, {1, 3});
  REQUIRE(plan.blocks.size() > 4);
  PipelineOptions options;
  options.label = "flat/right";
  std::ostringstream log;  // not a terminal: a line every 10 s at most, and the last
  run_pipeline<double, Kokkos::LayoutRight>(plan, files.io(plan), options, log);
  const std::string n = std::to_string(plan.blocks.size()), text = log.str();
  CHECK(text.find("flat/right block " + n + "/" + n + "  ") == 0);
  CHECK(std::count(text.begin(), text.end(), '\n') == 1);
  CHECK(text.find('\r') == std::string::npos);
}

TEST_CASE("the forced staging path (the device path's stages, on the host) is bit-identical and in order",
          "[pipeline]") {
  for (bool slow : {false, true}) {
    check_pipeline<double, Kokkos::LayoutRight>(20, 500, 5, 1 << 20, Strategy::flat, slow, true);
    check_pipeline<double, Kokkos::LayoutLeft>(20, 500, 5, 1 << 20, Strategy::elementwise, slow, true);
    check_pipeline<float, Kokkos::LayoutRight>(7, 1001, 3, 1 << 16, Strategy::team, slow, true);
    check_pipeline<float, Kokkos::LayoutLeft>(7, 1001, 3, 1 << 16, Strategy::kokkos_kernels, slow, true);
  }
}

TEST_CASE("a failing read stops the pipeline and reaches the caller", "[pipeline]") {
  MemoryFiles<double> files(10, 100, 5);
  const auto plan = plan_blocks(10, 100, 5, 8, 1 << 14);
  REQUIRE(plan.blocks.size() > 3);
  auto io = files.io(plan);
  int reads = 0;
  const auto read = io.read_discount;
  io.read_discount = [&](const Block& b, double* out) {
    if (++reads == 3) throw std::runtime_error("disk on fire");
    read(b, out);
  };
  PipelineOptions options;
  options.progress = false;
  std::ostringstream progress;
  CHECK_THROWS_WITH((run_pipeline<double, Kokkos::LayoutRight>(plan, io, options, progress)), "disk on fire");
  CHECK(files.written_order.size() < plan.blocks.size());
}

TEST_CASE("a failing write stops the pipeline and reaches the caller", "[pipeline]") {
  MemoryFiles<float> files(10, 100, 5);
  const auto plan = plan_blocks(10, 100, 5, 4, 1 << 14);
  auto io = files.io(plan);
  io.write_cv = [](const Block&, const float*) { throw std::runtime_error("no space"); };
  PipelineOptions options;
  options.progress = false;
  std::ostringstream progress;
  CHECK_THROWS_WITH((run_pipeline<float, Kokkos::LayoutLeft>(plan, io, options, progress)), "no space");
}

TEST_CASE("data handed over in place (BlockIO::*_at) is used directly, bit-identical and in order", "[pipeline]") {
  const auto check = [](auto scalar, auto layout, Index T, Index N, Index K, std::size_t budget, bool all_in_place,
                        bool force_staging) {
    using Scalar = decltype(scalar);
    using Layout = decltype(layout);
    CAPTURE(T, N, K, budget, sizeof(Scalar), to_string(layout_kind<Layout>()), all_in_place, force_staging);
    MemoryFiles<Scalar> files(T, N, K);
    const auto plan = plan_blocks(T, N, K, sizeof(Scalar), budget, {1, 3});
    auto io = files.io(plan);
    // A resident multBy, as a job keeps it: never read through read_multby.
    io.read_multby = [](Range, Scalar*) { throw std::logic_error("read_multby called although multby_at is set"); };
    io.multby_at = [&](Range ids) -> const Scalar* { return files.m.data() + ids.begin * K; };
    if (all_in_place) {  // the in-memory benchmark: no I/O at all
      io.read_discount = [](const Block&, Scalar*) { throw std::logic_error("read_discount called"); };
      io.write_cv = [](const Block&, const Scalar*) { throw std::logic_error("write_cv called"); };
      io.discount_at = [&](const Block& b) -> const Scalar* {
        return files.d.data() + (b.dates.begin * N + b.ids.begin) * K;
      };
      io.cv_at = [&](const Block& b) -> Scalar* { return files.cv.data() + (b.dates.begin * N + b.ids.begin) * K; };
    }
    PipelineOptions options;
    options.progress = false;
    options.force_staging = force_staging;
    std::ostringstream progress;
    const auto stats = run_pipeline<Scalar, Layout>(plan, io, options, progress);
    CHECK(files.mismatches() == 0);
    if (all_in_place) {
      CHECK(stats.bytes[int(Phase::read)] == 0);
      CHECK(stats.bytes[int(Phase::write)] == 0);
    } else {
      REQUIRE(files.written_order.size() == plan.blocks.size());
      for (std::size_t i = 0; i < files.written_order.size(); ++i) CHECK(files.written_order[i] == int(i));
      // Only discount was read: multBy came in place.
      CHECK(stats.bytes[int(Phase::read)] == double(T * N * K * Index(sizeof(Scalar))));
    }
  };
  for (bool all : {false, true})
    for (bool staged : {false, true}) {
      check(double{}, Kokkos::LayoutRight{}, 20, 500, 5, 1 << 20, all, staged);
      check(double{}, Kokkos::LayoutLeft{}, 20, 500, 5, 1 << 20, all, staged);
      check(float{}, Kokkos::LayoutRight{}, 7, 1001, 3, 1 << 16, all, staged);  // id blocks within a date
      check(float{}, Kokkos::LayoutLeft{}, 7, 1001, 3, 1 << 16, all, staged);
    }
}

TEST_CASE("a host transpose tile moves every value, whichever steps it takes", "[pipeline]") {
  // Dates and columns that leave every remainder of the 4x4 (AVX2 doubles,
  // SSE floats) and 2x2 (SSE2 doubles) steps, the rows of the C-order side
  // wider than the tile.
  const auto check = [](auto scalar, auto&& tile) {
    using Scalar = decltype(scalar);
    for (Index T : {1, 2, 3, 4, 5, 6, 7, 8, 9, 12, 25})
      for (Index J : {1, 2, 3, 5, 7, 8, 13, 80}) {
        CAPTURE(sizeof(Scalar), T, J);
        const Index stride = J + 3;
        std::vector<Scalar> rows(std::size_t(T * stride)), left(std::size_t(J * T)), back(rows.size(), Scalar(-1));
        for (std::size_t x = 0; x < rows.size(); ++x) rows[x] = Scalar(x) + Scalar(0.5);
        std::vector<Scalar*> cols(static_cast<std::size_t>(J), nullptr);
        for (Index j = 0; j < J; ++j) cols[std::size_t(j)] = left.data() + j * T;
        tile(std::true_type{}, rows.data(), stride, cols.data(), J, T);
        Index bad = 0;
        for (Index t = 0; t < T; ++t)
          for (Index j = 0; j < J; ++j) bad += cols[std::size_t(j)][t] != rows[std::size_t(t * stride + j)];
        CHECK(bad == 0);
        tile(std::false_type{}, back.data(), stride, cols.data(), J, T);
        bad = 0;
        for (Index t = 0; t < T; ++t)
          for (Index j = 0; j < stride; ++j)  // the columns beyond the tile are untouched
            bad += back[std::size_t(t * stride + j)] != (j < J ? rows[std::size_t(t * stride + j)] : Scalar(-1));
        CHECK(bad == 0);
      }
  };
  using pipeline_detail::transpose_tile;
  for (bool avx2 : {false, pipeline_detail::transpose_avx2_available()}) {
    CAPTURE(avx2);
    check(double{}, [avx2](auto to_left, double* row, Index stride, double* const* cols, Index J, Index T) {
      transpose_tile<decltype(to_left)::value>(row, stride, cols, J, T, avx2);
    });
  }
  check(float{}, [](auto to_left, float* row, Index stride, float* const* cols, Index J, Index T) {
    transpose_tile<decltype(to_left)::value>(row, stride, cols, J, T);
  });
}

// --- the per-thread pipeline ------------------------------------------------

namespace {

// Makes MemoryFiles' calls safe to run side by side (its write bookkeeping is
// shared), as the per-thread pipeline requires.
template <class Scalar>
BlockIO<Scalar> concurrent_io(MemoryFiles<Scalar>& files, const BlockPlan& plan, std::mutex& m) {
  auto io = files.io(plan);
  const auto write = io.write_cv;
  io.write_cv = [write, &m](const Block& b, const Scalar* in) {
    std::lock_guard lock(m);
    write(b, in);
  };
  io.concurrent = true;
  return io;
}

// The per-thread pipeline runs on host OpenMP builds only; elsewhere its
// tests say so and ctest shows them not run (tests/Skip.hpp).
// How many id ranges the plan's blocks go through, one after the other.
int id_ranges(const BlockPlan& plan) {
  int ranges = 0;
  for (std::size_t i = 0; i < plan.blocks.size(); ++i)
    ranges += i == 0 || plan.blocks[i].ids.begin != plan.blocks[i - 1].ids.begin;
  return ranges;
}

template <class Scalar>
void count_multby_reads(BlockIO<Scalar>& io, std::atomic<int>& reads) {
  io.read_multby = [&reads, read = io.read_multby](Range ids, Scalar* out) {
    ++reads;
    read(ids, out);
  };
}

bool per_thread_space() {
  std::string why_not;
  const auto plan = plan_blocks(4, 100, 5, 8, 1 << 20);
  if (per_thread_threads(plan, 1 << 20, Strategy::flat, LayoutKind::right, true, why_not) > 0 ||
      why_not.find("execution space") == std::string::npos)
    return true;
  WARN("not run: " << why_not);
  return false;
}

// Threads run by the per-thread pipeline in tests: at least two even on a
// one-core machine, so blocks really run side by side.
constexpr int test_threads = 3;

}  // namespace

TEST_CASE("the per-thread pipeline writes every block once, bit-identical", "[pipeline][per_thread]") {
  if (!per_thread_space()) return cvest::test::skip_part("no per-thread execution space in this build");
  const auto check = [](auto scalar, auto layout, Index T, Index N, Index K, std::size_t budget, Strategy strategy,
                        bool slow, bool multby_in_place, bool read_ahead) {
    using Scalar = decltype(scalar);
    using Layout = decltype(layout);
    CAPTURE(T, N, K, budget, sizeof(Scalar), to_string(layout_kind<Layout>()), to_string(strategy), slow,
            multby_in_place, read_ahead);
    MemoryFiles<Scalar> files(T, N, K);
    const auto plan = plan_blocks(T, N, K, sizeof(Scalar), budget, {1, 3});
    std::mutex m;
    auto io = concurrent_io(files, plan, m);
    if (multby_in_place) {
      io.read_multby = [](Range, Scalar*) { throw std::logic_error("read_multby called although multby_at is set"); };
      io.multby_at = [&](Range ids) -> const Scalar* { return files.m.data() + ids.begin * K; };
    }
    PipelineOptions options;
    options.strategy = strategy;
    options.progress = false;
    options.threads = test_threads;
    options.read_ahead = read_ahead;
    if (slow)  // uneven delays: threads finish blocks out of order
      options.before_io = [](Phase phase, int block) {
        if ((block + int(phase)) % 3 == 0) std::this_thread::sleep_for(std::chrono::milliseconds(2));
      };
    std::ostringstream progress;
    const auto stats = run_pipeline<Scalar, Layout>(plan, io, options, progress);
    CHECK(files.mismatches() == 0);
    auto order = files.written_order;
    std::sort(order.begin(), order.end());
    REQUIRE(order.size() == plan.blocks.size());
    for (std::size_t i = 0; i < order.size(); ++i) CHECK(order[i] == int(i));
    CHECK(stats.bytes[int(Phase::write)] == double(T * N * K * Index(sizeof(Scalar))));
    CHECK(stats.timeline.size() == 5 * plan.blocks.size());
    CHECK(stats.total_s > 0);
    // Read ahead where asked, unless no thread has a next block.
    CHECK(stats.read_ahead == (read_ahead && plan.blocks.size() > std::size_t(test_threads)));
  };
  for (bool slow : {false, true})
    for (bool in_place : {false, true})
      for (bool ahead : {false, true}) {
        check(double{}, Kokkos::LayoutRight{}, 20, 500, 5, 1 << 20, Strategy::flat, slow, in_place, ahead);
        check(double{}, Kokkos::LayoutLeft{}, 20, 500, 5, 1 << 20, Strategy::flat, slow, in_place, ahead);
        check(float{}, Kokkos::LayoutRight{}, 7, 1001, 3, 1 << 16, Strategy::per_date, slow, in_place, ahead);
        check(float{}, Kokkos::LayoutLeft{}, 7, 1001, 3, 1 << 16, Strategy::per_id, slow, in_place, ahead);
        check(double{}, Kokkos::LayoutRight{}, 7, 1001, 3, 1 << 16, Strategy::elementwise, slow, in_place, ahead);
        check(double{}, Kokkos::LayoutLeft{}, 7, 1001, 3, 1 << 16, Strategy::kokkos_kernels, slow, in_place, ahead);
        check(float{}, Kokkos::LayoutRight{}, 3, 50, 2, 1 << 12, Strategy::one_worker, slow, in_place, ahead);
      }
}

TEST_CASE("the per-thread pipeline computes LayoutLeft blocks tile by tile, bit-identical", "[pipeline][per_thread]") {
  if (!per_thread_space()) return cvest::test::skip_part("no per-thread execution space in this build");
  // Blocks of many more ids than a tile holds, a last id range and a last
  // date block shorter than the rest (their tiles must line up with the
  // multBy tiles kept from the id range's first block), both precisions,
  // multBy read or in place.
  const auto check = [](auto scalar, Index T, Index N, Index K, bool multby_in_place, Strategy strategy,
                        bool read_ahead) {
    using Scalar = decltype(scalar);
    CAPTURE(T, N, K, sizeof(Scalar), multby_in_place, to_string(strategy), read_ahead);
    MemoryFiles<Scalar> files(T, N, K);
    const auto plan = plan_blocks(T, N, K, sizeof(Scalar), std::size_t(1) << 30, {}, std::size_t(2) << 20,
                                  LayoutKind::left);
    REQUIRE(T % plan.block_dates != 0);
    REQUIRE(N % plan.block_ids != 0);
    const Index tile = kernel_ids(plan, LayoutKind::left, test_threads);
    REQUIRE(tile * 4 < plan.block_ids);
    REQUIRE(plan.block_ids % tile != 0);
    CHECK(kernel_ids(plan, LayoutKind::left, 0) == plan.block_ids);  // overlapped: whole blocks
    CHECK(kernel_ids(plan, LayoutKind::right, test_threads) == plan.block_ids);
    std::mutex m;
    auto io = concurrent_io(files, plan, m);
    if (multby_in_place) io.multby_at = [&](Range ids) -> const Scalar* { return files.m.data() + ids.begin * K; };
    PipelineOptions options;
    options.strategy = strategy;
    options.progress = false;
    options.threads = test_threads;
    options.read_ahead = read_ahead;
    std::ostringstream progress;
    const auto stats = run_pipeline<Scalar, Kokkos::LayoutLeft>(plan, io, options, progress);
    CHECK(files.mismatches() == 0);
    CHECK(files.written_order.size() == plan.blocks.size());
    CHECK(stats.timeline.size() == 5 * plan.blocks.size());  // a span per phase and block, tiles summed
    CHECK(stats.bytes[int(Phase::d2h)] == double(T * N * K * Index(sizeof(Scalar))));
  };
  for (bool in_place : {false, true})
    for (bool ahead : {false, true}) {
      check(double{}, 29, 10000, 5, in_place, Strategy::flat, ahead);
      check(float{}, 29, 20000, 5, in_place, Strategy::per_id, ahead);
      check(double{}, 31, 9000, 7, in_place, Strategy::per_date, ahead);
    }
}

TEST_CASE("reading ahead: a thread's next block is read while it writes the one before, multBy read once a range",
          "[pipeline][per_thread]") {
  if (!per_thread_space()) return cvest::test::skip_part("no per-thread execution space in this build");
  // One thread, so its blocks come in the plan's order; multBy too large to
  // keep whole, so id ranges are outermost, each over several date blocks.
  MemoryFiles<double> files(12, 4000, 3);
  const auto plan = plan_blocks(12, 4000, 3, 8, 1 << 16);
  REQUIRE_FALSE(plan.multby_resident);
  REQUIRE(plan.blocks.size() > 8);
  const int ranges = id_ranges(plan);
  REQUIRE(ranges > 1);
  REQUIRE(ranges < int(plan.blocks.size()));
  for (const bool ahead : {false, true}) {
    CAPTURE(ahead);
    std::mutex m;
    auto io = concurrent_io(files, plan, m);
    std::atomic<int> multby_reads{0};
    count_multby_reads(io, multby_reads);
    // Block b's write waits (up to 60 s) for block b + 1's read to start:
    // reading ahead, it has; otherwise it cannot until the write returns.
    std::mutex step;
    std::condition_variable started;
    int last_read = -1;
    std::vector<int> overlapped;
    PipelineOptions options;
    options.progress = false;
    options.threads = 1;
    options.read_ahead = ahead;
    options.before_io = [&](Phase phase, int b) {
      std::unique_lock lock(step);
      if (phase == Phase::read) {
        last_read = b;
        started.notify_all();
      } else if (phase == Phase::write && b + 1 < int(plan.blocks.size())) {
        if (ahead) started.wait_for(lock, std::chrono::seconds(60), [&] { return last_read > b; });
        if (last_read > b) overlapped.push_back(b);
      }
    };
    std::ostringstream progress;
    run_pipeline<double, Kokkos::LayoutRight>(plan, io, options, progress);
    CHECK(files.mismatches() == 0);
    CHECK(files.written_order.size() == plan.blocks.size());
    CHECK(overlapped.size() == (ahead ? plan.blocks.size() - 1 : 0));
    CHECK(multby_reads == ranges);  // the read-ahead buffers copy the rows the block before holds
    files.written_order.clear();
  }
}

TEST_CASE("per-thread pipeline threads take an id range's date blocks together: multBy's rows read once a range",
          "[pipeline][per_thread]") {
  if (!per_thread_space()) return cvest::test::skip_part("no per-thread execution space in this build");
  // One-date blocks (a small budget) of many id ranges, multBy not resident:
  // two threads taking blocks one at a time each read every range's rows.
  MemoryFiles<double> files(4, 200000, 5);
  const auto plan = plan_blocks(4, 200000, 5, 8, 1 << 20);
  REQUIRE_FALSE(plan.multby_resident);
  REQUIRE(plan.id_ranges_together);
  REQUIRE(plan.block_dates == 1);
  const int ranges = id_ranges(plan);
  REQUIRE(ranges >= pipeline_detail::runs_per_thread * 2);
  for (const bool ahead : {false, true}) {
    CAPTURE(ahead);
    std::mutex m;
    auto io = concurrent_io(files, plan, m);
    std::atomic<int> multby_reads{0};
    count_multby_reads(io, multby_reads);
    PipelineOptions options;
    options.progress = false;
    options.threads = 2;
    options.read_ahead = ahead;
    options.before_io = [](Phase phase, int block) {  // uneven: threads finish out of order
      if ((block + int(phase)) % 5 == 0) std::this_thread::sleep_for(std::chrono::microseconds(300));
    };
    std::ostringstream progress;
    run_pipeline<double, Kokkos::LayoutRight>(plan, io, options, progress);
    CHECK(files.mismatches() == 0);
    CHECK(files.written_order.size() == plan.blocks.size());
    CHECK(multby_reads == ranges);
    files.written_order.clear();
  }
}

TEST_CASE("block runs: an id range's blocks together, cut so that every thread has enough of them",
          "[pipeline][per_thread]") {
  using pipeline_detail::block_runs;
  const auto blocks_of = [](int ranges, int dates) {
    std::vector<Block> blocks;
    for (int r = 0; r < ranges; ++r)
      for (int t = 0; t < dates; ++t) blocks.push_back({{t, t + 1}, {10 * r, 10 * r + 10}});
    return blocks;
  };
  // Not together: every block a run.
  CHECK(block_runs(blocks_of(3, 4), false, 2) == std::vector<int>{0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12});
  // Enough ranges: one run each.
  const auto many = block_runs(blocks_of(40, 4), true, 2);
  REQUIRE(many.size() == 41);
  for (std::size_t r = 0; r < many.size(); ++r) CHECK(many[r] == int(4 * r));
  // Few ranges: each cut into pieces of dates, at least 16 runs a thread,
  // every block in exactly one run, runs in the plan's order.
  for (const auto& [ranges, dates, threads] : {std::array<int, 3>{1, 200, 2}, {3, 7, 4}, {5, 1, 2}, {2, 100, 1}}) {
    CAPTURE(ranges, dates, threads);
    const auto runs = block_runs(blocks_of(ranges, dates), true, threads);
    CHECK(runs.front() == 0);
    CHECK(runs.back() == ranges * dates);
    CHECK(int(runs.size()) - 1 >= std::min(ranges * dates, pipeline_detail::runs_per_thread * threads));
    for (std::size_t r = 1; r < runs.size(); ++r) CHECK(runs[r] > runs[r - 1]);
    for (int r = 0; r < ranges; ++r)  // no run crosses an id range
      CHECK(std::find(runs.begin(), runs.end(), r * dates) != runs.end());
  }
  CHECK(block_runs({}, true, 2) == std::vector<int>{0});
  // Taken in order, a run at a time, each block once.
  pipeline_detail::RunTaker taker(block_runs(blocks_of(20, 3), true, 1));
  pipeline_detail::RunTaker::Cursor a, b;
  CHECK(taker.take(a) == 0);
  CHECK(taker.take(b) == 3);
  CHECK(taker.take(a) == 1);
  CHECK(taker.take(a) == 2);
  CHECK(taker.take(a) == 6);  // the next run after b's
  std::vector<int> seen{0, 3, 1, 2, 6};
  for (auto* c : {&b, &a})
    for (int got = 0; (got = taker.take(*c)) < 60;) seen.push_back(got);
  std::sort(seen.begin(), seen.end());
  CHECK(seen.size() == 60);
  for (int i = 0; i < int(seen.size()); ++i) CHECK(seen[std::size_t(i)] == i);
  CHECK(taker.take(a) == 60);
  CHECK(taker.take(b) == 60);
}

TEST_CASE("a failing read (read ahead or not) or write in the per-thread pipeline stops every thread and reaches "
          "the caller", "[pipeline][per_thread]") {
  if (!per_thread_space()) return cvest::test::skip_part("no per-thread execution space in this build");
  MemoryFiles<double> files(10, 100, 5);
  const auto plan = plan_blocks(10, 100, 5, 8, 1 << 14);
  REQUIRE(plan.blocks.size() > 6);
  // Call `failing` of the read (or write) fails; with reading ahead, reads
  // fail on the helpers and writes fail with the helpers' reads under way.
  for (const bool ahead : {false, true})
    for (const bool reads : {false, true})
      for (const int failing : {0, 4}) {
        CAPTURE(ahead, reads, failing);
        std::mutex m;
        auto io = concurrent_io(files, plan, m);
        std::atomic<int> calls{0};
        const auto read = io.read_discount;
        const auto write = io.write_cv;
        if (reads)
          io.read_discount = [&, failing](const Block& b, double* out) {
            if (calls++ == failing) throw std::runtime_error("unreadable sector");
            read(b, out);
          };
        else
          io.write_cv = [&, failing](const Block& b, const double* in) {
            if (calls++ == failing) throw std::runtime_error("no space");
            write(b, in);
          };
        PipelineOptions options;
        options.progress = false;
        options.threads = test_threads;
        options.read_ahead = ahead;
        std::ostringstream progress;
        CHECK_THROWS_WITH((run_pipeline<double, Kokkos::LayoutRight>(plan, io, options, progress)),
                          reads ? "unreadable sector" : "no space");
        CHECK(files.written_order.size() < plan.blocks.size());
        files.written_order.clear();
      }
}

TEST_CASE("the per-thread pipeline refuses what it cannot run", "[pipeline][per_thread]") {
  const auto plan = plan_blocks(10, 100, 5, 8, 1 << 20);
  std::string why_not;
  CHECK(per_thread_threads(plan, 1 << 20, Strategy::team, LayoutKind::right, true, why_not) == 0);
  CHECK(!why_not.empty());
  why_not.clear();
  CHECK(per_thread_threads(plan, 1 << 20, Strategy::flat, LayoutKind::right, false, why_not) == 0);
  CHECK(!why_not.empty());
  // A budget that holds one thread's two blocks but not two threads' four.
  const auto big = plan_blocks(2, 1000, 5, 8, 1 << 20);
  const std::size_t block = std::size_t(big.block_dates * big.block_ids * 5 * 8);
  const std::size_t multby = big.multby_resident ? std::size_t(1000 * 5 * 8) : 0;
  why_not.clear();
  CHECK(per_thread_threads(big, multby + 3 * block, Strategy::flat, LayoutKind::right, true, why_not) == 0);
  CHECK(!why_not.empty());
  // Reading ahead, each thread holds a second discount block and multBy rows.
  const std::size_t each = std::size_t(per_thread_buffer_bytes(big, LayoutKind::right));
  const std::size_t ahead = std::size_t(per_thread_read_ahead_bytes(big));
  CHECK(ahead == std::size_t((big.block_dates + (big.multby_resident ? 0 : 1)) * big.block_ids * 5 * 8));
  const auto small = plan_blocks(12, 4000, 3, 8, 1 << 16);  // multBy not kept whole: its rows read ahead too
  REQUIRE_FALSE(small.multby_resident);
  CHECK(per_thread_read_ahead_bytes(small) == double((small.block_dates + 1) * small.block_ids * 3 * 8));
  if (per_thread_space() && ExecSpace().concurrency() >= 2) {
    const std::size_t resident = 2 * multby;  // counted twice (per_thread_threads)
    why_not.clear();
    CHECK(per_thread_threads(big, resident + 2 * each, Strategy::flat, LayoutKind::right, true, why_not) == 2);
    CHECK(per_thread_threads(big, resident + 2 * each, Strategy::flat, LayoutKind::right, true, why_not, true) == 0);
    CHECK(per_thread_threads(big, resident + 2 * (each + ahead), Strategy::flat, LayoutKind::right, true, why_not,
                             true) == 2);
  }

  MemoryFiles<double> files(10, 100, 5);
  PipelineOptions options;
  options.progress = false;
  options.threads = 2;
  std::ostringstream progress;
  auto io = files.io(plan);  // not concurrent
  CHECK_THROWS_AS((run_pipeline<double, Kokkos::LayoutRight>(plan, io, options, progress)), std::invalid_argument);
  io.concurrent = true;
  options.strategy = Strategy::team;
  CHECK_THROWS_AS((run_pipeline<double, Kokkos::LayoutRight>(plan, io, options, progress)), std::invalid_argument);
}

TEST_CASE("the kernel's busy seconds without the roof's warming: the other calls' speed over all its bytes",
          "[pipeline][roof]") {
  PipelineStats s;
  s.seconds[int(Phase::kernel)] = 3.0;
  s.bytes[int(Phase::kernel)] = 400;
  CHECK(s.kernel_seconds_unwarmed() == 3.0);  // none warmed
  s.kernel_after_roof_s = 1.0;                 // half the bytes in 1 s, the other half in 2 s
  s.kernel_after_roof_bytes = 200;
  CHECK(s.kernel_seconds_unwarmed() == Approx(4.0));
  s.kernel_after_roof_bytes = 400;  // every call warmed: no speed to count them at
  CHECK(s.kernel_seconds_unwarmed() == 3.0);
}

TEST_CASE("the roof's copies count the kernel's bytes, call for call, in every pipeline, layout and block shape",
          "[pipeline][roof]") {
  // Not a timing: which calls were copied, and that both sides count the
  // same bytes (a call's discount read and cv written), so k.roof compares
  // like with like; and that the copies leave the output as it was.
  const auto check = [](auto scalar, auto layout, Index T, Index N, Index K, std::size_t budget, int threads,
                        bool force_staging) {
    using Scalar = decltype(scalar);
    using Layout = decltype(layout);
    constexpr bool right = std::is_same_v<Layout, Kokkos::LayoutRight>;
    CAPTURE(T, N, K, budget, sizeof(Scalar), right, threads, force_staging);
    MemoryFiles<Scalar> files(T, N, K);
    const auto plan = plan_blocks(T, N, K, sizeof(Scalar), budget, {1, 3}, 0, layout_kind<Layout>());
    std::mutex m;
    PipelineOptions options;
    options.progress = false;
    options.threads = threads;
    options.force_staging = force_staging;
    std::ostringstream progress;
    const auto stats = run_pipeline<Scalar, Layout>(plan, threads ? concurrent_io(files, plan, m) : files.io(plan),
                                                    options, progress);
    CHECK(files.mismatches() == 0);
    const double es = sizeof(Scalar);
    double kernel_bytes = 0, sampled_bytes = 0;
    std::size_t sampled = 0;
    const int n = int(plan.blocks.size());
    for (int b = 0; b < n; ++b) {
      // discount read, cv written, multBy rows read once
      const double bytes = double((2 * plan.blocks[b].dates.size() + 1) * plan.blocks[b].ids.size() * K) * es;
      kernel_bytes += bytes;
      // every other block (the second, fourth, ...), or the only one: spelled
      // out here, not asked of roof_sampled, so a rule sampling none fails
      if (b % 2 == 1 || n == 1) sampled_bytes += bytes, ++sampled;
    }
    REQUIRE(sampled > 0);
    CHECK(stats.bytes[int(Phase::kernel)] == kernel_bytes);
    double roof_bytes = 0;
    for (const auto& call : stats.roof) {
      roof_bytes += call.bytes;
      CHECK(call.kernel_s > 0);
      CHECK(call.copy_s > 0);
    }
    const std::size_t used = std::size_t(std::min(threads, n));
    // The kernel calls a roof copy warmed (the copy in the kernel's place:
    // host LayoutRight computed where read) carry the copies' bytes; none
    // elsewhere.
    const bool in_place = right && policy::on_host<ExecSpace> && !force_staging &&
                          (threads > 0 ? std::size_t(n) >= 2 * used : n > 1);
    CHECK(stats.kernel_after_roof_bytes == (in_place ? roof_bytes : 0.0));
    CHECK((stats.kernel_after_roof_s > 0) == in_place);
    CHECK(stats.kernel_seconds_unwarmed() > 0);
    if (threads > 0 && right && std::size_t(n) >= 2 * used) {
      // Every other block each thread takes (which blocks a thread takes is
      // not fixed): a thread of k blocks copies k / 2 of them, each with a
      // block's bytes. With fewer blocks, the sampled ones after their kernel.
      CHECK(stats.roof.size() >= (std::size_t(n) - used + 1) / 2);
      CHECK(stats.roof.size() <= std::size_t(n) / 2);
      for (const auto& call : stats.roof)
        CHECK(std::any_of(plan.blocks.begin(), plan.blocks.end(), [&](const Block& blk) {
          return call.bytes == double((2 * blk.dates.size() + 1) * blk.ids.size() * K) * es;
        }));
    } else {
      CHECK(roof_bytes == sampled_bytes);
      if (threads > 0 && !right)  // a LayoutLeft block of the per-thread pipeline is computed, and copied, tile by tile
        CHECK(stats.roof.size() >= sampled);
      else
        CHECK(stats.roof.size() == sampled);
    }
    CHECK(stats.kernel_roof_fraction() > 0);
    CHECK(stats.roof_GBps() > 0);
  };
  CHECK(roof_sampled(0, 1));
  CHECK_FALSE(roof_sampled(0, 4));
  CHECK(roof_sampled(1, 4));
  CHECK_FALSE(roof_sampled(2, 4));
  CHECK(roof_sampled(3, 4));
  const int per_thread = per_thread_space() ? test_threads : 0;
  for (const int threads : {0, per_thread}) {
    check(double{}, Kokkos::LayoutRight{}, 20, 500, 5, 1 << 20, threads, false);  // 4 blocks: fewer than two a thread
    check(double{}, Kokkos::LayoutLeft{}, 20, 5000, 5, 1 << 20, threads, false);
    check(float{}, Kokkos::LayoutRight{}, 7, 1001, 3, 1 << 16, threads, false);
    check(float{}, Kokkos::LayoutLeft{}, 7, 1001, 3, 1 << 16, threads, false);
    check(double{}, Kokkos::LayoutRight{}, 1, 1, 1, 4096, threads, false);  // one block: it is the one copied
    check(double{}, Kokkos::LayoutRight{}, 4, 500, 5, 1 << 16, threads, false);  // 16 blocks: copies in the kernels' place
  }
  check(double{}, Kokkos::LayoutRight{}, 20, 500, 5, 1 << 20, 0, true);  // the staged (device) path
  check(float{}, Kokkos::LayoutLeft{}, 7, 1001, 3, 1 << 16, 0, true);
}

TEST_CASE("kept buffers are page-aligned, reused while large enough, and freed when a job leaves them unused",
          "[pipeline]") {
  BufferCache cache;
  bool fresh = false;
  const auto a = cache.get<double, Kokkos::HostSpace>("a", 300000, &fresh);  // 2.3 MiB
  REQUIRE(a.data() != nullptr);
  CHECK(fresh);  // mapped now: its pages not yet written
  CHECK(reinterpret_cast<std::uintptr_t>(a.data()) % 4096 == 0);  // O_DIRECT takes its rows as they are
  a(0) = 1.5, a(299999) = 2.5;  // writable end to end
  CHECK(cache.kept_bytes() == 300000 * sizeof(double));
  // a smaller ask under the same label: the same memory, contents kept
  const auto smaller = cache.get<double, Kokkos::HostSpace>("a", 1000, &fresh);
  CHECK(smaller.data() == a.data());
  CHECK_FALSE(fresh);
  CHECK(smaller(0) == 1.5);
  // an empty ask still gets memory of its own
  const auto empty = cache.get<float, Kokkos::HostSpace>("empty", 0);
  CHECK(empty.data() != nullptr);
  CHECK(reinterpret_cast<std::uintptr_t>(empty.data()) % 4096 == 0);
  cache.end_job();  // both used in this job: kept
  CHECK(cache.kept_bytes() == 300000 * sizeof(double));
  const auto larger = cache.get<double, Kokkos::HostSpace>("a", 600000, &fresh);  // the kept one freed first
  CHECK(fresh);
  CHECK(reinterpret_cast<std::uintptr_t>(larger.data()) % 4096 == 0);
  larger(599999) = 3.5;
  CHECK(cache.kept_bytes() == 600000 * sizeof(double));
  cache.end_job();  // "empty" went unused this job: freed
  cache.end_job();  // "a" went unused this one
  CHECK(cache.kept_bytes() == 0);
}

TEST_CASE("memory faulted in ahead of its first write: resident, zero where fresh, nothing outside it touched",
          "[pipeline]") {
  // Pages resident (mincore) before and after, on an anonymous mapping of
  // 64 pages: fault_in of pages 8-39 from an address inside page 8 to one
  // inside page 39 makes exactly those resident (a first write pays no fault).
  constexpr std::size_t page = 4096, pages = 64;
  const auto memory = map_bytes(pages * page);
  ::madvise(memory.get(), pages * page, MADV_NOHUGEPAGE);  // a huge page would fault in 2 MiB at once
  const auto resident = [&] {
    std::vector<unsigned char> in(pages);
    REQUIRE(::mincore(memory.get(), pages * page, in.data()) == 0);
    std::vector<bool> r(pages);
    for (std::size_t i = 0; i < pages; ++i) r[i] = in[i] & 1;
    return r;
  };
  for (const bool r : resident()) CHECK_FALSE(r);  // mapped, never touched
  fault_in(memory.get() + 8 * page + 100, 31 * page);  // ends 100 bytes into page 39
  const auto after = resident();
  for (std::size_t i = 0; i < pages; ++i) {
    CAPTURE(i);
    CHECK(after[i] == (i >= 8 && i <= 39));
  }
  CHECK(std::all_of(memory.get() + 8 * page, memory.get() + 40 * page, [](unsigned char c) { return c == 0; }));
  fault_in(memory.get(), 0);  // nothing asked: nothing done
  CHECK_FALSE(resident()[0]);
}
