#include "core/Errors.hpp"
#include "core/Plan.hpp"

#include <catch2/catch.hpp>

#include <algorithm>
#include <array>
#include <utility>
#include <vector>

using namespace cvest;

namespace {
// Every (date, id) of the cube is in exactly one block.
void check_cover(const BlockPlan& plan) {
  std::vector<int> hits(std::size_t(plan.T * plan.N), 0);
  for (const auto& b : plan.blocks) {
    REQUIRE(b.dates.size() > 0);
    REQUIRE(b.ids.size() > 0);
    REQUIRE(b.dates.size() <= plan.block_dates);
    REQUIRE(b.ids.size() <= plan.block_ids);
    for (Index t = b.dates.begin; t < b.dates.end; ++t)
      for (Index i = b.ids.begin; i < b.ids.end; ++i) ++hits[std::size_t(t * plan.N + i)];
  }
  for (int h : hits) REQUIRE(h == 1);
}
}  // namespace

TEST_CASE("blocks of whole dates when a date fits the budget", "[plan]") {
  const auto plan = plan_blocks(100, 4000, 5, 8, std::size_t(64) << 20);
  CHECK(plan.block_ids == 4000);
  CHECK(plan.block_dates >= 1);
  CHECK(plan.blocks.size() >= 4);  // several blocks, so the stages overlap
  CHECK(plan.buffer_bytes <= std::size_t(64) << 20);
  check_cover(plan);
}

TEST_CASE("blocks of ids when one date does not fit", "[plan]") {
  const std::size_t budget = 1 << 20;
  const auto plan = plan_blocks(3, 10000, 7, 8, budget, {1, 100});
  CHECK(plan.block_dates == 1);
  CHECK(plan.block_ids < 10000);
  CHECK(plan.block_ids % 100 == 0);  // whole output chunks
  CHECK(plan.buffer_bytes <= budget);
  check_cover(plan);
  // multBy too big to keep: id blocks outer, so its rows are read once
  CHECK_FALSE(plan.multby_resident);
  CHECK(plan.id_ranges_together);  // a worker may take a range's blocks together
  BlockQuantum through_hdf5{1, 100, true};  // HDF5's chunk cache holds a row: workers go through it together
  through_hdf5.hdf5_cache = true;
  CHECK_FALSE(plan_blocks(3, 10000, 7, 8, budget, through_hdf5).id_ranges_together);
  for (std::size_t b = 1; b < plan.blocks.size(); ++b)
    CHECK(plan.blocks[b].ids.begin >= plan.blocks[b - 1].ids.begin);
}

TEST_CASE("odd shapes are covered exactly", "[plan]") {
  for (auto [T, N, K] : {std::tuple<Index, Index, Index>{1, 1, 1}, {7, 1001, 3}, {200, 17, 5}, {1, 99999, 2}})
    for (std::size_t budget : {std::size_t(4096), std::size_t(1) << 16, std::size_t(1) << 26}) {
      CAPTURE(T, N, K, budget);
      check_cover(plan_blocks(T, N, K, 8, budget, {1, 7}));
    }
}

TEST_CASE("a budget too small for one row is an error naming the minimum", "[plan]") {
  CHECK_THROWS_AS(plan_blocks(10, 10, 5, 8, 100), InputError);
  CHECK_THROWS_WITH(plan_blocks(10, 10, 5, 8, 100), Catch::Contains("too small") && Catch::Contains("one id row needs"));
}

TEST_CASE("memory sizes parse strictly", "[plan]") {
  CHECK(parse_bytes("2GiB") == std::size_t(2) << 30);
  CHECK(parse_bytes("512 MiB") == std::size_t(512) << 20);
  CHECK(parse_bytes("1.5G") == std::size_t(1500000000));
  CHECK(parse_bytes("4096") == 4096);
  CHECK_THROWS_WITH(parse_bytes("-1GiB"), Catch::Contains("must be positive"));
  CHECK_THROWS_WITH(parse_bytes("0"), Catch::Contains("must be positive"));
  CHECK_THROWS_WITH(parse_bytes("3 parsecs"), Catch::Contains("unknown unit"));
  CHECK_THROWS_WITH(parse_bytes("lots"), Catch::Contains("not a number"));
  CHECK_THROWS_WITH(parse_bytes("5000TiB"), Catch::Contains("absurd"));
}

TEST_CASE("max_block caps a block below what the budget allows", "[plan]") {
  const std::size_t cap = std::size_t(2) << 20;
  const auto plan = plan_blocks(100, 400000, 5, 8, std::size_t(512) << 20, {1, 26214}, cap);
  CHECK(plan.block_dates == 1);
  CHECK(double(plan.block_ids) * 5 * 8 <= double(cap));
  CHECK(plan.block_ids % 26214 == 0);
  check_cover(plan);
  // multBy (16 MB) stays resident: blocks walk the file in order
  CHECK(plan.multby_resident);
  CHECK_FALSE(plan.id_ranges_together);
  for (std::size_t b = 1; b < plan.blocks.size(); ++b) {
    const auto& p = plan.blocks[b - 1];
    const auto& c = plan.blocks[b];
    CHECK((c.dates.begin > p.dates.begin || (c.dates.begin == p.dates.begin && c.ids.begin == p.ids.end)));
  }
  const auto uncapped = plan_blocks(100, 400000, 5, 8, std::size_t(512) << 20, {1, 26214}, 0);
  CHECK(uncapped.block_ids == 400000);
  CHECK(uncapped.block_dates > 1);
}

TEST_CASE("blocks are made of whole input chunks along dates and ids", "[plan]") {
  const std::size_t budget = std::size_t(512) << 20, cap = std::size_t(2) << 20;
  // h5py's default chunks for (100, 400000, 5) doubles are (2, 12500, 1)
  const auto plan = plan_blocks(100, 400000, 5, 8, budget, {2, 25000}, cap);
  CHECK(plan.block_dates == 2);
  CHECK(plan.block_ids % 25000 == 0);
  for (const auto& b : plan.blocks) {
    CHECK(b.dates.begin % 2 == 0);
    CHECK(b.ids.begin % 25000 == 0);
  }
  check_cover(plan);
  // whole dates: a multiple of the chunk's dates, still several blocks
  const auto whole = plan_blocks(100, 4000, 5, 8, std::size_t(64) << 20, {13, 500});
  CHECK(whole.block_ids == 4000);
  CHECK(whole.block_dates % 13 == 0);
  CHECK(whole.blocks.size() >= 4);
  check_cover(whole);
  // a chunk above the cap but within the budget is one block, not cut
  const auto big = plan_blocks(100, 400000, 5, 8, budget, {4, 100000}, cap);
  CHECK(big.block_dates == 4);
  CHECK(big.block_ids == 100000);
  check_cover(big);
  // a chunk too large for the budget: blocks thinner than it stay inside it
  // (Dask's default chunks for 100 x 400000 x 5 are (100, 33554, 5))
  const auto thin = plan_blocks(100, 400000, 5, 8, std::size_t(256) << 20, {100, 33554}, cap);
  CHECK(thin.block_dates == 100);
  CHECK(thin.block_ids < 33554);
  for (const auto& b : thin.blocks) CHECK(b.ids.begin / 33554 == (b.ids.end - 1) / 33554);
  check_cover(thin);
  // a budget that cannot hold the chunk's dates cuts them rather than fail
  const auto small = plan_blocks(200, 1000, 5, 8, 60000, {200, 100});  // 200 dates of one row: 72 kB
  CHECK(small.block_dates < 200);
  check_cover(small);
  for (auto [T, N, K] : {std::tuple<Index, Index, Index>{7, 1001, 3}, {200, 17, 5}, {5, 99999, 2}})
    for (std::size_t b : {std::size_t(4096), std::size_t(1) << 16, std::size_t(1) << 26}) {
      CAPTURE(T, N, K, b);
      check_cover(plan_blocks(T, N, K, 8, b, {3, 7}));
      check_cover(plan_blocks(T, N, K, 8, b, {3, 7}, 1000));
    }
}

TEST_CASE("LayoutLeft blocks hold many dates, id range by id range", "[plan]") {
  const std::size_t budget = std::size_t(1) << 30, cap = std::size_t(2) << 20;
  // the file-to-file layout deck: 200 x 200000 x 5 doubles, 2 MiB blocks
  const auto left = plan_blocks(200, 200000, 5, 8, budget, {1, 1}, cap, LayoutKind::left);
  const auto right = plan_blocks(200, 200000, 5, 8, budget, {1, 25000}, cap, LayoutKind::right);
  CHECK(left.layout == LayoutKind::left);
  CHECK(right.block_dates == 1);
  CHECK(left.block_dates >= 12);  // runs of many dates for LayoutLeft's contiguous index
  CHECK(double(left.block_dates * left.block_ids) * 5 * 8 <= double(cap));
  CHECK(double(left.block_ids) * 5 * 8 >= double(left_min_run_bytes));  // each date's piece of the file is long
  check_cover(left);
  for (std::size_t b = 1; b < left.blocks.size(); ++b) {  // id-major: a block's dates, then the next ids
    const auto& p = left.blocks[b - 1];
    const auto& c = left.blocks[b];
    CHECK((c.ids.begin > p.ids.begin || (c.ids.begin == p.ids.begin && c.dates.begin == p.dates.end)));
  }
  // all dates where a block of them fits the cap with long pieces
  const auto all = plan_blocks(12, 200000, 5, 8, budget, {1, 1}, cap, LayoutKind::left);
  CHECK(all.block_dates == 12);
  check_cover(all);
  // no cap: all dates, and still several blocks so the stages overlap
  const auto uncapped = plan_blocks(20, 4000, 5, 8, std::size_t(64) << 20, {1, 1}, 0, LayoutKind::left);
  CHECK(uncapped.block_dates == 20);
  CHECK(uncapped.blocks.size() >= 4);
  check_cover(uncapped);
  // whole chunks where they are needed (compressed output, decoded input)
  const auto chunked = plan_blocks(100, 400000, 5, 8, std::size_t(512) << 20, {2, 25000}, cap, LayoutKind::left);
  CHECK(chunked.block_ids % 25000 == 0);
  CHECK(chunked.block_dates % 2 == 0);
  CHECK(chunked.block_dates > 2);
  check_cover(chunked);
  for (auto [T, N, K] : {std::tuple<Index, Index, Index>{1, 1, 1}, {7, 1001, 3}, {200, 17, 5}, {1, 99999, 2}})
    for (std::size_t b : {std::size_t(4096), std::size_t(1) << 16, std::size_t(1) << 26}) {
      CAPTURE(T, N, K, b);
      check_cover(plan_blocks(T, N, K, 8, b, {1, 7}, cap, LayoutKind::left));
    }
}

TEST_CASE("split_blocks shares a plan's blocks among ranks, consecutive and balanced", "[plan][ranks]") {
  const BlockPlan plan = plan_blocks(10, 1000, 5, 8, 64 << 20, {1, 100}, 5 * 8 * 200, LayoutKind::right);
  REQUIRE(plan.blocks.size() == 50);  // 10 dates x 5 blocks of 200 ids
  const auto any = [](const Block&) { return true; };
  SECTION("every block once, in order, about as many in each part") {
    for (const int parts : {1, 2, 3, 4, 7}) {
      const auto ranges = split_blocks(plan, parts, any);
      REQUIRE(int(ranges.size()) == parts);
      CHECK(ranges.front().begin == 0);
      CHECK(ranges.back().end == 50);
      for (int p = 1; p < parts; ++p) CHECK(ranges[std::size_t(p)].begin == ranges[std::size_t(p) - 1].end);
      for (const Range& r : ranges) CHECK(std::abs(double(r.size()) - 50.0 / parts) <= 1.0);
    }
  }
  SECTION("more parts than blocks: the extra parts are empty") {
    const BlockPlan two = plan_blocks(2, 100, 5, 8, 64 << 20, {1, 100}, 0, LayoutKind::right);
    REQUIRE(two.blocks.size() == 1);
    const auto ranges = split_blocks(two, 4, any);
    int nonempty = 0;
    for (const Range& r : ranges) nonempty += r.size() > 0;
    CHECK(nonempty == 1);
    CHECK(ranges.back().end == 1);
  }
  SECTION("parts start where may_start allows (a page boundary) when that is within a tenth of a share") {
    // Blocks that start a date or its third block: 16.7 blocks is the even
    // share, and block 17 (date 3's third) is 0.3 blocks off it.
    const auto ranges = split_blocks(plan, 3, [](const Block& b) { return b.ids.begin == 0 || b.ids.begin == 400; });
    CHECK(ranges[1].begin == 17);
    CHECK(ranges[2].begin == 32);  // 33.3: date 6's third block, 1.3 blocks off (a tenth: 1.67)
  }
  SECTION("balance wins where the nearest allowed start is more than a tenth of a share off") {
    // Only blocks that start a date (every 5th): the even shares of 4 parts
    // are 12.5, 25 and 37.5 blocks, a tenth of a share 1.25 blocks.
    const auto ranges = split_blocks(plan, 4, [](const Block& b) { return b.ids.begin == 0; });
    CHECK(ranges[1].begin == 12);  // 10 and 15 are 2.5 off
    CHECK(ranges[2].begin == 25);  // a date's start, on the share
    CHECK(ranges[3].begin == 37);
  }
  SECTION("where no block may start a part, the nearest block does") {
    const auto ranges = split_blocks(plan, 2, [](const Block&) { return false; });
    CHECK(ranges[1].begin == 25);
  }
}

TEST_CASE("held cells: blocks cut at their edges and run cell by cell", "[plan]") {
  // Cells of input chunks held decoded (2 dates x 700 ids, a date's whole
  // ids, and parts of 500 ids of one-date chunks, two dates in turn): no
  // block reaches into two, and once a cell's blocks are done no later block
  // returns to it, so each is decoded once and let go; cells go in the
  // file's order (dates, then ids), or by groups of dates: ids, then dates.
  for (const std::array<Index, 3> cells :
       {std::array<Index, 3>{2, 700, 1}, std::array<Index, 3>{1, 2003, 1}, std::array<Index, 3>{1, 500, 2}})
    for (const LayoutKind layout : {LayoutKind::right, LayoutKind::left})
      for (std::size_t budget : {std::size_t(1) << 16, std::size_t(1) << 20, std::size_t(1) << 26}) {
        CAPTURE(cells[0], cells[1], cells[2], int(layout), budget);
        BlockQuantum quantum{1, 100};
        quantum.cells = cells;
        const BlockPlan plan = plan_blocks(5, 2003, 5, 8, budget, quantum, 0, layout);
        check_cover(plan);
        CHECK_FALSE(plan.id_ranges_together);  // the cells' order stands: threads take blocks one at a time
        std::vector<std::array<Index, 3>> order;  // (group of dates, cell's ids, cell's dates)
        for (const Block& b : plan.blocks) {
          const std::pair<Index, Index> cell{b.dates.begin / cells[0], b.ids.begin / cells[1]};
          CHECK(cell == std::pair<Index, Index>{(b.dates.end - 1) / cells[0], (b.ids.end - 1) / cells[1]});
          const std::array<Index, 3> at{cell.first / cells[2], cell.second, cell.first};
          if (order.empty() || order.back() != at) {
            CHECK(std::find(order.begin(), order.end(), at) == order.end());
            order.push_back(at);
          }
        }
        CHECK(std::is_sorted(order.begin(), order.end()));
        if (cells[2] == 2 && order.size() > 1) CHECK(order[1] == std::array<Index, 3>{0, 0, 1});  // date 1's first part next
      }
}
