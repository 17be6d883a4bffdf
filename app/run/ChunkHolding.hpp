#pragma once
// How many of an input's large chunks are held decoded at once, out of the
// budget (io/cube/HeldChunks.hpp): two cells (one decoded while the blocks of the
// other run) where they fit beside the blocks' least, else one; where not
// even one fits beside the blocks, the run is refused before any block, with
// the budget that would do and an h5repack line that rechunks the file,
// unless a part of each chunk at a time fits (held_parts).
#include "core/Plan.hpp"
#include "io/input/Input.hpp"

#include <algorithm>
#include <array>
#include <cstddef>
#include <memory>
#include <string>
#include <utility>

namespace cvest::app {

struct ChunkHolding {
  std::size_t cells = 0;          // held at once (0: the input's chunks are not held)
  std::size_t reserved = 0;       // the budget's bytes they and their decoding take
  std::array<Index, 3> cell{0, 0, 1};  // dates and ids of a cell, dates in turn (BlockQuantum::cells)
  std::string text;               // "2 cells of (1, 10000000, 5) held (800 MB with decoding)"
};

// The least the blocks keep of `budget` beside held chunks: a quarter, at
// most 64 MiB (blocks on host spaces are 2 MiB at most).
inline std::size_t blocks_least(std::size_t budget) { return std::min(budget / 4, std::size_t(64) << 20); }
// What one cell of held chunks may take of `budget` beside `reserved`
// (InputFile's held_bytes: over it, HDF5 reads chunks it can).
inline std::size_t held_room(std::size_t budget, std::size_t reserved) {
  return budget > reserved + blocks_least(budget) ? budget - reserved - blocks_least(budget) : 0;
}

// `path`'s input (io::InputFile) opened for a reader within `budget` beside
// `reserved` (what else that holds before blocks): discount's chunks are
// held decoded only where a cell of them fits what the blocks leave
// (held_room); over it, HDF5 reads the chunks it can. The rest as
// io::InputFile's constructor. A run's plan and verification open theirs so.
std::unique_ptr<const io::InputFile> open_input_within(const std::string& path, const std::string& multby,
                                                       const std::string& discount, std::size_t chunk_cache_bytes,
                                                       DirectMode reads, const std::string& reads_because,
                                                       std::size_t budget, std::size_t reserved);

// Where two cells of whole chunks do not fit `room` and they decode in
// parts (deflate, Blosc, bitshuffle, unfiltered: io/codecs/ChunkStream.hpp):
// the most ids of a part (a divisor of the chunk's ids) of which a cell per
// thread and one more (each thread decoding a date's part while the blocks
// of another run), else two, else one fit, and that count; {0, 0} where
// none of least_part_bytes does. Parts of most_part_bytes at most: larger
// ones were no faster at 10,000,000 ids (docs/benchmarks.md), only larger.
constexpr std::size_t least_part_bytes = std::size_t(256) << 10, most_part_bytes = std::size_t(64) << 20;
// `multiple_of`: a deck's output chunk_ids the parts' ids must be a
// multiple of (blocks stay inside both; 0: any).
std::pair<Index, int> held_parts(const io::HeldChunk& h, double room, int threads, Index multiple_of = 0);

// For `input` read at `precision` within `budget` bytes (`dataset` names it
// in the refusal); the input is told how many to hold. InputError where one
// cell does not fit.
// `budget`: memory_budget; `reserved`: what else it holds before blocks;
// `threads`: the host threads that read blocks.
// `chunk_ids`: the deck's output chunk_ids (0: cvest's own), which parts keep whole.
ChunkHolding hold_chunks(const io::InputFile& input, Precision precision, std::size_t budget, std::size_t reserved,
                         const std::string& dataset, int threads, Index chunk_ids = 0);

// The output chunk's ids where blocks stay inside cells of `cell_ids` ids
// (fewer than N): a divisor of the cell's ids, the largest up to twice
// cvest's default (`wanted`).
Index output_chunk_ids_in_cells(Index cell_ids, Index wanted);

}  // namespace cvest::app
