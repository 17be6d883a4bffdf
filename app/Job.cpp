#include "app/Job.hpp"

#include "core/Errors.hpp"
#include "core/FlatRun.hpp"
#include "core/Policies.hpp"
#include "core/Roof.hpp"
#include "core/Version.hpp"
#include "io/Disk.hpp"
#include "io/Generator.hpp"
#include "io/Input.hpp"
#include "io/OutputFile.hpp"
#include "io/OutputLock.hpp"
#include "io/TempFiles.hpp"

#include <fmt/format.h>
#include <fmt/ostream.h>

#include <fstream>

#include <algorithm>
#include <atomic>
#include <cmath>
#include <cstring>
#include <exception>
#include <filesystem>
#include <map>
#include <memory>
#include <mutex>
#include <ostream>
#include <sstream>
#include <set>
#include <sys/resource.h>
#include <sys/stat.h>

#ifdef _OPENMP
#include <omp.h>
#endif

namespace cvest::app {

using namespace cvest::io;  // the files a job reads and writes

namespace {

// Buffers for checking blocks against the written output, lent one per
// concurrent caller and kept for the next; all freed with the pool.
class CheckBuffers {
 public:
  class Lease {
   public:
    Lease(CheckBuffers& pool, std::size_t bytes) : pool_(pool) {
      {
        const std::lock_guard lock(pool_.m_);
        if (!pool_.free_.empty()) {
          buffer_ = std::move(pool_.free_.back());
          pool_.free_.pop_back();
        }
      }
      buffer_.resize(bytes);
    }
    ~Lease() {
      const std::lock_guard lock(pool_.m_);
      pool_.free_.push_back(std::move(buffer_));
    }
    Lease(const Lease&) = delete;
    Lease& operator=(const Lease&) = delete;
    unsigned char* data() { return buffer_.data(); }

   private:
    CheckBuffers& pool_;
    std::vector<unsigned char> buffer_;
  };
  std::size_t kept_bytes() {
    const std::lock_guard lock(m_);
    std::size_t sum = 0;
    for (const auto& b : free_) sum += b.capacity();
    return sum;
  }
  void clear() {
    const std::lock_guard lock(m_);
    free_.clear();
  }

 private:
  std::mutex m_;
  std::vector<std::vector<unsigned char>> free_;
};

std::string_view numpy_name(Precision p) { return p == Precision::f64 ? "float64" : "float32"; }
std::string_view kokkos_name(LayoutKind layout) { return layout == LayoutKind::right ? "LayoutRight" : "LayoutLeft"; }

std::string first_difference(const void* expected, const void* found, const Block& b, Index K, Precision p) {
  const std::size_t n = std::size_t(b.dates.size() * b.ids.size() * K);
  const std::size_t es = element_size(p);
  if (std::memcmp(expected, found, n * es) == 0) return "";
  // Any NaN matches a NaN: where both factors are NaN, IEEE 754 leaves which
  // payload the product carries to the implementation, and compilers commute
  // a multiplication's operands freely, so two kernels (or NumPy) may differ
  // in that NaN's bits. Everything else must match bit for bit.
  const auto both_nan = [&](std::size_t j) {
    return p == Precision::f64
               ? std::isnan(static_cast<const double*>(expected)[j]) && std::isnan(static_cast<const double*>(found)[j])
               : std::isnan(static_cast<const float*>(expected)[j]) && std::isnan(static_cast<const float*>(found)[j]);
  };
  for (std::size_t j = 0; j < n; ++j)
    if (std::memcmp(static_cast<const char*>(expected) + j * es, static_cast<const char*>(found) + j * es, es) != 0 &&
        !both_nan(j)) {
      const Index t = b.dates.begin + Index(j) / (b.ids.size() * K);
      const Index i = b.ids.begin + Index(j) / K % b.ids.size();
      const Index k = Index(j) % K;
      const auto value = [&](const void* base) {
        return p == Precision::f64 ? fmt::format("{:.17g}", static_cast<const double*>(base)[j])
                                   : fmt::format("{:.9g}", static_cast<const float*>(base)[j]);
      };
      return fmt::format("[{}, {}, {}]: found {}, expected {}", t, i, k, value(found), value(expected));
    }
  return "";
}

// Chunks HDF5 reads itself (too large for cvest's decoding scratch, other
// filters, a conversion): each block's H5Dread reads, and inflates, every
// chunk it touches unless HDF5's chunk cache still holds it. So blocks stay
// inside one row of chunks (the chunks of a date range and id range, across
// the columns), go id-major so a row is finished before the next, and the
// cache holds one row: each chunk is then read once, not once per block
// (Dask's default (100, 33554, 5) gzip chunks: 100 times). A row per
// reading thread where that fits half the budget (threads near a row's end
// would otherwise evict each other's), else one; where not even one fits,
// `warning` says the budget that would hold it.
struct ChunkRow {
  BlockQuantum quantum{0, 0};   // ids 0: not chunks HDF5 reads
  std::size_t cache_bytes = 0;  // 0: the default cache is enough
  std::string warning;
};

ChunkRow chunk_row_for_hdf5(const CubeStorage& storage, const InputShape& shape, std::size_t budget,
                            std::size_t default_cache, int readers) {
  ChunkRow row;
  if (storage.read_by != "hdf5" || storage.chunk.size() != 3) return row;
  const Index ct = storage.chunk[0], ci = storage.chunk[1], ck = storage.chunk[2];
  if (ct <= 1 && ci >= shape.N) return row;  // a date's slab per chunk: any block reads its chunks once
  row.quantum = {ct, ci, true};
  // HDF5 caches chunks at the file's element size.
  const double bytes = double((shape.K + ck - 1) / ck) * double(ct * ci * ck) * double(element_size(shape.precision));
  const std::size_t needed = std::size_t(bytes) + (std::size_t(1) << 20);
  const std::size_t all_readers = std::size_t(std::max(readers, 1)) * std::size_t(bytes) + (std::size_t(1) << 20);
  if (all_readers <= default_cache) return row;
  if (all_readers <= budget / 2) {
    row.cache_bytes = all_readers;
  } else if (needed <= budget / 2) {
    row.cache_bytes = needed;
  } else {
    row.warning = fmt::format(
        "'discount' is read through HDF5 in chunks ({}, {}, {}); one row of them ({}) does not fit half of "
        "memory_budget ({}), so blocks read chunks again; memory_budget = \"{}\" would read each once",
        ct, ci, ck, format_bytes(double(needed)), format_bytes(double(budget) / 2), format_bytes(2.5 * double(needed)));
  }
  return row;
}

// The row for `input` (opened with `default_cache`, read at `precision`) by a
// run or a check; where HDF5 reads its chunks and that cache cannot hold a
// row of them, `input` is opened again with one that can (closed first: HDF5
// shares a dataset opened twice, chunk cache and all).
ChunkRow fit_chunk_cache(std::unique_ptr<const InputFile>& input, Precision precision, std::size_t budget,
                         std::size_t default_cache, int readers, std::ostream& progress) {
  const ChunkRow row = chunk_row_for_hdf5(input->discount_storage(precision), input->shape(), budget, default_cache,
                                          readers);
  if (row.cache_bytes > 0) {
    const std::string path = input->path(), multby = input->multby_name(), discount = input->discount_name();
    input.reset();
    input = std::make_unique<const InputFile>(path, multby, discount, row.cache_bytes);
  }
  if (!row.warning.empty()) fmt::print(progress, "cvest: warning: {}: {}\n", input->path(), row.warning);
  return row;
}

// Every rank's phase seconds and bytes, wall time and blocks of `job`'s
// median run, at rank 0: its per_rank, and its stats as the ranks' together
// (busy seconds and bytes summed, wall time the slowest rank's).
void gather_rank_stats(const Ranks& ranks, const BlockPlan& my_plan, JobReport& job) {
  std::vector<double> mine(job.stats.seconds, job.stats.seconds + phase_count);
  mine.insert(mine.end(), job.stats.bytes, job.stats.bytes + phase_count);
  mine.push_back(job.stats.total_s);
  mine.push_back(double(my_plan.blocks.size()));
  mine.push_back(peak_rss_bytes());
  mine.push_back(job.resumed_blocks);
  mine.push_back(job.kernel_roof_fraction);
  mine.push_back(job.roof_GBps);
  const auto all = ranks.gather(mine);
  if (!ranks.root()) return;
  job.resumed_blocks = 0;
  std::vector<double> fractions, roofs;  // each rank's: the job's are their medians
  PipelineStats together;
  together.timeline = std::move(job.stats.timeline);  // rank 0's
  for (const auto& r : all) {
    RankStats rs;
    std::copy(r.begin(), r.begin() + phase_count, rs.seconds);
    std::copy(r.begin() + phase_count, r.begin() + 2 * phase_count, rs.bytes);
    rs.total_s = r[2 * phase_count];
    rs.blocks = int(r[2 * phase_count + 1]);
    rs.peak_rss_bytes = r[2 * phase_count + 2];
    job.resumed_blocks += int(r[2 * phase_count + 3]);
    fractions.push_back(r[2 * phase_count + 4]);
    roofs.push_back(r[2 * phase_count + 5]);
    for (int p = 0; p < phase_count; ++p) together.seconds[p] += rs.seconds[p], together.bytes[p] += rs.bytes[p];
    together.total_s = std::max(together.total_s, rs.total_s);
    job.per_rank.push_back(rs);
  }
  job.stats = std::move(together);
  job.kernel_roof_fraction = bench::median(fractions);
  job.roof_GBps = bench::median(roofs);
}

}  // namespace

int JobReport::slowest_rank() const {
  int slowest = 0;
  for (std::size_t r = 0; r < per_rank.size(); ++r)
    if (per_rank[r].total_s > per_rank[std::size_t(slowest)].total_s) slowest = int(r);
  return slowest;
}

double JobReport::load_balance() const {
  if (per_rank.empty()) return 1;
  double sum = 0;
  for (const auto& r : per_rank) sum += r.total_s;
  return sum > 0 ? per_rank[std::size_t(slowest_rank())].total_s / (sum / double(per_rank.size())) : 1;
}

const BlockPlan& RunReport::plan(LayoutKind layout) const {
  for (const BlockPlan& p : plans)
    if (p.layout == layout) return p;
  throw std::logic_error("cvest: no block plan for a layout the deck runs");
}

double peak_rss_bytes() {
  rusage usage{};
  getrusage(RUSAGE_SELF, &usage);
  return double(usage.ru_maxrss) * 1024.0;
}

RunReport run_deck(const Deck& deck, std::ostream& progress, bool plan_only) {
  return run_deck(deck, progress, Ranks(), plan_only);
}

RunReport run_deck(const Deck& deck, std::ostream& progress_to, const Ranks& ranks, bool plan_only) {
  quiet_hdf5_errors();
  require_threadsafe_hdf5();
  // Rank 0 speaks for all: the others' notes and progress lines would repeat it.
  std::ostringstream unheard;
  std::ostream& progress = ranks.root() ? progress_to : unheard;
  RunReport rep;
  rep.build = build_facts();
  rep.deck = deck.path;
  rep.input = deck.input.file;
  rep.output = deck.output.file;
  rep.memory_budget = deck.run.memory_budget;
  rep.ranks = ranks.size();
  rep.ranks_on_node = ranks.local_size();

  std::error_code ec;
  const bool to_generate = !std::filesystem::exists(deck.input.file, ec);
  ranks.barrier();  // every rank has looked before rank 0 generates it
  std::unique_ptr<const InputFile> input_file;
  ChunkRow row;  // chunks HDF5 reads: blocks inside a row of them, a cache that holds it
  InputShape shape;
  Precision precision = Precision::f64;
  std::size_t es = 8;
  Index chunk_ids = 0;
  std::unique_ptr<OutputLock> output_lock;  // held until the deck's last job is done
  ranks.together([&] {
  if (to_generate) {
    if (!deck.input.generate) throw InputError(deck.input.file + ": no such file (and the deck has no [input] generate)");
    const auto& g = *deck.input.generate;
    fmt::print(progress, "cvest: {} {} ({} x {} x {}, {})\n", plan_only ? "would generate" : "generating",
               deck.input.file, g.dates, g.ids, g.cols, to_string(g.precision));
    // Before anything is generated: both paths usable, and the input and the
    // output fit their disk together.
    check_output_path(deck.input.file, false, false);
    check_output_path(deck.output.file, deck.output.overwrite, false);
    if (!plan_only) clean_up_after_killed_runs(deck.output.file);
    OutputSpec output;
    output.T = g.dates, output.N = g.ids, output.K = g.cols;
    output.precision = deck.run.precision.value_or(g.precision);
    output.compression = deck.output.compression;
    rep.generated_input_bytes = generated_bytes(g);
    check_free_space({{deck.input.file, rep.generated_input_bytes}, {deck.output.file, output_bytes(output)}});
    if (!plan_only && ranks.root()) generate_input(deck.input.file, g, false);
  }
  check_output_path(deck.output.file, deck.output.overwrite, !plan_only);
  // One run per output at a time: a second is refused here, not at its end.
  if (!plan_only && ranks.root()) output_lock = std::make_unique<OutputLock>(deck.output.file);
  });

  // HDF5's chunk cache (or cvest's decoding scratch in its place): an eighth
  // of the budget, at most 256 MiB, unless chunks HDF5 reads need more (below).
  // A plan for an input still to be generated takes its shape from the deck.
  const std::size_t default_cache = std::min<std::size_t>(deck.run.memory_budget / 8, std::size_t(256) << 20);
  ranks.together([&] {
  if (plan_only && to_generate) {
    const auto& g = *deck.input.generate;
    shape = {g.dates, g.ids, g.cols, g.precision, g.precision};
  } else {
    input_file = std::make_unique<const InputFile>(deck.input.file, deck.input.multby, deck.input.discount, default_cache);
    shape = input_file->shape();
    row = fit_chunk_cache(input_file, deck.run.precision.value_or(shape.promoted()), deck.run.memory_budget,
                          default_cache, Kokkos::DefaultHostExecutionSpace().concurrency(), progress);
  }
  rep.T = shape.T;
  rep.N = shape.N;
  rep.K = shape.K;
  precision = deck.run.precision.value_or(shape.promoted());
  es = element_size(precision);
  // A chosen precision narrower than an input: say so once (NumPy's
  // multBy[None] * discount would give the wider type).
  for (const auto& [name, p] : {std::pair{deck.input.multby, shape.multby_precision},
                                std::pair{deck.input.discount, shape.precision}})
    if (element_size(precision) < element_size(p))
      fmt::print(progress, "cvest: note: [run] precision = \"{}\" narrows {} '{}' ({}) to {}; NumPy's multBy[None] * "
                           "discount would be {}\n", to_string(precision), deck.input.file, name, numpy_name(p),
                 numpy_name(precision), numpy_name(shape.promoted()));
  if (input_file) {
    rep.input_storage = input_file->discount_storage(precision);
  } else {  // as generate_input writes it
    rep.input_storage.layout = "chunked";
    rep.input_storage.chunk = {1, cube_chunk(shape.N, shape.K, element_size(shape.precision))[1], shape.K};
    rep.input_storage.read_by = precision == shape.precision ? "pread" : "hdf5";
  }
  fmt::print(progress, "cvest: {} '{}': {}\n", deck.input.file, deck.input.discount, to_text(rep.input_storage));
  const auto refuse_unreadable = [&](const CubeStorage& storage, const std::string& dataset) {
    if (storage.read_by == "none")
      throw InputError(fmt::format(
          "{}: dataset '{}' is stored with {}, which this HDF5 cannot decode (a plugin on HDF5_PLUGIN_PATH can add "
          "it); cvest decodes deflate, lzf and shuffle itself, at the file's own precision ({}) in chunks that fit an "
          "eighth of memory_budget", deck.input.file, dataset, storage.unreadable, to_string(shape.precision)));
  };
  refuse_unreadable(rep.input_storage, deck.input.discount);
  if (input_file) refuse_unreadable(input_file->multby_storage(precision), deck.input.multby);
  const std::size_t max_block = deck.run.max_block.value_or(policy::default_block_bytes<ExecSpace>);
  chunk_ids = deck.output.chunk_ids > 0 ? std::min(deck.output.chunk_ids, shape.N)
                                         : cube_chunk(shape.N, shape.K, es)[1];
  // An input whose chunks cvest decodes itself is decoded a whole chunk at a
  // time: blocks of whole input chunks decode each chunk once, and output
  // chunks of whole input chunks (about the usual size) keep blocks aligned
  // with both.
  const auto in_chunk = input_file ? input_file->decoded_chunk() : std::array<Index, 2>{0, 0};
  if (in_chunk[1] > 0 && deck.output.chunk_ids == 0)
    chunk_ids = std::min(shape.N, in_chunk[1] * std::max<Index>(1, (chunk_ids + in_chunk[1] / 2) / in_chunk[1]));
  // Blocks of whole input chunks, and for LayoutRight of whole output chunks
  // too (blocks aligned with both). LayoutLeft blocks are id ranges over
  // many dates: whole output chunks would make them as large as a chunk
  // times the dates, so they keep whole chunks only where they must (a
  // compressed output's, cvest's decoding's, a row HDF5 reads); plain
  // output takes any id range at its offsets.
  const auto quantum_for = [&](LayoutKind layout) {
    if (row.quantum.ids > 0) return row.quantum;
    const Index dates = std::max<Index>(in_chunk[0], 1);
    if (layout == LayoutKind::right || deck.output.compression != Compression::none)
      return BlockQuantum{dates, chunk_ids};
    return BlockQuantum{dates, std::max<Index>(in_chunk[1], 1)};
  };
  for (const LayoutKind layout : deck.run.layouts) {
    rep.plans.push_back(plan_blocks(shape.T, shape.N, shape.K, es, deck.run.memory_budget - row.cache_bytes,
                                    quantum_for(layout), max_block, layout));
    const BlockPlan& plan = rep.plans.back();
    fmt::print(progress, "cvest: {} x {} x {} {}, {}: {} blocks of up to {} dates x {} ids ({} of buffers)\n",
               shape.T, shape.N, shape.K, to_string(precision), kokkos_name(layout),
               plan.blocks.size(), plan.block_dates, plan.block_ids, format_bytes(double(plan.buffer_bytes)));
  }
  // Tiny blocks (a budget of kilobytes): each costs a read, a kernel launch
  // and a write, whatever its size, so the run crawls. Say so, and what a
  // budget that gives blocks of about a MiB would be.
  const BlockPlan& smallest = *std::min_element(rep.plans.begin(), rep.plans.end(), [](const auto& a, const auto& b) {
    return a.block_dates * a.block_ids < b.block_dates * b.block_ids;
  });
  const double block_bytes = double(smallest.block_dates * smallest.block_ids * shape.K) * double(es);
  constexpr double tiny_block = 64 << 10;
  if (block_bytes < tiny_block && smallest.blocks.size() > 64) {
    const double suggested = std::max(16.0 * (1 << 20), 4.0 * 2.0 * double(shape.N * shape.K) * double(es));
    fmt::print(progress, "cvest: warning: memory_budget {} cuts the cube into {} blocks of {} ({} dates x {} ids); "
                         "each block costs a read, a kernel launch and a write, so this runs far below the machine's "
                         "speed; memory_budget = \"{}MiB\" or more gives blocks of about 1 MiB\n",
               format_bytes(double(deck.run.memory_budget)), smallest.blocks.size(), format_bytes(block_bytes),
               smallest.block_dates, smallest.block_ids, std::ceil(suggested / (1 << 20)));
  }
  });
  // Each rank's share of each plan: consecutive blocks, about as many
  // elements each, starting where the output's bytes start a page (chunks
  // are page-aligned: output_page_bytes) so no two ranks write one page.
  for (const BlockPlan& plan : rep.plans) {
    const std::size_t row_bytes = std::size_t(shape.K) * es;
    rep.rank_blocks.push_back(split_blocks(plan, ranks.size(), [&](const Block& b) {
      return (std::size_t(b.ids.begin % chunk_ids) * row_bytes) % output_page_bytes == 0;
    }));
  }
  if (ranks.size() > 1)
    fmt::print(progress, "cvest: {} ranks ({} on this node), {} thread{} each; each runs its share of every job's "
                         "blocks\n", ranks.size(), ranks.local_size(), rep.build.threads,
               rep.build.threads == 1 ? "" : "s");
  rep.output_compression = deck.output.compression;
  rep.output_gzip_level = deck.output.compression == Compression::gzip ? deck.output.gzip_level : 0;
  rep.output_chunk_ids = chunk_ids;
  // The pipeline's shape is the job's, decided once (and checked before
  // anything runs). Every BlockIO call below may run on several threads at
  // once: input reads (pread, decoding, or HDF5's thread-safe build), checks
  // (a buffer per thread) and OutputFile::write.
  const auto planned_job = [&](Strategy strategy, LayoutKind layout) {
    JobReport job;
    job.strategy = strategy;
    job.layout = layout;
    job.precision = precision;
    job.runs = deck.run.repeats;
    std::string why_not;
    const int threads = per_thread_threads(rep.plan(layout), deck.run.memory_budget, strategy, layout, true, why_not);
    if (deck.run.pipeline == PipelineKind::per_thread && threads == 0)
      throw InputError(fmt::format("{}: [run] pipeline = \"per_thread\" does not apply to {}/{}: {}", deck.path,
                                   to_string(strategy), to_string(layout), why_not));
    job.pipeline_threads = deck.run.pipeline == PipelineKind::overlapped ? 0 : threads;
    job.pipeline = job.pipeline_threads > 0 ? PipelineKind::per_thread : PipelineKind::overlapped;
    return job;
  };
  OutputSpec out_spec;
  out_spec.path = deck.output.file;
  out_spec.dataset = deck.output.dataset;
  out_spec.T = shape.T, out_spec.N = shape.N, out_spec.K = shape.K;
  out_spec.precision = precision;
  out_spec.compression = deck.output.compression;
  out_spec.gzip_level = deck.output.gzip_level;
  out_spec.chunk_ids = chunk_ids;
  out_spec.overwrite = deck.output.overwrite;
  out_spec.direct = deck.output.direct;
  // What a killed run's journal must match to be resumed: the input (its
  // identity on disk), the datasets, the output's shape, type and chunks.
  if (deck.output.journal && !plan_only) {
    const FileIdentity in = FileIdentity::of(deck.input.file);
    struct stat st {};
    ::stat(deck.input.file.c_str(), &st);
    out_spec.fingerprint = {
        {"cvest", CVEST_VERSION},
        {"input", fmt::format("{} (device {}, inode {}, {} bytes, modified {}.{:09})", deck.input.file, in.device,
                              in.inode, st.st_size, st.st_mtim.tv_sec, st.st_mtim.tv_nsec)},
        {"datasets", deck.input.multby + ", " + deck.input.discount},
        {"output", fmt::format("'{}' {} x {} x {} {}, chunks of {} ids", deck.output.dataset, shape.T, shape.N, shape.K,
                               to_string(precision), chunk_ids)}};
    out_spec.resume = deck.output.resume;
    out_spec.rank = ranks.rank();
  }
  if (plan_only) {
    ranks.together([&] {
      for (const Strategy strategy : deck.run.strategies)
        for (const LayoutKind layout : deck.run.layouts) rep.jobs.push_back(planned_job(strategy, layout));
      if (const double bytes = output_bytes(out_spec); bytes > 0) check_free_space(deck.output.file, bytes);
    });
    return rep;
  }
  const InputFile& input = *input_file;
  const bool multby_resident = rep.plans.front().multby_resident;  // the same for every layout
  // Pipeline and check buffers kept from job to job (and repeat to repeat):
  // the next job's are already mapped (BufferCache); what it does not use
  // is freed when it ends.
  BufferCache buffers;
  CheckBuffers check_buffers;

  bool written = false;
  // All of multBy, read once for every job and repeat (they share the
  // precision) when the plan keeps it resident; blocks use it in place
  // (pinned in a Cuda build, so its copies are async).
  Kokkos::View<unsigned char*, StagingSpace> resident_multby;
  ranks.together([&] {
    if (multby_resident) {
      resident_multby = Kokkos::View<unsigned char*, StagingSpace>(
          Kokkos::view_alloc("cvest::job::multBy", Kokkos::WithoutInitializing), std::size_t(shape.N * shape.K) * es);
      input.read_multby({0, shape.N}, precision, resident_multby.data());
    }
  });

  for (const Strategy strategy : deck.run.strategies)
    for (const LayoutKind layout : deck.run.layouts) {
      JobReport job;
      ranks.together([&] { job = planned_job(strategy, layout); });
      const BlockPlan& whole_plan = rep.plan(layout);
      // This rank's share (all of it in one process).
      BlockPlan plan = whole_plan;
      const Range mine = rep.rank_blocks[std::size_t(&whole_plan - rep.plans.data())][std::size_t(ranks.rank())];
      plan.blocks.assign(whole_plan.blocks.begin() + mine.begin, whole_plan.blocks.begin() + mine.end);
      // What one kernel call computes: a block, or a LayoutLeft tile of one
      // in the per-thread pipeline.
      job.kernel_ids = kernel_ids(plan, layout, job.pipeline_threads);
      // Buffers kept from the last job stay only where this job's fit the
      // budget beside them: a deck alternating layouts keeps both sets of
      // small blocks, blocks as large as the budget allows are made anew.
      const double copies = std::max(job.pipeline_threads, 1);
      const double need = std::max(double(plan.buffer_bytes), copies * per_thread_buffer_bytes(plan, layout));
      if (double(buffers.kept_bytes() + check_buffers.kept_bytes()) + need > double(deck.run.memory_budget)) {
        buffers.clear();
        check_buffers.clear();
      }
      const std::string label = fmt::format("{}/{}", to_string(strategy), to_string(layout));
      std::vector<PipelineStats> runs;
      for (int r = 0; r < deck.run.repeats; ++r) {
        const bool writes = !written;
        BlockPlan todo = plan;  // this run's blocks: a resumed output's on disk are not among them
        // Rank 0 creates the output; the other ranks write their shares of it.
        std::unique_ptr<OutputFile> out;
        std::unique_ptr<OutputShare> share;
        // Later jobs are compared with the written output, block by block.
        File written_file;
        Dataset written_cv;
        std::unique_ptr<CubeReader> written_reader;
        if (writes) {
          std::vector<std::uint64_t> description, resumed;
          std::string temp;
          ranks.together([&] {
            if (!ranks.root()) return;
            out = std::make_unique<OutputFile>(out_spec);
            for (const Block& b : out->resumed())
              resumed.insert(resumed.end(), {std::uint64_t(b.dates.begin), std::uint64_t(b.dates.end),
                                             std::uint64_t(b.ids.begin), std::uint64_t(b.ids.end)});
            if (ranks.size() > 1) description = out->share(), temp = out->temp_path();
          });
          ranks.broadcast(resumed);
          // Blocks a killed run left on disk are not written again (nor
          // timed: this run's figures are its own work).
          if (!resumed.empty()) {
            std::set<std::array<std::uint64_t, 4>> on_disk;
            for (std::size_t k = 0; k + 3 < resumed.size(); k += 4)
              on_disk.insert({resumed[k], resumed[k + 1], resumed[k + 2], resumed[k + 3]});
            const auto done = [&](const Block& b) {
              return on_disk.count({std::uint64_t(b.dates.begin), std::uint64_t(b.dates.end), std::uint64_t(b.ids.begin),
                                    std::uint64_t(b.ids.end)}) > 0;
            };
            todo.blocks.erase(std::remove_if(todo.blocks.begin(), todo.blocks.end(), done), todo.blocks.end());
            job.resumed_blocks = int(plan.blocks.size() - todo.blocks.size());
          }
          if (ranks.size() > 1) {
            ranks.broadcast(description);
            ranks.broadcast(temp);
            ranks.together([&] {
              if (!ranks.root()) share = std::make_unique<OutputShare>(out_spec, temp, description);
            });
          }
        } else {
          ranks.together([&] {
            DatasetShape cv_shape;
            written_file = open_input_file(deck.output.file);
            written_cv = open_dataset(written_file, deck.output.file, deck.output.dataset, 3, cv_shape);
            written_reader =
                std::make_unique<CubeReader>(written_cv, deck.output.file, deck.output.dataset, shape.N, shape.K);
          });
        }
        PipelineOptions options;
        options.buffers = &buffers;
        options.strategy = strategy;
        options.label = label;
        options.threads = job.pipeline_threads;
        ranks.barrier();  // the ranks start together: their times compare
        PipelineStats stats;
        ranks.together([&] { stats = with_types(precision, layout, [&](auto scalar, auto layout_tag) {
          using Scalar = decltype(scalar);
          using Layout = decltype(layout_tag);
          BlockIO<Scalar> io;
          if (multby_resident) {
            const auto* m = reinterpret_cast<const Scalar*>(resident_multby.data());
            const Index K = shape.K;
            io.multby_at = [m, K](Range ids) -> const Scalar* { return m + ids.begin * K; };
          } else {
            io.read_multby = [&](Range ids, Scalar* buf) { input.read_multby(ids, precision, buf); };
          }
          io.read_discount = [&](const Block& b, Scalar* buf) { input.read_discount(b, precision, buf); };
          if (writes) {
            if (share) io.write_cv = [&](const Block& b, const Scalar* buf) { share->write(b, buf); };
            else io.write_cv = [&](const Block& b, const Scalar* buf) { out->write(b, buf); };
          } else {
            io.write_cv = [&](const Block& b, const Scalar* buf) {
              // A buffer per concurrent check (blocks may be checked side by
              // side), the job's own: freed when it ends, not kept by threads
              // into the next job, which would break the budget.
              CheckBuffers::Lease check(check_buffers,
                                        std::size_t(b.dates.size() * b.ids.size() * shape.K) * es);
              written_reader->read(b, precision, check.data());
              const auto diff = first_difference(check.data(), buf, b, shape.K, precision);
              if (!diff.empty())
                throw VerifyError(fmt::format("{}: strategy {} with layout {} differs from the written output at {}",
                                              deck.output.file, to_string(strategy), to_string(layout), diff));
            };
          }
          io.concurrent = true;  // see the job's pipeline above
          return run_pipeline<Scalar, Layout>(todo, io, options, progress);
        }); });
        if (writes) {
          // Every share on disk (closed: what NFS's close-to-open needs)
          // before rank 0 stores the compressed ones and renames the file.
          ranks.together([&] {
            if (share) share->close();
          });
          const std::vector<std::string> parts = ranks.gather(share ? share->part_path() : std::string());
          ranks.together([&] {
          if (!ranks.root()) return;
          Kokkos::Timer storing;
          bool stored = false;
          for (const std::string& part : parts)
            if (!part.empty()) out->store_part(part), stored = true;
          if (stored) job.parts_stored_s = storing.seconds();
          out->commit({{"cvest_version", CVEST_VERSION},
                       {"strategy", std::string(to_string(strategy))},
                       {"layout", std::string(to_string(layout))},
                       {"precision", std::string(to_string(precision))},
                       {"backend", rep.build.backend},
                       {"kokkos_version", rep.build.kokkos_version},
                       {"input_file", deck.input.file},
                       {"multby_dataset", deck.input.multby},
                       {"discount_dataset", deck.input.discount}},
                      input.discount_dataset().get());
          rep.output_writes = out->writes_text();
          });
          share.reset();
          written = true;
          job.wrote_output = true;
        }
        runs.push_back(stats);
      }
      buffers.end_job();
      std::sort(runs.begin(), runs.end(), [](const auto& a, const auto& b) { return a.total_s < b.total_s; });
      std::vector<double> fractions;  // each run's, for the range beside the median run's
      for (const PipelineStats& s : runs)
        if (const double f = s.kernel_roof_fraction(); f > 0) fractions.push_back(f);
      if (!fractions.empty()) {
        job.kernel_roof_min = *std::min_element(fractions.begin(), fractions.end());
        job.kernel_roof_max = *std::max_element(fractions.begin(), fractions.end());
      }
      job.stats = runs[runs.size() / 2];
      job.kernel_roof_fraction = job.stats.kernel_roof_fraction();
      job.roof_GBps = job.stats.roof_GBps();
      if (ranks.size() > 1) gather_rank_stats(ranks, plan, job);
      job.peak_rss_bytes = peak_rss_bytes();
      rep.jobs.push_back(job);
    }

  if (deck.run.verify) {
    buffers.clear();  // the check has the whole budget
    check_buffers.clear();
    ranks.together([&] {  // by rank 0, over the whole output
      if (ranks.root())
        verify_output({deck.output.file, deck.input.file, deck.output.dataset, deck.input.multby, deck.input.discount,
                       deck.run.memory_budget},
                      progress);
    });
    rep.verified = true;
  }
  return rep;
}

void cross_check_readers(const VerifyOptions& o, const InputFile& input, const CubeReader& cv_reader,
                         const BlockPlan& plan, Precision p) {
  const File in_file = open_input_file(o.input), out_file = open_input_file(o.output);
  DatasetShape shape;
  const Dataset m_ds = open_dataset(in_file, o.input, o.multby, 2, shape);
  const Dataset d_ds = open_dataset(in_file, o.input, o.discount, 3, shape);
  const Dataset cv_ds = open_dataset(out_file, o.output, o.dataset, 3, shape);
  const Index K = plan.K, n = Index(plan.blocks.size());
  const std::size_t es = element_size(p);
  std::vector<Block> samples;
  for (Index j = 0; j <= 7 && n > 0; ++j) {
    const Block& b = plan.blocks[std::size_t(j * (n - 1) / 7)];
    const Index ids = std::min<Index>(b.ids.size(), 4096);
    samples.push_back({{b.dates.begin, b.dates.begin + 1}, {b.ids.begin, b.ids.begin + ids}});
    samples.push_back({{b.dates.end - 1, b.dates.end}, {b.ids.end - ids, b.ids.end}});
  }
  std::vector<unsigned char> ours, hdf5s;
  const auto same = [&](const std::string& file, const std::string& dataset, const Block& b, auto&& read_ours,
                        const Dataset& ds, bool rank2) {
    const std::size_t bytes = std::size_t((rank2 ? 1 : b.dates.size()) * b.ids.size() * K) * es;
    ours.assign(bytes, 0);
    hdf5s.assign(bytes, 1);
    read_ours(ours.data());
    if (rank2) read_hyperslab(ds, native_type(p), {b.ids.begin, 0}, {b.ids.size(), K}, hdf5s.data(), file);
    else read_hyperslab(ds, native_type(p), {b.dates.begin, b.ids.begin, 0}, {b.dates.size(), b.ids.size(), K},
                        hdf5s.data(), file);
    if (ours != hdf5s)
      throw VerifyError(fmt::format("{}: dataset '{}' reads differently through cvest's reader than through HDF5 at "
                                    "dates [{}, {}), ids [{}, {}): a bug in cvest's reader; please report it with the "
                                    "file's layout (h5ls -v)", file, dataset, b.dates.begin, b.dates.end, b.ids.begin,
                                    b.ids.end));
  };
  // Datasets HDF5 reads for cvest too have nothing to cross-check.
  // Nor do those HDF5 cannot decode (h5py's lzf, without its plugin).
  const auto hdf5_decodes = [](const Dataset& ds) {
    return !missing_in_hdf5(filters_of(PropList(H5Dget_create_plist(ds.get()))));
  };
  const bool check_m = input.multby_storage(p).read_by != "hdf5" && hdf5_decodes(m_ds),
             check_d = input.discount_storage(p).read_by != "hdf5" && hdf5_decodes(d_ds),
             check_cv = cv_reader.storage(p).read_by != "hdf5" && hdf5_decodes(cv_ds);
  for (const Block& b : samples) {
    if (check_m) same(o.input, o.multby, b, [&](void* buf) { input.read_multby(b.ids, p, buf); }, m_ds, true);
    if (check_d) same(o.input, o.discount, b, [&](void* buf) { input.read_discount(b, p, buf); }, d_ds, false);
    if (check_cv) same(o.output, o.dataset, b, [&](void* buf) { cv_reader.read(b, p, buf); }, cv_ds, false);
  }
}

void names_from_output(VerifyOptions& o) {
  quiet_hdf5_errors();
  check_metadata_in_child(o.output, {o.dataset});
  const File file = open_input_file(o.output);
  const auto written_by_cvest = [&](const std::string& name) {
    return H5Lexists(file.get(), name.c_str(), H5P_DEFAULT) > 0 &&
           H5Aexists_by_name(file.get(), name.c_str(), "cvest_version", H5P_DEFAULT) > 0;
  };
  std::string dataset = o.dataset;
  if (!written_by_cvest(dataset)) {
    std::vector<std::string> found;  // every object with cvest's attributes
    const auto visit = [](hid_t group, const char* name, const H5L_info_t*, void* data) -> herr_t {
      if (H5Aexists_by_name(group, name, "cvest_version", H5P_DEFAULT) > 0)
        static_cast<std::vector<std::string>*>(data)->push_back(name);
      return 0;
    };
    H5Lvisit(file.get(), H5_INDEX_NAME, H5_ITER_NATIVE, visit, &found);
    if (found.size() != 1) return;  // none, or several to choose from: the defaults, and their messages
    dataset = found.front();
  }
  const Dataset ds(H5Dopen2(file.get(), dataset.c_str(), H5P_DEFAULT));
  if (!ds) return;
  o.dataset = dataset;
  if (const auto m = read_string_attribute(ds.get(), "multby_dataset"); !m.empty()) o.multby = m;
  if (const auto d = read_string_attribute(ds.get(), "discount_dataset"); !d.empty()) o.discount = d;
}

void verify_output(const VerifyOptions& o, std::ostream& progress) {
  const std::size_t verify_cache = std::size_t(64) << 20;  // InputFile's default
  quiet_hdf5_errors();
  auto input_file = std::make_unique<const InputFile>(o.input, o.multby, o.discount, verify_cache);
  check_metadata_in_child(o.output, {o.dataset});
  const File out_file = open_input_file(o.output);
  DatasetShape cv;
  const Dataset cv_ds = open_dataset(out_file, o.output, o.dataset, 3, cv);
  const auto s = input_file->shape();
  if (cv.dims != std::vector<Index>{s.T, s.N, s.K})
    throw VerifyError(fmt::format("{}: dataset '{}' is ({}, {}, {}), expected ({}, {}, {}) like {}'s '{}'", o.output,
                                  o.dataset, cv.dims[0], cv.dims[1], cv.dims[2], s.T, s.N, s.K, o.input, o.discount));
  const Precision p = cv.precision;
  const std::size_t es = element_size(p);
  // Blocks are checked side by side, each host thread reading, recomputing
  // and comparing its own (reads and decoding overlap across threads); the
  // budget is shared between them. Chunks HDF5 reads: as for jobs.
#ifdef _OPENMP
  const int threads = std::max(1, omp_get_max_threads());
#else
  const int threads = 1;
#endif
  const ChunkRow chunk_row = fit_chunk_cache(input_file, p, o.memory_budget, verify_cache, threads, progress);
  const InputFile& input = *input_file;
  const auto in_chunk = input.decoded_chunk();
  const BlockQuantum quantum = chunk_row.quantum.ids > 0 ? chunk_row.quantum
                                                   : BlockQuantum{std::max<Index>(in_chunk[0], 1),
                                                                  std::max<Index>(in_chunk[1], 1)};
  const BlockPlan plan = plan_blocks(
      s.T, s.N, s.K, es, std::max<std::size_t>((o.memory_budget - chunk_row.cache_bytes) / std::size_t(threads), 1), quantum);
  const std::size_t cube = std::size_t(plan.block_dates * plan.block_ids * s.K), row = std::size_t(plan.block_ids * s.K);
  const CubeReader cv_reader(cv_ds, o.output, o.dataset, s.N, s.K);
  struct Buffers {
    std::vector<unsigned char> m, d, found, expected;
    Index m_ids = -1;  // the id range whose multBy rows m holds
  };
  std::vector<Buffers> per_thread(static_cast<std::size_t>(threads));
  const long nblocks = long(plan.blocks.size());
  std::atomic<long> first_bad{nblocks};  // the earliest block found to differ
  std::atomic<bool> failed{false};
  std::vector<std::string> diffs(plan.blocks.size());
  std::exception_ptr error;
  std::mutex error_lock;
  Kokkos::Profiling::pushRegion("cvest::verify");
#pragma omp parallel for schedule(dynamic) num_threads(threads)
  for (long k = 0; k < nblocks; ++k) {
    if (failed.load() || k > first_bad.load()) continue;  // an earlier block already decides
    try {
#ifdef _OPENMP
      Buffers& buf = per_thread[std::size_t(omp_get_thread_num())];
#else
      Buffers& buf = per_thread[0];
#endif
      const Block& b = plan.blocks[std::size_t(k)];
      buf.m.resize(row * es);
      buf.d.resize(cube * es);
      buf.found.resize(cube * es);
      buf.expected.resize(cube * es);
      if (buf.m_ids != b.ids.begin) {
        input.read_multby(b.ids, p, buf.m.data());
        buf.m_ids = b.ids.begin;
      }
      input.read_discount(b, p, buf.d.data());
      cv_reader.read(b, p, buf.found.data());
      const std::size_t slice = std::size_t(b.ids.size() * s.K), n = std::size_t(b.dates.size()) * slice;
      const auto compute = [&](auto* e, const auto* mm, const auto* dd) {
        for (std::size_t j = 0; j < n; ++j) e[j] = mm[j % slice] * dd[j];
      };
      if (p == Precision::f64)
        compute(reinterpret_cast<double*>(buf.expected.data()), reinterpret_cast<const double*>(buf.m.data()),
                reinterpret_cast<const double*>(buf.d.data()));
      else
        compute(reinterpret_cast<float*>(buf.expected.data()), reinterpret_cast<const float*>(buf.m.data()),
                reinterpret_cast<const float*>(buf.d.data()));
      auto diff = first_difference(buf.expected.data(), buf.found.data(), b, s.K, p);
      if (!diff.empty()) {
        diffs[std::size_t(k)] = std::move(diff);
        for (long seen = first_bad.load(); k < seen && !first_bad.compare_exchange_weak(seen, k);) {
        }
      }
    } catch (...) {
      const std::lock_guard lock(error_lock);
      if (!error) error = std::current_exception();
      failed = true;
    }
  }
  Kokkos::Profiling::popRegion();
  if (error) std::rethrow_exception(error);
  if (first_bad.load() < nblocks)
    throw VerifyError(fmt::format("{}: dataset '{}' differs from {} '{}' * '{}' at {}", o.output, o.dataset, o.input,
                                  o.multby, o.discount, diffs[std::size_t(first_bad.load())]));
  cross_check_readers(o, input, cv_reader, plan, p);
  fmt::print(progress, "cvest: {} matches {} bit for bit ({} x {} x {} {})\n", o.output, o.input, s.T, s.N, s.K,
             to_string(p));
}

// A job's block shape; "/ids" where its kernels ran a tile of the block at a time.
static std::string block_text(const BlockPlan& plan, Index kernel_ids) {
  std::string text = fmt::format("{}x{}", plan.block_dates, plan.block_ids);
  if (kernel_ids > 0 && kernel_ids < plan.block_ids) text += fmt::format("/{}", kernel_ids);
  return text;
}

void print_run_table(const RunReport& rep, std::ostream& out) {
  fmt::print(out, "\ncvest run {}  {} x {} x {}  backend {} ({} threads), budget {}\n", rep.deck, rep.T, rep.N,
             rep.K, rep.build.backend, rep.build.threads, format_bytes(double(rep.memory_budget)));
  fmt::print(out, "input: {}\n", to_text(rep.input_storage));
  if (!rep.output_writes.empty()) fmt::print(out, "output: written {}\n", rep.output_writes);
  if (policy::on_host<Kokkos::DefaultExecutionSpace>)
    fmt::print(out, "flat's runs on the host: {}\n", policy::flat_run_text(8));
  for (const auto& p : rep.plans)
    fmt::print(out, "{} blocks: {} of up to {} dates x {} ids\n", kokkos_name(p.layout),
               p.blocks.size(), p.block_dates, p.block_ids);
  fmt::print(out, "\n{:<15} {:<6} {:<7} {:<12} {:>12} {:>8} {:>7} {:>7} {:>7} {:>7} {:>7} {:>8} {:>7} {:>6} {:>9} {:>9}  {}\n",
             "strategy", "layout", "prec", "pipeline", "block", "total s", "read", "h2d", "kernel", "d2h", "write",
             "GB/s in", "roof", "k.roof", "(runs)", "peak RSS", "output");
  for (const auto& j : rep.jobs) {
    const auto& st = j.stats;
    const BlockPlan& plan = rep.plan(j.layout);
    const double in_bytes = double(rep.T * rep.N * rep.K) * double(element_size(j.precision));
    const std::string pipeline = j.pipeline == PipelineKind::per_thread
                                     ? fmt::format("per_thread:{}", j.pipeline_threads)
                                     : std::string(to_string(j.pipeline));
    const std::string range = j.runs > 1 && j.kernel_roof_max > 0
                                  ? fmt::format("{:.2f}-{:.2f}", j.kernel_roof_min, j.kernel_roof_max)
                                  : std::string("-");
    fmt::print(out, "{:<15} {:<6} {:<7} {:<12} {:>12} {:>8.3f} {:>7.3f} {:>7.3f} {:>7.3f} {:>7.3f} {:>7.3f} {:>8.2f} {:>7.1f} {:>6.2f} {:>9} {:>9}  {}\n",
               to_string(j.strategy), to_string(j.layout), to_string(j.precision), pipeline,
               block_text(plan, j.kernel_ids), st.total_s, st.seconds[int(Phase::read)],
               st.seconds[int(Phase::h2d)], st.seconds[int(Phase::kernel)], st.seconds[int(Phase::d2h)],
               st.seconds[int(Phase::write)], in_bytes / st.total_s / 1e9, j.roof_GBps, j.kernel_roof_fraction, range,
               format_bytes(j.peak_rss_bytes), j.wrote_output ? "written" : "matches");
  }
  if (rep.ranks > 1) {
    fmt::print(out, "\n{} ranks ({} on rank 0's node): each job's time is its slowest rank's, its busy seconds and bytes "
                    "the ranks' sums, GB/s in all ranks' input over that time\n", rep.ranks, rep.ranks_on_node);
    for (const auto& j : rep.jobs) {
      if (j.per_rank.empty()) continue;
      std::string seconds, blocks;
      for (const auto& r : j.per_rank) {
        seconds += fmt::format(" {:.3f}", r.total_s);
        blocks += fmt::format(" {}", r.blocks);
      }
      fmt::print(out, "{}/{}: slowest rank {}, load balance {:.2f} (slowest / mean); seconds by rank{}; blocks by "
                      "rank{}{}\n", to_string(j.strategy), to_string(j.layout), j.slowest_rank(), j.load_balance(),
                 seconds, blocks,
                 j.parts_stored_s > 0 ? fmt::format("; rank 0 stored the others' compressed chunks in {:.3f} s",
                                                    j.parts_stored_s)
                                      : std::string());
    }
  }
  fmt::print(out, "\nblock: dates x ids per block (/ids: computed a tile of that many ids at a time, LayoutLeft in the "
                  "per-thread pipeline); a kernel call's bytes: its discount and multBy rows read, its cv written; "
                  "roof: GB/s of the same bytes moved right after every other kernel call, on the thread(s) that ran "
                  "it: its cv copied into its just-consumed discount buffer with the same stores, its multBy rows "
                  "read; k.roof: the median over those calls of the kernel's GB/s over its own copy's (the median run), and its "
                  "range over the job's runs\n");
  // The user's question, answered from the fastest job's own phases: how
  // much of the work a faster kernel (a GPU) could take away at most.
  if (!rep.jobs.empty()) {
    const auto& best = *std::min_element(rep.jobs.begin(), rep.jobs.end(), [](const auto& a, const auto& b) {
      return a.stats.total_s < b.stats.total_s;
    });
    const auto& sec = best.stats.seconds;
    double busy = 0;
    for (const double p : sec) busy += p;
    if (busy > 0) {
      const double kernel = sec[int(Phase::kernel)], copies = sec[int(Phase::h2d)] + sec[int(Phase::d2h)];
      fmt::print(out,
                 "\nwhere the time goes ({}/{}, the fastest job, busy seconds): read {:.3f}, h2d {:.3f}, kernel {:.3f}, "
                 "d2h {:.3f}, write {:.3f}; the multiply is {:.0f}% of it{}, so a faster kernel could save at most "
                 "that\n",
                 to_string(best.strategy), to_string(best.layout), sec[int(Phase::read)], sec[int(Phase::h2d)], kernel,
                 sec[int(Phase::d2h)], sec[int(Phase::write)], 100 * kernel / busy,
                 rep.build.backend == "Cuda" ? fmt::format(" and host-device copies {:.0f}%", 100 * copies / busy)
                                             : std::string());
    }
  }
  for (const auto& j : rep.jobs)
    if (j.resumed_blocks > 0)
      fmt::print(out, "\nresumed: {} of {}/{}'s {} blocks were on disk from a run that stopped (its journal); this "
                      "run wrote the rest, and its figures are that work's\n", j.resumed_blocks, to_string(j.strategy),
                 to_string(j.layout), rep.plan(j.layout).blocks.size());
  if (rep.verified) fmt::print(out, "\nverified: {} equals multBy * discount bit for bit\n", rep.output);
}

void print_plan(const RunReport& rep, std::ostream& out) {
  const std::size_t es = rep.jobs.empty() ? 8 : element_size(rep.jobs.front().precision);
  const double out_bytes = double(rep.T * rep.N * rep.K) * double(es);
  fmt::print(out, "\ncvest run {} --plan  (nothing was written)\n", rep.deck);
  fmt::print(out, "input   {}: {} x {} x {}; {}{}\n", rep.input, rep.T, rep.N, rep.K, to_text(rep.input_storage),
             rep.generated_input_bytes > 0
                 ? fmt::format("; to be generated, {} (it and the output fit the disk together)",
                               format_bytes(rep.generated_input_bytes))
                 : std::string());
  for (const auto& p : rep.plans)
    fmt::print(out, "blocks  {}: {} of up to {} dates x {} ids; {} of buffers within a budget of {}{}\n",
               kokkos_name(p.layout), p.blocks.size(), p.block_dates, p.block_ids,
               format_bytes(double(p.buffer_bytes)), format_bytes(double(rep.memory_budget)),
               p.multby_resident ? "; multBy read once and kept" : "");
  const double free = free_space(rep.output);
  fmt::print(out, "output  {}: {} {}, chunks of {} ids{}\n", rep.output,
             rep.output_compression == Compression::none ? std::string("uncompressed,")
                                                         : std::string(to_string(rep.output_compression)) + ", at most",
             format_bytes(out_bytes), rep.output_chunk_ids,
             free < 0 ? std::string() : fmt::format("; {} free there", format_bytes(free)));
  if (rep.ranks > 1)
    for (std::size_t p = 0; p < rep.plans.size(); ++p) {
      std::string shares;
      for (const Range& r : rep.rank_blocks[p]) shares += fmt::format(" [{}, {})", r.begin, r.end);
      fmt::print(out, "ranks   {}: {} ranks, blocks by rank{}\n", kokkos_name(rep.plans[p].layout), rep.ranks, shares);
    }
  for (const auto& j : rep.jobs)
    fmt::print(out, "job     {}/{} {}: {}\n", to_string(j.strategy), to_string(j.layout), to_string(j.precision),
               j.pipeline == PipelineKind::per_thread ? fmt::format("per_thread pipeline, {} threads", j.pipeline_threads)
                                                      : std::string("overlapped pipeline"));
}

nlohmann::json to_json(const RunReport& rep) {
  nlohmann::json j;
  j["cvest_version"] = CVEST_VERSION;
  j["backend"] = rep.build.backend;
  j["kokkos_version"] = rep.build.kokkos_version;
  j["threads"] = rep.build.threads;
  j["machine"] = machine_json(rep.build);
  j["deck"] = rep.deck;
  j["input"] = rep.input;
  j["output"] = rep.output;
  j["output_compression"] = to_string(rep.output_compression);
  j["output_gzip_level"] = rep.output_gzip_level;
  j["output_chunk_ids"] = rep.output_chunk_ids;
  j["output_writes"] = rep.output_writes;
  j["input_storage"] = {{"layout", rep.input_storage.layout},
                        {"chunk", rep.input_storage.chunk.empty() ? nlohmann::json(nullptr)
                                                                   : nlohmann::json(rep.input_storage.chunk)},
                        {"filters", rep.input_storage.filters},
                        {"read_by", rep.input_storage.read_by}};
  j["shape"] = {{"dates", rep.T}, {"ids", rep.N}, {"cols", rep.K}};
  j["memory_budget_bytes"] = rep.memory_budget;
  j["ranks"] = rep.ranks;
  j["ranks_on_node"] = rep.ranks_on_node;
  auto& plans = j["block_plans"];
  for (std::size_t pi = 0; pi < rep.plans.size(); ++pi) {
    const BlockPlan& p = rep.plans[pi];
    auto& plan = plans[std::string(to_string(p.layout))];
    plan["rank_blocks"] = nlohmann::json::array();  // rank r runs blocks [begin, end)
    for (const Range& r : rep.rank_blocks[pi]) plan["rank_blocks"].push_back({r.begin, r.end});
    plan["block_dates"] = p.block_dates;
    plan["block_ids"] = p.block_ids;
    plan["buffer_bytes"] = p.buffer_bytes;
    plan["multby_resident"] = p.multby_resident;
    plan["blocks"] = nlohmann::json::array();
    for (const auto& b : p.blocks)
      plan["blocks"].push_back({{"dates", {b.dates.begin, b.dates.end}}, {"ids", {b.ids.begin, b.ids.end}}});
  }
  j["verified"] = rep.verified;
  j["jobs"] = nlohmann::json::array();
  for (const auto& job : rep.jobs) {
    nlohmann::json jj;
    jj["strategy"] = to_string(job.strategy);
    jj["layout"] = to_string(job.layout);
    jj["precision"] = to_string(job.precision);
    jj["wrote_output"] = job.wrote_output;
    jj["runs"] = job.runs;
    jj["pipeline"] = to_string(job.pipeline);
    jj["pipeline_threads"] = job.pipeline_threads;
    jj["peak_rss_bytes"] = job.peak_rss_bytes;
    jj["kernel_roof_fraction"] = job.kernel_roof_fraction;
    jj["kernel_roof_fraction_min"] = job.kernel_roof_min;
    jj["kernel_roof_fraction_max"] = job.kernel_roof_max;
    jj["roof"] = {{"copy_GBps", job.roof_GBps},
                  {"kernel_calls_copied", job.stats.roof.size()},
                  {"measured", "right after every other kernel call, on the thread(s) that ran it: its cv copied into "
                               "its consumed discount buffer with the same stores and its multBy rows read; bytes: "
                               "discount and multBy rows read + cv written, as the kernel's"}};
    const BlockPlan& plan = rep.plan(job.layout);
    jj["block_dates"] = plan.block_dates;
    jj["block_ids"] = plan.block_ids;
    jj["kernel_ids"] = job.kernel_ids;
    jj["blocks"] = plan.blocks.size();
    jj["seconds"]["total"] = job.stats.total_s;
    for (int p = 0; p < phase_count; ++p) {
      const std::string name(to_string(Phase(p)));
      jj["seconds"][name] = job.stats.seconds[p];
      jj["bytes"][name] = job.stats.bytes[p];
      jj["GBps"][name] = job.stats.seconds[p] > 0 ? job.stats.bytes[p] / job.stats.seconds[p] / 1e9 : 0.0;
    }
    if (!job.per_rank.empty()) {
      jj["slowest_rank"] = job.slowest_rank();
      jj["load_balance"] = job.load_balance();
      jj["parts_stored_s"] = job.parts_stored_s;
      jj["per_rank"] = nlohmann::json::array();
      for (std::size_t r = 0; r < job.per_rank.size(); ++r) {
        const RankStats& rs = job.per_rank[r];
        nlohmann::json jr{{"rank", r}, {"total_s", rs.total_s}, {"blocks", rs.blocks}, {"peak_rss_bytes", rs.peak_rss_bytes}};
        for (int p = 0; p < phase_count; ++p) {
          jr["seconds"][std::string(to_string(Phase(p)))] = rs.seconds[p];
          jr["bytes"][std::string(to_string(Phase(p)))] = rs.bytes[p];
        }
        jj["per_rank"].push_back(jr);
      }
    }
    jj["resumed_blocks"] = job.resumed_blocks;
    jj["timeline"] = nlohmann::json::array();
    for (const auto& span : job.stats.timeline)
      jj["timeline"].push_back({{"block", span.block}, {"phase", to_string(span.phase)}, {"begin_s", span.begin_s},
                                {"end_s", span.end_s}});
    j["jobs"].push_back(jj);
  }
  return j;
}

std::string to_csv(const RunReport& rep) {
  std::ostringstream s;
  s << "strategy,layout,precision,wrote_output,total_s";
  for (int p = 0; p < phase_count; ++p) s << ',' << to_string(Phase(p)) << "_s";
  for (int p = 0; p < phase_count; ++p) s << ',' << to_string(Phase(p)) << "_bytes";
  s << ",peak_rss_bytes,kernel_roof_fraction,roof_GBps,dates,ids,cols,blocks,block_dates,block_ids,pipeline,"
       "pipeline_threads,ranks,slowest_rank,load_balance,kernel_ids\n";
  for (const auto& j : rep.jobs) {
    s << to_string(j.strategy) << ',' << to_string(j.layout) << ',' << to_string(j.precision) << ','
      << (j.wrote_output ? "true" : "false") << ',' << fmt::format("{:.6f}", j.stats.total_s);
    for (int p = 0; p < phase_count; ++p) s << ',' << fmt::format("{:.6f}", j.stats.seconds[p]);
    for (int p = 0; p < phase_count; ++p) s << ',' << fmt::format("{:.0f}", j.stats.bytes[p]);
    const BlockPlan& plan = rep.plan(j.layout);
    s << ',' << fmt::format("{:.0f}", j.peak_rss_bytes) << ',' << fmt::format("{:.4f}", j.kernel_roof_fraction) << ','
      << fmt::format("{:.3f}", j.roof_GBps) << ',' << rep.T << ',' << rep.N << ',' << rep.K << ','
      << plan.blocks.size() << ',' << plan.block_dates << ',' << plan.block_ids << ',' << to_string(j.pipeline) << ','
      << j.pipeline_threads << ',' << rep.ranks << ',' << j.slowest_rank() << ',' << fmt::format("{:.3f}", j.load_balance())
      << ',' << j.kernel_ids << '\n';
  }
  return s.str();
}

void write_report_file(const std::string& path, const std::string& text) {
  io::write_whole_file(path, text, "report");
}

}  // namespace cvest::app
