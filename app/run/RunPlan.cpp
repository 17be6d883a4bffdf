#include "app/run/RunPlan.hpp"

#include "app/run/ChunkHolding.hpp"
#include "core/Errors.hpp"
#include "core/Policies.hpp"
#include "core/Spaces.hpp"
#include "core/Version.hpp"
#include "core/pipeline/Pipeline.hpp"
#include "io/input/ChunkCache.hpp"
#include "io/os/Disk.hpp"
#include "io/os/FileIdentity.hpp"
#include "app/tune/WriteModes.hpp"

#include <fmt/format.h>
#include <fmt/ostream.h>

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <filesystem>
#include <ostream>
#include <utility>

#include <sys/stat.h>

namespace cvest::app {

namespace {

std::string_view numpy_name(Precision p) { return p == Precision::f64 ? "float64" : "float32"; }

// How the input is read: [input] direct, where auto takes what cvest tune
// measured or the stated default; a budget too small to hold the direct
// reader's buffers within an eighth of it reads through the page cache.
bool room_for_direct_reads(const Deck& deck) { return deck.run.memory_budget >= 8 * io::direct_read_memory; }

DirectMode reads_mode(const Deck& deck, std::string& because) {
  if (deck.input.direct == DirectMode::automatic && !room_for_direct_reads(deck)) {
    because = fmt::format("memory_budget below {} leaves no room for direct reads' buffers",
                          format_bytes(8.0 * double(io::direct_read_memory)));
    return DirectMode::off;
  }
  return choose_direct_reads(deck.input.direct, because,
                                 (std::filesystem::path(deck.input.file).parent_path() / ".").string());
}

// The direct writer's aligned copies, within the budget, wherever it may
// write direct: decided from the deck alone, so every rank and every run of
// the deck plans the same blocks (auto's choice reads the host's free
// memory, which differs). The input reader's aligned buffers, where it may
// read direct (an eighth of the budget at most, as the writer's copies;
// reads_mode).
void reserve_direct_memory(const Deck& deck, RunPlan& plan) {
  if (deck.output.compression.kind == Compression::none && deck.output.direct != DirectMode::off)
    plan.direct_memory = io::direct_write_memory(deck.run.memory_budget);
  if (deck.input.direct == DirectMode::on ||
      (deck.input.direct == DirectMode::automatic && room_for_direct_reads(deck)))
    plan.read_memory = std::min(io::direct_read_memory, deck.run.memory_budget / 8);
}

// Opens the input (the deck's generate spec in its place where it is not on
// disk yet): its shape, the run's precision, and a chunk cache that holds a
// row of chunks HDF5 reads (HDF5's cache, or cvest's decoding scratch in its
// place: an eighth of the budget, at most 256 MiB, unless such a row needs more).
io::ChunkRow open_input(const Deck& deck, bool input_on_disk, RunPlan& plan, std::ostream& progress) {
  io::ChunkRow row;
  if (!input_on_disk) {
    const auto& g = *deck.input.generate;
    plan.shape = {g.dates, g.ids, g.cols, g.precision, g.precision};
  } else {
    const std::size_t default_cache = std::min<std::size_t>(deck.run.memory_budget / 8, std::size_t(256) << 20);
    std::string because;
    const DirectMode reads = reads_mode(deck, because);
    auto input = open_input_within(deck.input.file, deck.input.multby, deck.input.discount, default_cache, reads,
                                   because, deck.run.memory_budget, plan.reserved_memory());
    plan.shape = input->shape();
    row = io::fit_chunk_cache(input, deck.run.precision.value_or(plan.shape.promoted()), deck.run.memory_budget,
                              default_cache, Kokkos::DefaultHostExecutionSpace().concurrency(), progress);
    plan.input = std::move(input);
  }
  plan.precision = deck.run.precision.value_or(plan.shape.promoted());
  return row;
}

// A chosen precision narrower than an input: said once (NumPy's
// multBy[None] * discount would give the wider type).
void note_narrowing(const Deck& deck, const RunPlan& plan, std::ostream& progress) {
  for (const auto& [name, p] : {std::pair{deck.input.multby, plan.shape.multby_precision},
                                std::pair{deck.input.discount, plan.shape.precision}})
    if (element_size(plan.precision) < element_size(p))
      fmt::print(progress, "cvest: note: [run] precision = \"{}\" narrows {} '{}' ({}) to {}; NumPy's multBy[None] * "
                           "discount would be {}\n", to_string(plan.precision), deck.input.file, name, numpy_name(p),
                 numpy_name(plan.precision), numpy_name(plan.shape.promoted()));
}

// discount's storage (as generate_input writes it, for an input still to be
// generated); datasets this HDF5 cannot decode are refused here.
void plan_input_storage(const Deck& deck, RunPlan& plan, std::ostream& progress) {
  if (plan.input) {
    plan.input_storage = plan.input->discount_storage(plan.precision);
  } else {
    plan.input_storage.layout = StorageLayout::chunked;
    plan.input_storage.chunk = {1, io::cube_chunk(plan.shape.N, plan.shape.K, element_size(plan.shape.precision))[1],
                                plan.shape.K};
    plan.input_storage.read_by = plan.precision == plan.shape.precision ? ReadBy::pread : ReadBy::hdf5;
  }
  fmt::print(progress, "cvest: {} '{}': {}\n", deck.input.file, deck.input.discount, to_text(plan.input_storage));
  const auto refuse_unreadable = [&](const io::CubeStorage& storage, const std::string& dataset) {
    if (storage.read_by == ReadBy::none)
      throw InputError(fmt::format(
          "{}: dataset '{}' is stored with {}, which this HDF5 cannot decode (a plugin on HDF5_PLUGIN_PATH can add "
          "it); cvest decodes deflate, lzf and shuffle itself, at the file's own precision ({}) in chunks that fit an "
          "eighth of memory_budget", deck.input.file, dataset, storage.unreadable, to_string(plan.shape.precision)));
  };
  refuse_unreadable(plan.input_storage, deck.input.discount);
  if (plan.input) refuse_unreadable(plan.input->multby_storage(plan.precision), deck.input.multby);
}

// The output's chunks: the deck's ids, else about 1 MiB; where cvest decodes
// the input's chunks itself (a whole chunk at a time), whole input chunks,
// so blocks align with both and decode each chunk once.
Index output_chunk_ids(const Deck& deck, const RunPlan& plan, std::array<Index, 2> decoded,
                       const ChunkHolding& holding) {
  const Index N = plan.shape.N;
  Index ids = deck.output.chunk_ids > 0 ? std::min(deck.output.chunk_ids, N)
                                        : io::cube_chunk(N, plan.shape.K, element_size(plan.precision))[1];
  // Blocks stay inside held cells: output chunks too, where cells are
  // narrower than N (the deck's own are kept where they divide a cell's
  // ids; plan_layouts refuses others).
  if (holding.cell[1] > 0 && holding.cell[1] < N && deck.output.chunk_ids == 0)
    return output_chunk_ids_in_cells(holding.cell[1], ids);
  if (decoded[1] > 0 && deck.output.chunk_ids == 0)
    ids = std::min(N, decoded[1] * std::max<Index>(1, (ids + decoded[1] / 2) / decoded[1]));
  return ids;
}

void plan_layouts(const Deck& deck, const io::ChunkRow& row, std::array<Index, 2> decoded, Index chunk_ids,
                  const std::array<Index, 3> held_cells, RunPlan& plan, std::ostream& progress) {
  const std::size_t max_block = deck.run.max_block.value_or(policy::default_block_bytes<ExecSpace>);
  const auto& s = plan.shape;
  for (const LayoutKind layout : deck.run.layouts) {
    const bool whole_output_chunks = layout == LayoutKind::right || deck.output.compression.kind != Compression::none;
    // Blocks of whole output chunks stay inside held cells only where those
    // chunks end where cells do (a block reaching into the next cell would
    // need both held at once).
    if (whole_output_chunks && held_cells[1] > 0 && held_cells[1] < s.N && held_cells[1] % chunk_ids != 0)
      throw InputError(fmt::format("{}: [output] chunk_ids = {} does not divide {}'s chunks of {} ids along "
                                   "'{}', which are held decoded one cell at a time; choose a divisor of {}",
                                   deck.path, chunk_ids, deck.input.file, held_cells[1], deck.input.discount,
                                   held_cells[1]));
    BlockQuantum quantum = block_quantum(row.quantum, decoded, whole_output_chunks ? chunk_ids : 0, held_cells);
    quantum.multby_kept = plan.multby_memory > 0;
    plan.blocks.push_back(plan_blocks(s.T, s.N, s.K, element_size(plan.precision),
                                      deck.run.memory_budget - row.cache_bytes - plan.reserved_memory(), quantum,
                                      max_block, layout));
    const BlockPlan& p = plan.blocks.back();
    fmt::print(progress, "cvest: {} x {} x {} {}, {}: {} blocks of up to {} dates x {} ids ({} of buffers)\n", s.T,
               s.N, s.K, to_string(plan.precision), kokkos_name(layout), p.blocks.size(), p.block_dates, p.block_ids,
               format_bytes(double(p.buffer_bytes)));
  }
}

// Tiny blocks (a budget of kilobytes): each costs a read, a kernel launch
// and a write, whatever its size, so the run crawls. Say so, and what a
// budget that gives blocks of about a MiB would be.
void warn_tiny_blocks(const Deck& deck, const RunPlan& plan, std::ostream& progress) {
  const BlockPlan& smallest = *std::min_element(plan.blocks.begin(), plan.blocks.end(), [](const auto& a, const auto& b) {
    return a.block_dates * a.block_ids < b.block_dates * b.block_ids;
  });
  const double es = double(element_size(plan.precision)), K = double(plan.shape.K);
  const double block_bytes = double(smallest.block_dates * smallest.block_ids) * K * es;
  constexpr double tiny_block = 64 << 10;
  if (block_bytes < tiny_block && smallest.blocks.size() > 64) {
    const double suggested = std::max(16.0 * (1 << 20), 4.0 * 2.0 * double(plan.shape.N) * K * es);
    fmt::print(progress, "cvest: warning: memory_budget {} cuts the cube into {} blocks of {} ({} dates x {} ids); "
                         "each block costs a read, a kernel launch and a write, so this runs far below the machine's "
                         "speed; memory_budget = \"{}MiB\" or more gives blocks of about 1 MiB\n",
               format_bytes(double(deck.run.memory_budget)), smallest.blocks.size(), format_bytes(block_bytes),
               smallest.block_dates, smallest.block_ids, std::ceil(suggested / (1 << 20)));
  }
}

// Each rank's share of each plan: consecutive blocks, about as many elements
// each, starting where the output's bytes start a page (chunks are
// page-aligned: output_page_bytes) so no two ranks write one page.
void share_among_ranks(const Ranks& ranks, Index chunk_ids, RunPlan& plan, std::ostream& progress) {
  const std::size_t row_bytes = std::size_t(plan.shape.K) * element_size(plan.precision);
  for (const BlockPlan& p : plan.blocks)
    plan.rank_blocks.push_back(split_blocks(p, ranks.size(), [&](const Block& b) {
      return (std::size_t(b.ids.begin % chunk_ids) * row_bytes) % io::output_page_bytes == 0;
    }));
  if (ranks.size() > 1) {
    const int threads = Kokkos::DefaultExecutionSpace().concurrency();  // as build_facts() counts them
    fmt::print(progress, "cvest: {} ranks ({} on this node), {} thread{} each; each runs its share of every job's "
                         "blocks\n", ranks.size(), ranks.local_size(), threads, threads == 1 ? "" : "s");
  }
}

// What the first job writes; where the deck journals it, what a killed run's
// journal must match to be resumed: the input (its identity on disk), the
// datasets, the output's shape, type and chunks.
io::OutputSpec output_spec(const Deck& deck, const RunPlan& plan, Index chunk_ids, const Ranks& ranks) {
  io::OutputSpec out;
  const auto& s = plan.shape;
  out.path = deck.output.file;
  out.dataset = deck.output.dataset;
  out.T = s.T, out.N = s.N, out.K = s.K;
  out.precision = plan.precision;
  out.compression = deck.output.compression;
  out.chunk_ids = chunk_ids;
  out.overwrite = deck.output.overwrite;
  out.direct = deck.output.direct;
  out.direct_memory = plan.direct_memory;
  if (!deck.output.journal || !plan.input) return out;
  const io::FileIdentity in = io::FileIdentity::of(deck.input.file);
  struct stat st {};
  ::stat(deck.input.file.c_str(), &st);
  out.fingerprint = {
      {"cvest", CVEST_VERSION},
      {"input", fmt::format("{} (device {}, inode {}, {} bytes, modified {}.{:09})", deck.input.file, in.device,
                            in.inode, st.st_size, st.st_mtim.tv_sec, st.st_mtim.tv_nsec)},
      {"datasets", deck.input.multby + ", " + deck.input.discount},
      {"output", fmt::format("'{}' {} x {} x {} {}, chunks of {} ids", deck.output.dataset, s.T, s.N, s.K,
                             to_string(plan.precision), chunk_ids)}};
  out.resume = deck.output.resume;
  out.rank = ranks.rank();
  out.ranks = ranks.size();
  return out;
}

// CVEST_READ_AHEAD=0 turns reading ahead off (to measure what it gives).
bool read_ahead_allowed() {
  const char* value = std::getenv("CVEST_READ_AHEAD");
  if (!value || !*value) return true;
  const std::string v = value;
  if (v != "0" && v != "1") throw InputError("CVEST_READ_AHEAD: expected 0 or 1, found '" + v + "'");
  return v == "1";
}

// Each job's pipeline, decided once: per_thread where the deck asks for it
// or it applies (auto), else overlapped. The per-thread pipeline's threads
// read ahead where the input is read past the page cache (each read waits
// on the device) and the budget holds the second buffers for as many threads
// (`may_read_ahead`: CVEST_READ_AHEAD's answer).
JobPlan job_plan(const Deck& deck, const RunPlan& plan, Strategy strategy, LayoutKind layout, bool may_read_ahead) {
  JobPlan job;
  job.strategy = strategy;
  job.layout = layout;
  std::string why_not;
  const std::size_t budget = deck.run.memory_budget - plan.reserved_memory();
  const int threads = per_thread_threads(plan.plan(layout), budget, strategy, layout, true, why_not);
  if (deck.run.pipeline == PipelineKind::per_thread && threads == 0)
    throw InputError(fmt::format("{}: [run] pipeline = \"per_thread\" does not apply to {}/{}: {}", deck.path,
                                 to_string(strategy), to_string(layout), why_not));
  job.pipeline_threads = deck.run.pipeline == PipelineKind::overlapped ? 0 : threads;
  job.pipeline = job.pipeline_threads > 0 ? PipelineKind::per_thread : PipelineKind::overlapped;
  job.read_ahead = may_read_ahead && job.pipeline_threads > 0 && plan.input &&
                   plan.input->reads_direct(plan.precision) &&
                   per_thread_threads(plan.plan(layout), budget, strategy, layout, true, why_not, true) == threads;
  return job;
}

}  // namespace

const BlockPlan& RunPlan::plan(LayoutKind layout) const { return plan_for(blocks, layout); }

BlockPlan RunPlan::share(LayoutKind layout, int rank) const {
  const BlockPlan& whole = plan(layout);
  BlockPlan mine = whole;
  const Range r = rank_blocks[std::size_t(&whole - blocks.data())][std::size_t(rank)];
  mine.blocks.assign(whole.blocks.begin() + r.begin, whole.blocks.begin() + r.end);
  return mine;
}

// multBy in chunks that reading its rows a block at a time would decode
// whole again for every block (Dask's to_hdf5 of an (N, K) array: one
// 400 MB gzip chunk; 9 minutes for one job and counting): read once and kept,
// staged and in the compute space, within the budget; else refused at once.
static void keep_multby(const Deck& deck, RunPlan& plan) {
  if (!plan.input || !plan.input->multby_rereads(plan.precision)) return;
  const auto& s = plan.shape;
  const double bytes = 2.0 * double(s.N * s.K) * double(element_size(plan.precision));
  const std::size_t budget = deck.run.memory_budget;
  const double least = double(plan.reserved_memory()) + bytes + double(blocks_least(budget));
  if (least > double(budget)) {
    const auto chunk = plan.input->multby_storage(plan.precision).chunk;
    throw InputError(fmt::format(
        "{}: dataset '{}' is stored in chunks of ({}) that reading its rows a block at a time would decode whole "
        "again for every block, so it is read once and kept: that takes {} beside the blocks, and memory_budget {} "
        "does not hold it; memory_budget = \"{}MiB\" reads it, or rechunk the file: h5repack -l {}:CHUNK={}x{} {} "
        "rechunked.h5", deck.input.file, deck.input.multby, fmt::join(chunk, ", "), format_bytes(bytes),
        format_bytes(double(budget)), std::ceil(least / double(1 << 20)), deck.input.multby,
        io::cube_chunk(s.N, s.K, element_size(s.precision))[1], s.K, deck.input.file));
  }
  plan.multby_memory = std::size_t(bytes);
}

RunPlan plan_run(const Deck& deck, const Ranks& ranks, bool input_on_disk, std::ostream& progress) {
  RunPlan plan;
  ranks.together([&] {
    reserve_direct_memory(deck, plan);
    const io::ChunkRow row = open_input(deck, input_on_disk, plan, progress);
    note_narrowing(deck, plan, progress);
    // Chunks cvest decodes itself whole (dates, ids), 0 where it decodes
    // none or holds them decoded.
    const auto decoded = plan.input ? plan.input->decoded_chunk(plan.precision) : std::array<Index, 2>{0, 0};
    keep_multby(deck, plan);
    if (plan.multby_memory > 0)
      fmt::print(progress, "cvest: {} '{}': chunks too large to read by rows; read once and kept ({})\n",
                 deck.input.file, deck.input.multby, format_bytes(double(plan.multby_memory)));
    ChunkHolding holding;
    if (plan.input) {
      holding = hold_chunks(*plan.input, plan.precision, deck.run.memory_budget, plan.reserved_memory(),
                            deck.input.discount, Kokkos::DefaultHostExecutionSpace().concurrency(),
                            deck.output.chunk_ids);
      plan.held_memory = holding.reserved;
    }
    plan_input_storage(deck, plan, progress);  // (after holding: parts held are part of it)
    if (holding.cells > 0) fmt::print(progress, "cvest: {} '{}': {}\n", deck.input.file, deck.input.discount, holding.text);
    const Index chunk_ids = output_chunk_ids(deck, plan, decoded, holding);
    plan_layouts(deck, row, decoded, chunk_ids, holding.cell, plan, progress);
    warn_tiny_blocks(deck, plan, progress);
    share_among_ranks(ranks, chunk_ids, plan, progress);
    plan.output = output_spec(deck, plan, chunk_ids, ranks);
    const bool ahead = read_ahead_allowed();  // a bad value fails every run, read ahead or not
    for (const Strategy strategy : deck.run.strategies)
      for (const LayoutKind layout : deck.run.layouts)
        plan.jobs.push_back(job_plan(deck, plan, strategy, layout, ahead));
  });
  return plan;
}

}  // namespace cvest::app
