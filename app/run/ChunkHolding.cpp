#include "app/run/ChunkHolding.hpp"

#include "core/Errors.hpp"
#include <fmt/format.h>

#include <algorithm>
#include <cmath>

namespace cvest::app {

namespace {

// `use(q)` for each divisor q of n (each once, in no order).
template <class Use>
void for_each_divisor(Index n, const Use& use) {
  for (Index d = 1; d * d <= n; ++d)
    if (n % d == 0) {
      use(d);
      if (d != n / d) use(n / d);
    }
}

}  // namespace

std::unique_ptr<const io::InputFile> open_input_within(const std::string& path, const std::string& multby,
                                                       const std::string& discount, std::size_t chunk_cache_bytes,
                                                       DirectMode reads, const std::string& reads_because,
                                                       std::size_t budget, std::size_t reserved) {
  return std::make_unique<const io::InputFile>(path, multby, discount, chunk_cache_bytes, reads, reads_because,
                                               held_room(budget, reserved));
}

ChunkHolding hold_chunks(const io::InputFile& input, Precision precision, std::size_t budget, std::size_t reserved,
                         const std::string& dataset, int threads, Index chunk_ids) {
  ChunkHolding holding;
  const io::HeldChunk h = input.held_chunk(precision);
  if (h.bytes == 0) return holding;
  const double room = double(held_room(budget, reserved));
  const int cells = h.holding_bytes(2, threads) <= room ? 2 : h.holding_bytes(1, threads) <= room ? 1 : 0;
  const auto& s = input.shape();
  const std::string shape = fmt::format("({}, {}, {})", h.dates, h.ids, h.cols);
  if (cells < 2) {
    // Parts of two cells or more before one whole one: decoded ahead while
    // blocks run, by several threads at once, in a fraction of the memory.
    const auto [part_ids, part_cells] = held_parts(h, room, threads, chunk_ids);
    if (part_ids > 0 && (cells == 0 || part_cells >= 2)) {
      holding.cells = std::size_t(part_cells);
      holding.reserved = std::size_t(h.part_holding_bytes(part_cells, part_ids));
      holding.cell = {h.dates, part_ids, part_cells > 2 ? Index(part_cells - 1) : 1};
      holding.text = fmt::format("{} part{} of {} ids of {} chunk{} {} held decoded at once, each chunk decoded in "
                                 "{} parts ({} with decoding)", part_cells, part_cells == 1 ? "" : "s", part_ids,
                                 h.per_cell, h.per_cell == 1 ? "" : "s", shape, h.ids / part_ids,
                                 format_bytes(double(holding.reserved)));
      input.hold(precision, holding.cells, part_ids);
      return holding;
    }
  }
  if (cells == 0) {
    // The least budget whose room (held_room) holds a cell: the blocks
    // keep a quarter of it up to 256 MiB, 64 MiB above.
    const double cell = h.holding_bytes(1, threads) + double(reserved);
    const double needed = 4.0 * cell / 3.0 <= double(256 << 20) ? 4.0 * cell / 3.0 : cell + double(64 << 20);
    const Index ids = io::cube_chunk(s.N, s.K, element_size(s.precision))[1];
    throw InputError(fmt::format(
        "{}: dataset '{}' is stored in chunks of {} ({} decoded{}), each decoded once and held while its blocks "
        "run: that takes {} with its decoding, and memory_budget {} holds none beside the blocks; memory_budget = "
        "\"{}MiB\" reads it, or rechunk the file: h5repack -l {}:CHUNK=1x{}x{} {} rechunked.h5",
        input.path(), dataset, shape, format_bytes(double(h.bytes)), h.per_cell > 1 ? fmt::format(", {} across the "
        "columns", h.per_cell) : std::string(), format_bytes(h.holding_bytes(1, threads)), format_bytes(double(budget)),
        std::ceil(needed / double(1 << 20)), dataset, ids, s.K, input.path()));
  }
  holding.cells = std::size_t(cells);
  holding.reserved = std::size_t(h.holding_bytes(cells, threads));
  holding.cell = {h.dates, h.ids, 1};
  holding.text = fmt::format("{} cell{} of {} chunk{} {} held decoded at once ({} with decoding)", cells,
                             cells == 1 ? "" : "s", h.per_cell, h.per_cell == 1 ? "" : "s", shape,
                             format_bytes(double(holding.reserved)));
  input.hold(precision, holding.cells);
  return holding;
}

std::pair<Index, int> held_parts(const io::HeldChunk& h, double room, int threads, Index multiple_of) {
  if (!h.stream_bytes || h.dates != 1) return {0, 0};
  const std::size_t id_bytes = h.bytes / std::size_t(h.ids);
  for (const int cells : {std::max(threads, 1) + 1, 2, 1}) {
    Index best = 0;
    for_each_divisor(h.ids, [&](Index q) {
      if (q < h.ids && q > best && std::size_t(q) * id_bytes <= most_part_bytes &&
          (multiple_of <= 0 || q % multiple_of == 0) && h.part_holding_bytes(cells, q) <= room)
        best = q;
    });
    if (best > 0 && std::size_t(best) * id_bytes >= least_part_bytes) return {best, cells};
  }
  return {0, 0};
}

Index output_chunk_ids_in_cells(Index cell_ids, Index wanted) {
  // The largest divisor up to twice the default; where the cell's ids have
  // only small ones (a prime), the cell's own ids (one output chunk a cell).
  Index best = 1;
  for_each_divisor(cell_ids, [&](Index q) {
    if (q <= 2 * wanted) best = std::max(best, q);
  });
  return best * 4 >= wanted ? best : cell_ids;
}

}  // namespace cvest::app
