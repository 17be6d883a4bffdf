#pragma once
// Which blocks one per-thread pipeline thread takes together. Where blocks
// read their id range's multBy rows (multBy not resident) and the plan lists
// an id range's date blocks one after the other, a thread taking them one
// at a time from a shared counter shared each id range with the others, and
// each thread read the range's rows again: a cold 4 x 10,000,000 x 5 input of
// one-date chunks read 2.44 GB from the disk for 2.0 GB of file (multBy
// twice, docs/benchmarks.md). A thread takes a whole run of them instead,
// reading the rows once. Runs are cut so that there are at least
// runs_per_thread for each thread, so the last ones end close together.
#include "core/Plan.hpp"

#include <algorithm>
#include <atomic>
#include <cstdint>
#include <utility>
#include <vector>

namespace cvest::pipeline_detail {

inline constexpr int runs_per_thread = 16;

// The first block of each run, then the number of blocks: run r is blocks
// [starts[r], starts[r + 1]). `together`: blocks of one id range may run
// together (BlockPlan::id_ranges_together, and multBy read by rows);
// otherwise every block is a run.
inline std::vector<int> block_runs(const std::vector<Block>& blocks, bool together, int threads) {
  const int n = int(blocks.size());
  std::vector<int> ranges{0};  // where each id range's blocks begin
  for (int b = 1; b < n && together; ++b)
    if (blocks[std::size_t(b)].ids.begin != blocks[std::size_t(b) - 1].ids.begin) ranges.push_back(b);
  std::vector<int> starts;
  if (!together || n == 0) {
    for (int b = 0; b <= n; ++b) starts.push_back(b);
    return starts;
  }
  ranges.push_back(n);
  const int count = int(ranges.size()) - 1, want = runs_per_thread * std::max(threads, 1);
  const int pieces = (want + count - 1) / count;  // of each range, so that there are enough runs
  for (int r = 0; r < count; ++r) {
    const int first = ranges[std::size_t(r)], len = ranges[std::size_t(r) + 1] - first, cuts = std::min(len, pieces);
    for (int p = 0; p < cuts; ++p) starts.push_back(first + int(std::int64_t(p) * len / cuts));  // even pieces
  }
  starts.push_back(n);
  return starts;
}

// Runs handed out to threads in the plan's order; each thread walks its run
// block by block. take() returns the block count when none is left.
class RunTaker {
 public:
  explicit RunTaker(std::vector<int> starts) : starts_(std::move(starts)) {}
  struct Cursor {
    int next = 0, end = 0;
  };
  int take(Cursor& c) {
    if (c.next < c.end) return c.next++;
    const int r = next_run_++;
    if (r + 1 >= int(starts_.size())) return starts_.back();
    c.next = starts_[std::size_t(r)], c.end = starts_[std::size_t(r) + 1];
    return c.next++;
  }
  int runs() const { return int(starts_.size()) - 1; }

 private:
  std::vector<int> starts_;
  std::atomic<int> next_run_{0};
};

}  // namespace cvest::pipeline_detail
