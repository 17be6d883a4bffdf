#pragma once
// The block plan: the cube cut into (date range, id range) blocks that fit a
// memory budget. A plain list any worker can be handed, in the order one
// worker runs it.
#include "core/Names.hpp"

#include <array>
#include <cmath>
#include <cstddef>
#include <string>
#include <vector>

namespace cvest {

struct Range {
  Index begin = 0, end = 0;  // [begin, end)
  Index size() const { return end - begin; }
};

struct Block {
  Range dates, ids;
};

struct BlockPlan {
  Index T = 0, N = 0, K = 0;
  LayoutKind layout = LayoutKind::right;  // the layout its blocks are computed in
  std::size_t element_size = 8;
  // multBy is small enough (at most a quarter of the budget) to be read once
  // and kept whole: blocks then go date by date through the file, in file
  // order. Otherwise id blocks are outermost, each reading its multBy rows once.
  bool multby_resident = false;
  bool multby_reserved = false;  // resident, its memory reserved outside the blocks' budget (BlockQuantum::multby_kept)
  // An id range's blocks follow each other (multBy not resident, no held
  // cells ordering them, no HDF5 chunk cache shared by the workers), so one
  // worker may take them together and read the range's multBy rows once
  // (core/pipeline/BlockRuns.hpp).
  bool id_ranges_together = false;
  Index block_dates = 0, block_ids = 0;  // the largest block's extents
  std::size_t buffer_bytes = 0;          // what the pipeline allocates for them
  std::vector<Block> blocks;
};

// The plan of `plans` for `layout` (a run keeps one per layout of its deck);
// std::logic_error where there is none.
const BlockPlan& plan_for(const std::vector<BlockPlan>& plans, LayoutKind layout);

// How many block-sized buffers the pipeline holds at once: two discount and
// two cv slots in host staging (one being read or written while the other is
// computed), two sets of discount + cv in the compute space (the staged path
// copies block k+1 in while block k computes), and one to check a job
// against the output an earlier job wrote.
inline constexpr std::size_t pipeline_buffers = 9;

// What blocks are made of: whole input chunks (dates) and whole output
// chunks (ids, a multiple of the input chunk's ids where cvest chooses).
struct BlockQuantum {
  Index dates = 1, ids = 1;
  // Blocks in id-major order even with a resident multBy: a chunk cache then
  // finishes one row of chunks (all their dates) before the next.
  bool ids_outer = false;
  // Blocks HDF5 reads through its chunk cache, sized for a row of chunks:
  // workers go through a row together (a worker per id range would need a
  // row each, and each block would decode its chunks again).
  bool hdf5_cache = false;
  // Cells of held input chunks (dates, ids; 0: none, io/cube/HeldChunks.hpp):
  // blocks are cut at their edges and go cell by cell, so each cell's
  // chunks are decoded once and let go before the cell after next. The
  // third: cells of so many dates in turn (parts of chunks decoded as
  // streams: the same part of each date's chunk, then the next part, so
  // that threads decode different chunks at once); 1: the file's order.
  std::array<Index, 3> cells{0, 0, 1};
  // multBy read once and kept whatever its size, its memory reserved by the
  // caller (its chunks would be decoded whole again for every block).
  bool multby_kept = false;
};

// What blocks are made of, from the chunks on both sides (one rule for a
// run's jobs and for verification). Chunks HDF5 reads itself: `hdf5_row`
// (ids > 0; io/input/ChunkCache.hpp), blocks inside a row of them. Otherwise whole
// chunks cvest decodes (`decoded`: its dates and ids, 0 where it decodes
// none), and ids in whole output chunks where `output_chunk_ids` > 0: blocks
// aligned with both. LayoutRight blocks and a compressed output's take whole
// output chunks; LayoutLeft blocks are id ranges over many dates, which whole
// output chunks would make as large as a chunk times the dates, so where the
// output is plain they pass 0 and take any id range at its offsets.
BlockQuantum block_quantum(BlockQuantum hdf5_row, std::array<Index, 2> decoded, Index output_chunk_ids,
                           std::array<Index, 3> held_cells = {0, 0, 1});

// LayoutRight (the file's own order): plans blocks of whole dates when one
// date's N x K slab fits; otherwise blocks of one date and as many ids as
// fit. LayoutLeft: a block's contiguous index is the date, so blocks hold
// many dates (all of them where the budget allows) and as many ids as fit,
// id range by id range; each date's part of a block is still at least
// left_min_run_bytes of the file, so reads and writes stay long. `quantum` rounds blocks down to
// whole chunks: dates in steps of quantum.dates (a block is never shorter
// unless the budget cannot hold that many dates of one row), ids to a
// multiple of quantum.ids. `max_block_bytes` (0: none) caps one block's
// discount buffer below what the budget allows: on host spaces blocks that
// stay in cache between the read, the kernel and the write are faster. A
// block of one whole quantum is kept even above the cap: cutting chunks
// costs more (each cut chunk is decoded or compressed twice). Throws
// InputError when not even one id row (K values) fits, naming the budget and
// the minimum.
BlockPlan plan_blocks(Index T, Index N, Index K, std::size_t element_size, std::size_t budget_bytes,
                      BlockQuantum quantum = {}, std::size_t max_block_bytes = 0,
                      LayoutKind layout = LayoutKind::right);

// A plan's blocks shared among `parts` workers (the ranks of a distributed
// run): part p runs blocks [ranges[p].begin, ranges[p].end), consecutive in
// the plan's order (so in the file's order for LayoutRight), with about as
// many elements in each part. A part starts at a block that `may_start`
// accepts (e.g. one whose bytes begin a file page), the nearest such block
// to the even share, unless that puts the part's start more than a tenth of
// a share off the even share where another block would not: then at the
// nearest block (balance wins over alignment). Parts beyond the blocks are
// empty.
template <class MayStart>
std::vector<Range> split_blocks(const BlockPlan& plan, int parts, MayStart&& may_start);

// The shortest contiguous piece of one date a LayoutLeft block reads and
// writes (its ids x K values), where the budget allows. Each piece is a
// pread or pwrite of its own (about 2 us each on this VM, and an 84 KB
// piece read at 0.8x the speed of a 2 MiB one). 1.6 GB (200 x 200000 x 5)
// in 2 MiB LayoutLeft blocks computed tile by tile, 7 interleaved rounds:
// left/right 1.34 with 82 KiB pieces (25 dates a block), 1.27 with 171 KiB
// (12 dates), 1.34 with 341 KiB (6 dates: the transposes' runs of dates
// get short).
inline constexpr std::size_t left_min_run_bytes = std::size_t(128) << 10;

// Makes every allocation of 4 MiB or more its own mapping, returned to the
// system when freed. glibc otherwise raises its mapping threshold to the
// largest block freed so far (up to 32 MiB), after which blocks come from the
// heap and stay there: a multi-job deck under memory_budget = "256MiB" grew
// 280 -> 331 MiB of RSS job by job. Not lower: the codecs' libraries
// allocate their working memory per call (c-blosc's contexts, zstd's tables
// of 1-4 MiB), which as mappings of their own, or a heap trimmed at every
// free (glibc's 128 KiB default once the threshold is fixed), were faulted
// in again each call: 1 MiB and no trim coded Blosc's zstd at 0.12 GB/s and
// lz4 at 2.4 GB/s on 2 threads, 4 MiB with 8 MiB kept at 0.34 and 3.9 (the
// dynamic default's speed). At most two arenas, each keeping that much
// (core/Plan.cpp). Call once, first thing in a process.
void return_freed_buffers_to_the_system();

// "2GiB", "512 MiB", "1.5G", "100000000" -> bytes. Throws InputError.
std::size_t parse_bytes(const std::string& text);
std::string format_bytes(double bytes);

template <class MayStart>
std::vector<Range> split_blocks(const BlockPlan& plan, int parts, MayStart&& may_start) {
  const Index n = Index(plan.blocks.size());
  std::vector<double> before(std::size_t(n) + 1, 0.0);  // elements of the blocks before block j
  for (Index j = 0; j < n; ++j) {
    const Block& b = plan.blocks[std::size_t(j)];
    before[std::size_t(j) + 1] = before[std::size_t(j)] + double(b.dates.size() * b.ids.size());
  }
  const double share = before[std::size_t(n)] / parts;
  std::vector<Index> starts{0};
  for (int p = 1; p < parts; ++p) {
    const double target = share * p;
    const auto off = [&](Index j) { return std::abs(before[std::size_t(j)] - target); };
    Index aligned = -1, nearest = -1;  // the nearest start `may_start` accepts, and the nearest at all
    for (Index j = starts.back(); j <= n; ++j) {
      if (nearest < 0 || off(j) < off(nearest)) nearest = j;
      const bool accepted = j == 0 || j == n || may_start(plan.blocks[std::size_t(j)]);
      if (accepted && (aligned < 0 || off(j) < off(aligned))) aligned = j;
      if (before[std::size_t(j)] >= target && aligned >= 0 && before[std::size_t(aligned)] >= target) break;
    }
    const Index chosen = aligned >= 0 && (off(aligned) <= 0.1 * share || off(aligned) <= off(nearest)) ? aligned : nearest;
    starts.push_back(std::max(chosen, starts.back()));
  }
  starts.push_back(n);
  std::vector<Range> ranges;
  for (int p = 0; p < parts; ++p) ranges.push_back({starts[std::size_t(p)], starts[std::size_t(p) + 1]});
  return ranges;
}

}  // namespace cvest
