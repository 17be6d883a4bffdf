#pragma once
// The machine's limits, measured by the same program in the same run as the
// kernels they judge: copy with regular stores, copy with streaming stores,
// and STREAM's triad. Each call times one fenced pass over `n` elements.
#include "core/FlatRun.hpp"
#include "core/Median.hpp"
#include "core/Multiply.hpp"
#include "core/Policies.hpp"
#include "core/Strategy.hpp"
#include "core/StreamingStores.hpp"
#include "core/Types.hpp"

#include <Kokkos_Timer.hpp>

#include <algorithm>
#include <atomic>
#include <cstdint>
#include <cstring>
#include <stdexcept>
#include <string>
#include <type_traits>
#include <vector>

namespace cvest::roof {

using cvest::median;  // core/Median.hpp

template <class Scalar, class MemSpace>
using Flat = Kokkos::View<Scalar*, MemSpace>;

enum class Stores { regular, streaming };

// The stores a pipeline's kernel writes cv with on a (T, N, K) block, for
// its roof's copy: the kernel's own choice, given the `next` it is called
// with (writes_streaming: streaming only where cv goes to memory and the
// strategy streams at that layout and run length; flat as measured here,
// per precision). Said by CvNext alone, per_id, elementwise and the others
// on LayoutRight, which write regular stores, had their roof copy with
// streaming ones.
template <class ExecSpace>
Stores kernel_stores(Strategy strategy, LayoutKind layout, Index T, Index N, Index K, std::size_t element_size,
                     CvNext next) {
  return writes_streaming<ExecSpace>(strategy, layout, T, N, K, element_size, next) ? Stores::streaming
                                                                                     : Stores::regular;
}

// dst[0, n) = src[0, n) on the calling host thread: a copy roof's pass over
// one thread's share, with regular or streaming stores.
template <class Scalar>
inline void copy_here(Scalar* dst, const Scalar* src, std::size_t n, Stores stores) {
  if (stores == Stores::streaming) {
    streaming::copy_run(dst, src, n);
    streaming::fence_this_thread();
  } else {
    // A 64-byte line an iteration: the loop of one vector the compiler made
    // of the plain loop ran at the pace its place in the code allowed, a
    // LayoutLeft tile's roof from the L2 at 59 GB/s where its 18 bytes
    // crossed a 64-byte line and at 113 where they did not (the seed deck's
    // flat/left k.roof 1.30 against 0.46, two builds of the same roof;
    // docs/benchmarks.md).
    constexpr std::size_t line = 64 / sizeof(Scalar);
    std::size_t j = 0;
    for (; j + line <= n; j += line)
      for (std::size_t k = 0; k < line; ++k) dst[j + k] = src[j + k];
    for (; j < n; ++j) dst[j] = src[j];
  }
}

// One chunk of flat's LayoutLeft walk with the multiply removed (streaming
// stores): dst[0, n) = src[0, n) run by run, each ending where a multiple
// of `run` elements from `first` (the chunk's place in the whole) does, in
// the kernel's streams (policy::flat_left_streams), each run's multBy value
// (`rows`: the chunk's first run's) read where the kernel reads it and
// added into `bits` (streaming::scaled_runs). Not fenced here.
template <class Scalar>
inline void copy_runs_here(Scalar* dst, const Scalar* src, std::size_t n, std::size_t run, std::size_t first,
                           const policy::FlatStreams& streams, const Scalar* rows, std::uint64_t& bits) {
  streaming::scaled_runs<true>(dst, src, n, run, first % run, streaming::ReadAlong<Scalar>{rows, &bits},
                               streams.streams, std::size_t(streams.runs_apart));
}

// Reads n elements at p once (the 64-bit sum of their 8-byte words, 16
// bytes at a time in four independent chains where streaming stores are
// built (SSE2), else 8 at a time: it runs at load speed, as a kernel's
// vector loads of multBy do, not one add's latency): a kernel's third
// stream, its multBy rows, in a copy roof of the same bytes. On the calling
// host thread; the result is added to a sink so the loads are kept, and so
// that a test counts the reads (a word read twice adds twice, where an XOR
// would cancel).
inline std::atomic<std::uint64_t> read_sink{0};
template <class Scalar>
inline void read_here(const Scalar* p, std::size_t n) {
  const auto* bytes = reinterpret_cast<const unsigned char*>(p);
  const std::size_t words = n * sizeof(Scalar) / 8;
  std::uint64_t acc[4] = {};
  std::size_t w = 0;
#if CVEST_HAVE_STREAMING_STORES
  __m128i v[4] = {_mm_setzero_si128(), _mm_setzero_si128(), _mm_setzero_si128(), _mm_setzero_si128()};
  for (; w + 8 <= words; w += 8)
    for (int k = 0; k < 4; ++k)
      v[k] = _mm_add_epi64(v[k], _mm_loadu_si128(reinterpret_cast<const __m128i*>(bytes + 8 * w + 16 * std::size_t(k))));
  const __m128i all = _mm_add_epi64(_mm_add_epi64(v[0], v[1]), _mm_add_epi64(v[2], v[3]));
  std::uint64_t lanes[2];
  std::memcpy(lanes, &all, sizeof lanes);
  acc[0] = lanes[0] + lanes[1];
#endif
  for (; w + 4 <= words; w += 4)
    for (int k = 0; k < 4; ++k) {
      std::uint64_t x;
      std::memcpy(&x, bytes + 8 * (w + std::size_t(k)), 8);
      acc[k] += x;
    }
  for (; w < words; ++w) {
    std::uint64_t x;
    std::memcpy(&x, bytes + 8 * w, 8);
    acc[0] += x;
  }
  read_sink.fetch_add(acc[0] + acc[1] + acc[2] + acc[3], std::memory_order_relaxed);
}

// The copy roof of one kernel call, moving the bytes the call moved: `src`
// (n elements) copied into `dst` (the pipeline: its cv into its consumed
// discount buffer; the bench: its discount into its cv), and
// its multBy rows (`rows`, m elements; none: a plain copy) read. Returns
// seconds. Host spaces: every thread of `space` takes contiguous runs of
// both, as the flat kernel does: chunk c reads its share of multBy (c's
// part of m, 16-byte bounds), then copies its run, as a kernel's chunk
// reads the multBy of its elements. run > 0 with rows (`rows` a LayoutLeft
// multBy of ceil(n / run) values, m of them; streaming stores whatever
// `stores` says): flat's LayoutLeft walk instead, in runs of that many
// elements and the kernel's streams, each run's multBy value read beside
// it (copy_runs_here). Where multBy goes is not neutral here: in runs of its own
// (at the end of the range, or spread through it) the double copy ran
// 0.88-0.91 of flat's speed at 8 x 10,000,000 and the float copy 1.03-1.06;
// with each chunk's share the other way round (1.00-1.06, 0.91-0.93; three
// runs each, the two builds taking turns). Not explained; either is a copy
// of the row's bytes, and the roof takes the kind with the fastest median
// (in float, flat's own walk). Devices: both in one launch.
template <class ExecSpace, class Scalar>
double copy_and_read(ExecSpace const& space, Scalar* dst, const Scalar* src, Index n, const Scalar* rows, Index m,
                     Stores stores, Index run = 0) {
  const char* label = m > 0 ? "cvest::roof::copy_and_read"
                            : stores == Stores::streaming ? "cvest::roof::copy_streaming" : "cvest::roof::copy";
  space.fence();
  Kokkos::Timer timer;
  if constexpr (policy::on_host<ExecSpace>) {
    const Index per = policy::flat_run_elements(sizeof(Scalar)), chunks = std::max((n + per - 1) / per, Index(m > 0)),
                align = Index(16 / sizeof(Scalar));
    const auto share = [=](Index c) { return c >= chunks ? m : c * m / chunks / align * align; };
    if (run > 0 && rows && m * run < n)
      throw std::invalid_argument("copy_and_read: runs of " + std::to_string(run) + " over " + std::to_string(n) +
                                  " elements read " + std::to_string((n + run - 1) / run) + " multBy values, " +
                                  std::to_string(m) + " given");
    const policy::FlatStreams streams =
        run > 0 && rows ? policy::flat_left_streams(src, dst, run, sizeof(Scalar)) : policy::FlatStreams{};
    Kokkos::parallel_for(label, policy::range(space, chunks), [=](Index c) {
      const Index b = c * per, e = std::min(n, b + per);
      if (run > 0 && rows) {
        std::uint64_t bits = 0;
        if (e > b)
          copy_runs_here(dst + b, src + b, std::size_t(e - b), std::size_t(run), std::size_t(b), streams,
                         rows + b / run, bits);
        streaming::fence_this_thread();
        read_sink.fetch_add(bits, std::memory_order_relaxed);
        return;
      }
      const Index r0 = share(c), r1 = share(c + 1);
      if (r1 > r0) read_here(rows + r0, std::size_t(r1 - r0));
      if (e > b) copy_here(dst + b, src + b, std::size_t(e - b), stores);
    });
  } else {
    // One launch, as the kernel's: item j copies element j and reads
    // multBy's 8-byte word j, kept by a compare with a key the compiler
    // cannot know (from an address) whose store never runs in practice
    // (a 64-bit match, 2^-64 a word; it would only touch the copy's
    // destination); an odd float count's last element (or, where the rows
    // are not 8-byte aligned, every element) is read as itself.
    // No reducer: Kokkos 3.4's BOr reduce jumped to a null host function
    // on an H200, and a second launch cost a small call 15-20% of its time.
    using Word = unsigned long long;
    const auto* words = reinterpret_cast<const Word*>(rows);
    const bool aligned = reinterpret_cast<std::uintptr_t>(rows) % alignof(Word) == 0;
    // words [0, mw), then elements [s0, m) as themselves: at most one where aligned
    const Index mw = aligned ? m * Index(sizeof(Scalar)) / Index(sizeof(Word)) : 0,
                s0 = mw * Index(sizeof(Word)) / Index(sizeof(Scalar)), ms = m - s0;
    const Word key = Word(reinterpret_cast<std::uintptr_t>(dst)) ^ Word(0x9E3779B97F4A7C15ull);
    const Scalar scalar_key = -(Scalar(std::uintptr_t(dst) % 1000003) + Scalar(0.5));
    policy::clear_launch_errors<ExecSpace>();
    Kokkos::parallel_for(label, policy::range(space, std::max(n, std::max(mw, ms))), KOKKOS_LAMBDA(Index j) {
      if (j < n) dst[j] = src[j];
      if (n > 0 && ((j < mw && words[j] == key) || (j < ms && rows[s0 + j] == scalar_key))) dst[0] = Scalar(0);
    });
    policy::check_launched<ExecSpace>(label);
  }
  space.fence();
  return timer.seconds();
}

// One piece of flat's LayoutRight walk (policy::FlatWalk::piece) with the
// multiply removed: its dates' rows of `src` copied into `dst`, and where
// the piece is its tile's first group of dates (where the kernel takes its
// run of multBy from memory; the later groups find it in the caches) that
// run of `rows` read beside them, vector by vector as flat's kernel loads
// it. Read apart from the copy instead (the copy, then a pass over
// multBy), the reads did not overlap the copy's as the kernel's do: the
// pipeline's one-date blocks ran their kernel at 1.05-1.11x such a copy.
// Adds what it reads into `bits`. Streaming stores are not fenced here.
template <class Scalar>
inline void copy_piece(Scalar* dst, const Scalar* src, const policy::FlatWalk::Piece& p, const Scalar* rows,
                       std::uint64_t& bits, Stores stores) {
  const auto rows_of = [&](auto stream, auto m) {
    streaming::rows_at_once<decltype(stream)::value>(p.dates, dst + p.e, src + p.e, std::size_t(p.n), p.stride, m);
  };
  const auto copy = [&](auto stream) {
    if (p.first) rows_of(stream, streaming::ReadAlong<Scalar>{rows + p.j, &bits});
    else rows_of(stream, streaming::Unit{});
  };
  if (stores == Stores::streaming) copy(std::true_type{});
  else copy(std::false_type{});
}

// The copy roof of flat on LayoutRight walked as flat walks it (host only):
// `src` copied into `dst` piece by piece of `walk` (its tiles, its dates at
// once), with streaming stores (or regular ones, as a kernel whose cv is
// read next), multBy's rows (`rows`) read where the kernel takes them from
// memory (copy_piece). A kernel taking dates at once keeps more lines
// in flight than a copy walking one stream a thread; this copy does the
// same, so the kernel's fraction measures its multiply, not its walk.
// Returns seconds.
template <class ExecSpace, class Scalar>
double copy_in_walk(ExecSpace const& space, Scalar* dst, const Scalar* src, const policy::FlatWalk& walk,
                    const Scalar* rows, Stores stores = Stores::streaming) {
  static_assert(policy::on_host<ExecSpace>, "flat's walk is the host path");
  space.fence();
  Kokkos::Timer timer;
  Kokkos::parallel_for("cvest::roof::copy_in_walk", policy::range(space, walk.chunks()), [=](Index c) {
    std::uint64_t bits = 0;
    copy_piece(dst, src, walk.piece(c), rows, bits, stores);
    if (stores == Stores::streaming) streaming::fence_this_thread();
    read_sink.fetch_add(bits, std::memory_order_relaxed);
  });
  space.fence();
  return timer.seconds();
}

// The same on the calling host thread, all of `walk`'s pieces in turn, with
// either kind of store (a block of the per-thread pipeline, whose kernel
// walks it so on one thread).
template <class Scalar>
void copy_in_walk_here(Scalar* dst, const Scalar* src, const policy::FlatWalk& walk, const Scalar* rows,
                       Stores stores) {
  std::uint64_t bits = 0;
  for (Index c = 0; c < walk.chunks(); ++c) copy_piece(dst, src, walk.piece(c), rows, bits, stores);
  if (stores == Stores::streaming) streaming::fence_this_thread();
  read_sink.fetch_add(bits, std::memory_order_relaxed);
}

// dst = src. Returns seconds.
template <class ExecSpace, class Scalar>
double copy(ExecSpace const& space, Flat<Scalar, typename ExecSpace::memory_space> dst,
            Flat<const Scalar, typename ExecSpace::memory_space> src, Stores stores) {
  return copy_and_read(space, dst.data(), src.data(), Index(dst.extent(0)), static_cast<const Scalar*>(nullptr),
                       Index(0), stores);
}

// a = b + s * c (STREAM triad). Returns seconds.
template <class ExecSpace, class Scalar>
double triad(ExecSpace const& space, Flat<Scalar, typename ExecSpace::memory_space> a,
             Flat<const Scalar, typename ExecSpace::memory_space> b,
             Flat<const Scalar, typename ExecSpace::memory_space> c) {
  const Index n = a.extent(0);
  const Scalar s = 3;
  space.fence();
  Kokkos::Timer timer;
  Kokkos::parallel_for("cvest::roof::triad", policy::range(space, n),
                       KOKKOS_LAMBDA(Index j) { a(j) = b(j) + s * c(j); });
  space.fence();
  return timer.seconds();
}

}  // namespace cvest::roof
