#include "app/run/Verify.hpp"

#include "app/run/ChunkHolding.hpp"
#include "core/Errors.hpp"
#include "io/cube/CubeFile.hpp"
#include "io/input/ChunkCache.hpp"
#include "io/hdf5/ChunkFiles.hpp"
#include "io/hdf5/MetadataSandbox.hpp"
#include "io/output/OutputNames.hpp"

#include <Kokkos_Core.hpp>
#include <fmt/format.h>
#include <fmt/ostream.h>

#include <algorithm>
#include <atomic>
#include <cmath>
#include <cstring>
#include <exception>
#include <memory>
#include <mutex>
#include <ostream>
#include <vector>

#ifdef _OPENMP
#include <omp.h>
#endif

namespace cvest::app {

using namespace cvest::io;  // the files a check reads

namespace {

int host_threads() {
#ifdef _OPENMP
  return std::max(1, omp_get_max_threads());
#else
  return 1;
#endif
}

int this_thread() {
#ifdef _OPENMP
  return omp_get_thread_num();
#else
  return 0;
#endif
}

// What one checking thread holds: a block's inputs, the output's values and
// the recomputed ones.
struct ThreadBuffers {
  std::vector<unsigned char> m, d, found, expected;
  Index m_ids = -1;  // the id range whose multBy rows m holds
};

// Block `b` read from both files and recomputed into buf.expected; "" where
// the output holds the same bits, else the first difference.
std::string check_block(const InputFile& input, const CubeReader& cv_reader, const Block& b, Precision p,
                        ThreadBuffers& buf) {
  const Index K = input.shape().K;
  const std::size_t es = element_size(p), slice = std::size_t(b.ids.size() * K);
  const std::size_t n = std::size_t(b.dates.size()) * slice;
  buf.m.resize(slice * es);
  buf.d.resize(n * es);
  buf.found.resize(n * es);
  buf.expected.resize(n * es);
  if (buf.m_ids != b.ids.begin) {
    input.read_multby(b.ids, p, buf.m.data());
    buf.m_ids = b.ids.begin;
  }
  input.read_discount(b, p, buf.d.data());
  cv_reader.read(b, p, buf.found.data());
  const auto compute = [&](auto* e, const auto* mm, const auto* dd) {
    for (std::size_t j = 0; j < n; ++j) e[j] = mm[j % slice] * dd[j];
  };
  if (p == Precision::f64)
    compute(reinterpret_cast<double*>(buf.expected.data()), reinterpret_cast<const double*>(buf.m.data()),
            reinterpret_cast<const double*>(buf.d.data()));
  else
    compute(reinterpret_cast<float*>(buf.expected.data()), reinterpret_cast<const float*>(buf.m.data()),
            reinterpret_cast<const float*>(buf.d.data()));
  return first_difference(buf.expected.data(), buf.found.data(), b, K, p);
}

// Blocks are checked side by side, each host thread reading, recomputing
// and comparing its own (reads and decoding overlap across threads). The
// earliest block that differs decides: VerifyError naming it.
void check_blocks(const VerifyOptions& o, const InputFile& input, const CubeReader& cv_reader, const BlockPlan& plan,
                  Precision p, int threads) {
  std::vector<ThreadBuffers> per_thread(static_cast<std::size_t>(threads));
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
      auto diff = check_block(input, cv_reader, plan.blocks[std::size_t(k)], p, per_thread[std::size_t(this_thread())]);
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
}

}  // namespace

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

void cross_check_readers(const VerifyOptions& o, const InputFile& input, const CubeReader& cv_reader,
                         const CubeFile& cv, const BlockPlan& plan, Precision p) {
  const CubeFile in(o.input, {{o.multby, 2}, {o.discount, 3}});
  const Index K = plan.K, n = Index(plan.blocks.size());
  const std::size_t es = element_size(p);
  std::vector<Block> samples;
  for (Index j = 0; j <= 7 && n > 0; ++j) {
    const Block& b = plan.blocks[std::size_t(j * (n - 1) / 7)];
    const Index ids = std::min<Index>(b.ids.size(), 4096);
    samples.push_back({{b.dates.begin, b.dates.begin + 1}, {b.ids.begin, b.ids.begin + ids}});
    samples.push_back({{b.dates.end - 1, b.dates.end}, {b.ids.end - ids, b.ids.end}});
  }
  input.begin_pass(p, samples);
  std::vector<unsigned char> ours, hdf5s;
  // Dataset `d` of `file` (named `dataset`) read at `b` by cvest's reader
  // (`read_ours`) and through HDF5.
  const auto same = [&](const CubeFile& file, std::size_t d, const std::string& dataset, const Block& b,
                        auto&& read_ours) {
    const bool rank2 = file.shape(d).dims.size() == 2;
    const std::size_t bytes = std::size_t((rank2 ? 1 : b.dates.size()) * b.ids.size() * K) * es;
    ours.assign(bytes, 0);
    hdf5s.assign(bytes, 1);
    read_ours(ours.data());
    file.read(d, b, p, hdf5s.data());
    if (ours != hdf5s)
      throw VerifyError(fmt::format("{}: dataset '{}' reads differently through cvest's reader than through HDF5 at "
                                    "dates [{}, {}), ids [{}, {}): a bug in cvest's reader; please report it with the "
                                    "file's layout (h5ls -v)", file.path(), dataset, b.dates.begin, b.dates.end,
                                    b.ids.begin, b.ids.end));
  };
  // Datasets HDF5 reads for cvest too have nothing to cross-check.
  // Nor do those HDF5 cannot decode (h5py's lzf, without its plugin).
  bool check_d = input.discount_storage(p).read_by != ReadBy::hdf5 && hdf5_decodes(in.dataset(1));
  bool check_m =
      (input.multby_storage(p).read_by != ReadBy::hdf5 || input.kept_multby_decoded()) && hdf5_decodes(in.dataset(0));
  const bool check_cv = cv_reader.storage(p).read_by != ReadBy::hdf5 && hdf5_decodes(cv.dataset(0));
  // A held chunk, or a kept multBy's, HDF5 decodes whole for each slice
  // asked of it (hundreds of MB, outside the budget): the first sample only.
  const bool held = input.discount_storage(p).held, kept = input.kept_multby_decoded();
  for (const Block& b : samples) {
    if (held && &b != &samples.front()) check_d = false;
    if (kept && &b != &samples.front()) check_m = false;
    if (check_m) same(in, 0, o.multby, b, [&](void* buf) { input.read_multby(b.ids, p, buf); });
    if (check_d) same(in, 1, o.discount, b, [&](void* buf) { input.read_discount(b, p, buf); });
    if (check_cv) same(cv, 0, o.dataset, b, [&](void* buf) { cv_reader.read(b, p, buf); });
  }
}

void names_from_output(VerifyOptions& o) {
  quiet_hdf5_errors();
  check_metadata_in_child(o.output, {o.dataset});
  const auto names = recorded_names(o.output, o.dataset);
  if (!names) return;  // none, or several to choose from: the defaults, and their messages
  o.dataset = names->dataset;
  if (!names->multby.empty()) o.multby = names->multby;
  if (!names->discount.empty()) o.discount = names->discount;
}

void verify_output(const VerifyOptions& o, std::ostream& progress) {
  const std::size_t verify_cache = std::size_t(64) << 20;  // InputFile's default
  quiet_hdf5_errors();
  auto input_file = open_input_within(o.input, o.multby, o.discount, verify_cache, DirectMode::off, "",
                                      o.memory_budget, 0);
  check_metadata_in_child(o.output, {o.dataset});
  const CubeFile out(o.output, {{o.dataset, 3}});
  const DatasetShape& cv = out.shape(0);
  const auto s = input_file->shape();
  if (cv.dims != std::vector<Index>{s.T, s.N, s.K})
    throw VerifyError(fmt::format("{}: dataset '{}' is ({}, {}, {}), expected ({}, {}, {}) like {}'s '{}'", o.output,
                                  o.dataset, cv.dims[0], cv.dims[1], cv.dims[2], s.T, s.N, s.K, o.input, o.discount));
  const Precision p = cv.precision;
  // The budget is shared between the checking threads; chunks HDF5 reads as
  // for jobs (io/input/ChunkCache.hpp), blocks by the jobs' rule (core/Plan.hpp)
  // where no output chunks need holding whole.
  const int threads = host_threads();
  const ChunkRow row = fit_chunk_cache(input_file, p, o.memory_budget, verify_cache, threads, progress);
  const InputFile& input = *input_file;
  // multBy whose rows would decode a large chunk whole for each block: read
  // once and kept, as a run keeps it (app/run/RunPlan.cpp).
  const std::size_t kept = input.multby_rereads(p) ? std::size_t(s.N * s.K) * element_size(p) : 0;
  if (kept > 0 && row.cache_bytes + kept + blocks_least(o.memory_budget) > o.memory_budget)
    throw InputError(fmt::format("{}: dataset '{}' is stored in chunks too large to read by rows, read once and "
                                 "kept to verify: {}, and memory_budget {} does not hold it beside the blocks",
                                 o.input, o.multby, format_bytes(double(kept)), format_bytes(double(o.memory_budget))));
  if (kept > 0) input.keep_multby(p);
  const ChunkHolding holding = hold_chunks(input, p, o.memory_budget, row.cache_bytes + kept, o.discount, threads);
  const BlockPlan plan = plan_blocks(
      s.T, s.N, s.K, element_size(p),
      std::max<std::size_t>((o.memory_budget - row.cache_bytes - kept - holding.reserved) / std::size_t(threads), 1),
      block_quantum(row.quantum, input.decoded_chunk(p), 0, holding.cell));
  const CubeReader cv_reader(out.dataset(0), o.output, o.dataset, s.N, s.K);
  input.begin_pass(p, plan.blocks);
  check_blocks(o, input, cv_reader, plan, p, threads);
  cross_check_readers(o, input, cv_reader, out, plan, p);
  fmt::print(progress, "cvest: {} matches {} bit for bit ({} x {} x {} {})\n", o.output, o.input, s.T, s.N, s.K,
             to_string(p));
}

}  // namespace cvest::app
