#pragma once
// Non-temporal ("streaming") stores for the host.
//
// cv is written once and never re-read, so a regular store first reads each
// cache line of cv (read-for-ownership) and then writes it back: a third of
// the memory traffic of the whole job is wasted. Streaming stores skip the
// read. GCC 12 ignores `#pragma omp simd nontemporal`, so this takes SSE2
// intrinsics (baseline on x86-64) on the host and falls back to the portable
// loop elsewhere (other CPUs, and on the device, where it does not apply).
#include <Kokkos_Core.hpp>

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <string>
#include <type_traits>

#if defined(__SSE2__) && !defined(CVEST_NO_STREAMING_STORES)
#include <emmintrin.h>
#define CVEST_HAVE_STREAMING_STORES 1
#else
#define CVEST_HAVE_STREAMING_STORES 0
#endif

// 32-byte (AVX2) vectors where the CPU has them, chosen at run time (the
// build targets baseline x86-64): at the VM's fast moments (copies at 75-86
// GB/s on 2 threads) the 16-byte kernel ran at 0.92 of a copy in its own
// walk, the 32-byte one at 0.97 (docs/benchmarks.md). Not under nvcc, whose
// host pass keeps the 16-byte loops.
#if CVEST_HAVE_STREAMING_STORES && defined(__x86_64__) && defined(__GNUC__) && !defined(__CUDACC__)
#include <immintrin.h>

#include <atomic>
#define CVEST_HAVE_WIDE_VECTORS 1
#define CVEST_WIDE __attribute__((target("avx2")))
#else
#define CVEST_HAVE_WIDE_VECTORS 0
#endif

namespace cvest::streaming {

// Whether kernels on ExecSpace write cv with streaming stores in this build.
template <class ExecSpace>
constexpr bool used_on() {
  return CVEST_HAVE_STREAMING_STORES &&
         Kokkos::SpaceAccessibility<ExecSpace, Kokkos::HostSpace>::accessible;
}

// One element, from inside a kernel. On the host this is MOVNTI (a scalar
// non-temporal store); in device code a plain store.
template <class Scalar>
KOKKOS_FORCEINLINE_FUNCTION void store(Scalar* dst, Scalar value) {
#if CVEST_HAVE_STREAMING_STORES && defined(__x86_64__) && defined(__GNUC__) && !defined(__CUDA_ARCH__) && \
    !defined(__HIP_DEVICE_COMPILE__)
  // MOVNTI through inline asm whose output is typed Scalar: the intrinsic
  // takes a `long long*`, which may alias the Views' 64-bit strides, so the
  // compiler would reload every View field after every store.
  if constexpr (sizeof(Scalar) == 8) {
    long long bits;
    std::memcpy(&bits, &value, sizeof bits);
    __asm__("movnti %1, %0" : "=m"(*dst) : "r"(bits));
  } else if constexpr (sizeof(Scalar) == 4) {
    int bits;
    std::memcpy(&bits, &value, sizeof bits);
    __asm__("movnti %1, %0" : "=m"(*dst) : "r"(bits));
  } else {
    *dst = value;
  }
#else
  *dst = value;
#endif
}

// Runs shorter than this are written with regular stores: streaming stores
// that fill only part of a cache line, and the fence every work item ends
// with, cost more than the line reads they save (per_id on LayoutLeft in
// one-date blocks, 1-element runs: 2.7 s of kernel against 0.1 s).
constexpr std::size_t min_run_bytes = 512;

// Streaming stores are weakly ordered: each host thread that issued them must
// fence before another thread (or the caller) may read the data.
inline void fence_this_thread() {
#if CVEST_HAVE_STREAMING_STORES
  _mm_sfence();
#endif
}

// CVEST_HOST_VECTORS=16: 16-byte vectors though the CPU has AVX2 (to
// compare); 32: AVX2's, the default where the CPU has it ("" where unset;
// check_host_vectors_setting in core/Spaces.hpp checks the value before
// any kernel).
inline const char* host_vectors_env() {
  const char* v = std::getenv("CVEST_HOST_VECTORS");
  return v ? v : "";
}

#if CVEST_HAVE_WIDE_VECTORS
namespace detail {
inline bool cpu_has_wide_vectors() {
  static const bool yes = [] {
    __builtin_cpu_init();
    return __builtin_cpu_supports("avx2") != 0;  // the OS's saving of YMM state included
  }();
  return yes;
}
inline std::atomic<bool>& wide_vectors_on() {
  static std::atomic<bool> on{cpu_has_wide_vectors() && std::string(host_vectors_env()) != "16"};
  return on;
}
}  // namespace detail
#endif

// Whether this CPU and build have 32-byte vectors for the host's bulk loops.
inline bool wide_vectors_possible() {
#if CVEST_HAVE_WIDE_VECTORS
  return detail::cpu_has_wide_vectors();
#else
  return false;
#endif
}
// Whether the host's bulk loops take 32-byte vectors now.
inline bool wide_vectors() {
#if CVEST_HAVE_WIDE_VECTORS
  return detail::wide_vectors_on().load(std::memory_order_relaxed);
#else
  return false;
#endif
}
// Tests: both widths on one CPU. Returns the setting before; `on` is
// ignored where the CPU or the build has no 32-byte vectors.
inline bool use_wide_vectors(bool on) {
  const bool before = wide_vectors();
#if CVEST_HAVE_WIDE_VECTORS
  detail::wide_vectors_on().store(on && detail::cpu_has_wide_vectors(), std::memory_order_relaxed);
#else
  (void)on;
#endif
  return before;
}
// Bytes a vector of the host's streamed loops takes now: 32, 16, or 0
// where the build has no streaming stores.
inline int vector_bytes() { return !CVEST_HAVE_STREAMING_STORES ? 0 : wide_vectors() ? 32 : 16; }
// "32-byte (AVX2)", "16-byte (SSE2)", "none (regular stores only in this build)".
inline const char* vectors_text() {
  if (!CVEST_HAVE_STREAMING_STORES) return "none (regular stores only in this build)";
  return wide_vectors() ? "32-byte (AVX2)" : "16-byte (SSE2)";
}

namespace detail {
#if CVEST_HAVE_STREAMING_STORES
inline __m128d mul(__m128d a, __m128d b) { return _mm_mul_pd(a, b); }
inline __m128 mul(__m128 a, __m128 b) { return _mm_mul_ps(a, b); }
inline __m128d load(const double* p) { return _mm_loadu_pd(p); }
inline __m128 load(const float* p) { return _mm_loadu_ps(p); }
inline __m128d splat(double v) { return _mm_set1_pd(v); }
inline __m128 splat(float v) { return _mm_set1_ps(v); }
inline void stream(double* p, __m128d v) { _mm_stream_pd(p, v); }
inline void stream(float* p, __m128 v) { _mm_stream_ps(p, v); }
#endif
}  // namespace detail

// Host-only bulk versions, for runs of contiguous elements, `U` rows of
// them `stride` elements apart at once (flat's dates taken together; one
// row elsewhere):
//   out[j] = m[j] * d[j]      (multiply_run, rows_at_once)
//   out[j] = m    * d[j]      (scale_run; scaled_runs: runs of T, one m each)
//   out[j] = d[j]             (copy_run, rows_at_once: the copy roofs;
//                              ReadAlong: m read beside it, not used)
// A scalar head brings out to 16-byte alignment (32 where the CPU has
// AVX2 and every row shares it: wide_vectors), the body streams whole
// vectors (each m vector loaded once for all U rows), a scalar tail
// finishes. The U rows of out share one alignment (stride * sizeof(Scalar)
// a multiple of 16: policy::flat_dates). Results are bit-identical to the
// plain loop: each element is one IEEE multiplication either way.
// Stream = false: the same runs with regular stores (a loop the compiler
// vectorises), for cv that is read again while still in cache.
struct Unit {};  // no factor: a copy

// No factor either, but m read beside the copy where a kernel loads it (the
// copy roof reading multBy in the kernel's order: a kernel's loads of m
// interleaved with its loads of d overlap, a copy and then a read of m do
// not). Each element's bits, as an unsigned integer of its size, are added
// into *bits (64-bit, wrapping: the sum over every element read) so the
// loads stay, and a test sees each read once (a second read adds again,
// where an XOR would cancel). In scaled_runs, m[r] is run r's one value.
template <class Scalar>
struct ReadAlong {
  const Scalar* m;
  std::uint64_t* bits;
};
template <class MFn>
inline constexpr bool reads_along = false;
template <class Scalar>
inline constexpr bool reads_along<ReadAlong<Scalar>> = true;

template <class Scalar>
inline std::uint64_t bits_of(Scalar x) {
  if constexpr (sizeof(Scalar) == 8) {
    std::uint64_t b;
    std::memcpy(&b, &x, 8);
    return b;
  } else {
    static_assert(sizeof(Scalar) == 4, "ReadAlong sums 4- and 8-byte elements");
    std::uint32_t b;
    std::memcpy(&b, &x, 4);
    return b;
  }
}

#if CVEST_HAVE_WIDE_VECTORS
// streamed_rows' body in 32-byte vectors, from j (out + j aligned to 32 in
// every row) while whole vectors remain; returns where it stopped. Each
// function is compiled for AVX2 and called only where the CPU has it.
namespace wide {
CVEST_WIDE inline __m256d load(const double* p) { return _mm256_loadu_pd(p); }
CVEST_WIDE inline __m256 load(const float* p) { return _mm256_loadu_ps(p); }
CVEST_WIDE inline __m256d mul(__m256d a, __m256d b) { return _mm256_mul_pd(a, b); }
CVEST_WIDE inline __m256 mul(__m256 a, __m256 b) { return _mm256_mul_ps(a, b); }
CVEST_WIDE inline __m256d splat(double v) { return _mm256_set1_pd(v); }
CVEST_WIDE inline __m256 splat(float v) { return _mm256_set1_ps(v); }
CVEST_WIDE inline void stream(double* p, __m256d v) { _mm256_stream_pd(p, v); }
CVEST_WIDE inline void stream(float* p, __m256 v) { _mm256_stream_ps(p, v); }
// ReadAlong: m's bits added in 64-bit lanes, each float's 32 widened first.
template <class Scalar>
CVEST_WIDE inline __m256i add_bits(__m256i sum, const Scalar* m) {
  const __m256i v = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(m));
  if constexpr (sizeof(Scalar) == 8) return _mm256_add_epi64(sum, v);
  const __m256i low = _mm256_and_si256(v, _mm256_set1_epi64x(0xffffffff));
  return _mm256_add_epi64(sum, _mm256_add_epi64(low, _mm256_srli_epi64(v, 32)));
}
CVEST_WIDE inline std::uint64_t lanes_sum(__m256i v) {
  std::uint64_t lanes[4];
  _mm256_storeu_si256(reinterpret_cast<__m256i*>(lanes), v);
  return lanes[0] + lanes[1] + lanes[2] + lanes[3];
}

// One vector of each of U rows at `at` (rows' step): scaled by m, or copied
// (reading m beside where `reads`). A function of its own, not a lambda: a
// lambda would not carry the AVX2 target and its vectors would not inline.
template <int U, bool scaled, bool reads, class Scalar, class MFn>
CVEST_WIDE inline void row_step(Scalar* out, const Scalar* d, std::size_t at, std::ptrdiff_t stride, const MFn& m_at,
                                __m256i& summed) {
  if constexpr (scaled) {
    const auto mv = m_at.wide_vector(at);
    for (int u = 0; u < U; ++u) stream(out + u * stride + at, mul(mv, load(d + u * stride + at)));
  } else {
    if constexpr (reads) summed = add_bits(summed, m_at.m + at);
    for (int u = 0; u < U; ++u) stream(out + u * stride + at, load(d + u * stride + at));
  }
}

template <int U, class Scalar, class MFn>
CVEST_WIDE inline std::size_t rows(Scalar* out, const Scalar* d, std::size_t j, std::size_t n, std::ptrdiff_t stride,
                                   const MFn& m_at, std::uint64_t& bits) {
  constexpr std::size_t width = 32 / sizeof(Scalar);
  constexpr bool reads = reads_along<MFn>;
  constexpr bool scaled = !std::is_same_v<MFn, Unit> && !reads;
  __m256i summed = _mm256_setzero_si256();
  // Two vectors (a 64-byte line of each row) to an iteration: a loop of one
  // goes at the pace the front end fetches it, and that pace hangs on where
  // the loop lies in the code (scaled_runs).
  for (; j + 2 * width <= n; j += 2 * width) {
    row_step<U, scaled, reads>(out, d, j, stride, m_at, summed);
    row_step<U, scaled, reads>(out, d, j + width, stride, m_at, summed);
  }
  for (; j + width <= n; j += width) row_step<U, scaled, reads>(out, d, j, stride, m_at, summed);
  if constexpr (reads) bits += lanes_sum(summed);
  return j;
}
}  // namespace wide
#endif

template <int U, bool Stream, class Scalar, class MFn>
inline void streamed_rows(Scalar* out, const Scalar* d, std::size_t n, std::ptrdiff_t stride, MFn m_at) {
  constexpr bool reads = reads_along<MFn>;
  constexpr bool scaled = !std::is_same_v<MFn, Unit> && !reads;
  const auto value = [&](std::size_t j, Scalar x) {
    if constexpr (scaled) return m_at.scalar(j) * x;
    else return x;
  };
  std::uint64_t summed = 0;  // reads: the elements of m read one at a time
  const auto read = [&](std::size_t j) {
    if constexpr (reads) summed += bits_of(m_at.m[j]);
  };
  std::size_t j = 0;
#if CVEST_HAVE_STREAMING_STORES
  if constexpr (Stream && (std::is_same_v<Scalar, double> || std::is_same_v<Scalar, float>)) {
    constexpr std::size_t width = 16 / sizeof(Scalar);
    __m128i vsummed = _mm_setzero_si128();  // reads: the vectors of m, in 64-bit lanes
    std::uint64_t wide_summed = 0;          // reads: those the 32-byte vectors took
    // 32-byte vectors where every row shares out's alignment to 32 and the
    // run is long enough to repay a longer scalar head.
#if CVEST_HAVE_WIDE_VECTORS
    const bool use_wide = wide_vectors() && n >= 64 / sizeof(Scalar) &&
                      (U == 1 || std::size_t(stride) * sizeof(Scalar) % 32 == 0);
#else
    constexpr bool use_wide = false;
#endif
    const std::uintptr_t align = use_wide ? 32 : 16;
    for (; j < n && (reinterpret_cast<std::uintptr_t>(out + j) % align) != 0; ++j) {
      read(j);
      for (int u = 0; u < U; ++u) store(out + u * stride + j, value(j, d[u * stride + j]));
    }
#if CVEST_HAVE_WIDE_VECTORS
    if (use_wide) j = wide::rows<U>(out, d, j, n, stride, m_at, wide_summed);
#endif
    const auto step = [&](std::size_t at) {
      if constexpr (scaled) {
        const auto mv = m_at.vector(at);
        for (int u = 0; u < U; ++u) detail::stream(out + u * stride + at, detail::mul(mv, detail::load(d + u * stride + at)));
      } else {
        if constexpr (reads) {
          const __m128i v = _mm_loadu_si128(reinterpret_cast<const __m128i*>(m_at.m + at));
          if constexpr (sizeof(Scalar) == 8) {
            vsummed = _mm_add_epi64(vsummed, v);
          } else {  // each float's 32 bits widened to 64 first
            const __m128i low = _mm_and_si128(v, _mm_set1_epi64x(0xffffffff));
            vsummed = _mm_add_epi64(vsummed, _mm_add_epi64(low, _mm_srli_epi64(v, 32)));
          }
        }
        for (int u = 0; u < U; ++u) detail::stream(out + u * stride + at, detail::load(d + u * stride + at));
      }
    };
    // Four vectors (a 64-byte line of each row) to an iteration, as wide::rows takes two.
    for (; j + 4 * width <= n; j += 4 * width) step(j), step(j + width), step(j + 2 * width), step(j + 3 * width);
    for (; j + width <= n; j += width) step(j);
    for (; j < n; ++j) {
      read(j);
      for (int u = 0; u < U; ++u) store(out + u * stride + j, value(j, d[u * stride + j]));
    }
    if constexpr (reads) {
      std::uint64_t lanes[2];
      std::memcpy(lanes, &vsummed, sizeof lanes);
      *m_at.bits += summed + wide_summed + lanes[0] + lanes[1];
    }
    return;
  }
#endif
  for (; j < n; ++j) {
    read(j);
    for (int u = 0; u < U; ++u) out[u * stride + j] = value(j, d[u * stride + j]);
  }
  if constexpr (reads) *m_at.bits += summed;
}

template <class Scalar>
struct RowOf {  // m varies along the run
  const Scalar* m;
  Scalar scalar(std::size_t j) const { return m[j]; }
#if CVEST_HAVE_STREAMING_STORES
  auto vector(std::size_t j) const { return detail::load(m + j); }
#endif
#if CVEST_HAVE_WIDE_VECTORS
  CVEST_WIDE auto wide_vector(std::size_t j) const { return wide::load(m + j); }
#endif
};

template <class Scalar>
struct Constant {  // m is the same for the whole run
  Scalar m;
  Scalar scalar(std::size_t) const { return m; }
#if CVEST_HAVE_STREAMING_STORES
  auto vector(std::size_t) const { return detail::splat(m); }
#endif
#if CVEST_HAVE_WIDE_VECTORS
  CVEST_WIDE auto wide_vector(std::size_t) const { return wide::splat(m); }
#endif
};

template <bool Stream = true, class Scalar>
inline void multiply_run(Scalar* out, const Scalar* m, const Scalar* d, std::size_t n) {
  streamed_rows<1, Stream>(out, d, n, 0, RowOf<Scalar>{m});
}

template <bool Stream = true, class Scalar>
inline void scale_run(Scalar* out, Scalar m, const Scalar* d, std::size_t n) {
  streamed_rows<1, Stream>(out, d, n, 0, Constant<Scalar>{m});
}

// Runs of T elements one after another, run r scaled by m[r] (LayoutLeft's
// storage order, T dates of one multBy value): out[j] = m[(t0 + j) / T] * d[j]
// for j < n, the first run entered t0 elements in. m = Unit{}: a copy walked
// the same way (the roof in flat's walk); ReadAlong{m, bits}: that copy
// reading m[r] where the kernel does, adding its bits into *bits. Where
// every run is whole 16-byte vectors (T a multiple of the width, the runs'
// starts aligned) they stream with no head, tail or call per run (streaming
// stores; regular ones take whole runs in one loop of their own): runs of 8 floats taken
// one call each spent more on each run's checks than on its 64 bytes moved
// (flat/left at 0.65-0.74 of a copy at 8 x 10,000,000 float); a run of one,
// two or four vectors unrolled, 0.87-0.90 -> 0.94-0.95 there. `streams`
// (2 or 4; policy::flat_left_streams) stretches of whole runs at once,
// `runs_apart` runs apart, where they fit; the runs left over one at a
// time. T > 0, t0 < T.
namespace detail {

// scaled_runs' walk: the element (j) and run (r) it has got to, and the
// bits of m it has read (ReadAlong). Its steps in order: the first run
// entered part way, whole runs (streamed or with regular stores), the runs
// left one call each.
template <bool Stream, class Scalar, class Rows>
struct RunWalk {
  static constexpr bool reads = reads_along<Rows>;
  static constexpr bool scaled = !std::is_same_v<Rows, Unit> && !reads;
  Scalar* out;
  const Scalar* d;
  std::size_t n, T;
  Rows m;
  std::size_t j = 0, r = 0;
  std::uint64_t summed = 0;  // reads: every m[r] read

  // Elements [at, at + len) of run ra, head and tail scalar.
  void run(std::size_t at, std::size_t len, std::size_t ra) {
    if constexpr (scaled) {
      streamed_rows<1, Stream>(out + at, d + at, len, 0, Constant<Scalar>{m[ra]});
    } else {
      if constexpr (reads) summed += bits_of(m.m[ra]);
      streamed_rows<1, Stream>(out + at, d + at, len, 0, Unit{});
    }
  }

  void first_run_from(std::size_t t0) {
    if (t0 == 0 || n == 0) return;
    j = std::min(n, T - t0);
    run(0, j, 0);
    r = 1;
  }

#if CVEST_HAVE_STREAMING_STORES
  // Whole runs of V vectors, V known to the compiler where runs are short
  // (its loop unrolled: no branch per vector), U streams at once.
  template <std::size_t Vectors, std::size_t U>
  void streamed_whole_runs(std::size_t runs_apart) {
    constexpr std::size_t width = 16 / sizeof(Scalar);
    const std::size_t V = Vectors == 0 ? T / width : Vectors;
    // A run's V vectors four to an iteration where V is not known: a loop
    // of one vector (six instructions, 31 bytes) ran flat/left at 0.85-0.98
    // of its roof where it straddled a 64-byte line of code and at 1.00-1.06
    // where it did not, two builds of the same kernel taking turns (100 x
    // 12,416 double, two streams, EPYC VM with Zen 3): a loop that small
    // goes at the pace the front end fetches it.
    // The walk's fields in locals: GCC takes the streaming stores' builtins
    // as stores that may write any memory, so members would be loaded again
    // after every store (out and d twice a vector, j, r and the sum stored
    // every run) where this function is not inlined, as the roof's copy was
    // not while the kernel's short runs were: the kernel outran that copy of
    // its own walk, 1.09-1.14 at 20 x 2,000,000 float and 1.00-1.08 at 4 x
    // 10,000,000 (one stream; 0.99-1.02 and 1.00-1.02 with locals;
    // docs/benchmarks.md).
    Scalar* const o = out;
    const Scalar* const s = d;
    const Rows rows = m;
    const std::size_t len = T, total = n;
    std::size_t at = j, ra = r;
    std::uint64_t sum = summed;
    const auto vectors = [&](std::size_t e0, auto f) {
      std::size_t v = 0;
      if constexpr (Vectors == 0)
        for (; v + 4 <= V; v += 4)
          for (std::size_t u = 0; u < 4; ++u) f(e0 + (v + u) * width);
      for (; v < V; ++v) f(e0 + v * width);
    };
    const auto one = [&](std::size_t e0, std::size_t at_run) {
      if constexpr (scaled) {
        const auto mv = splat(rows[at_run]);
        vectors(e0, [&](std::size_t e) { stream(o + e, mul(mv, load(s + e))); });
      } else {
        if constexpr (reads) sum += bits_of(rows.m[at_run]);
        vectors(e0, [&](std::size_t e) { stream(o + e, load(s + e)); });
      }
    };
    if constexpr (U > 1) {
      const std::size_t apart = runs_apart * len;
      for (; at + U * apart <= total; at += (U - 1) * apart, ra += (U - 1) * runs_apart)
        for (const std::size_t stop = at + apart; at < stop; at += len, ++ra)
          for (std::size_t u = 0; u < U; ++u) one(at + u * apart, ra + u * runs_apart);
    }
    for (; at + len <= total; at += len, ++ra) one(at, ra);
    j = at, r = ra, summed = sum;
  }
  template <std::size_t Vectors>
  void streamed_whole_runs(int streams, std::size_t runs_apart) {
    if (streams == 4 && runs_apart > 0) streamed_whole_runs<Vectors, 4>(runs_apart);
    else if (streams == 2 && runs_apart > 0) streamed_whole_runs<Vectors, 2>(runs_apart);
    else streamed_whole_runs<Vectors, 1>(runs_apart);
  }
  // Where every run is whole vectors from here on: T a multiple of the width, out aligned.
  void streamed_whole_runs(int streams, std::size_t runs_apart) {
    constexpr std::size_t width = 16 / sizeof(Scalar);
    if (T % width != 0 || reinterpret_cast<std::uintptr_t>(out + j) % 16 != 0) return;
    if (T == width) streamed_whole_runs<1>(streams, runs_apart);
    else if (T == 2 * width) streamed_whole_runs<2>(streams, runs_apart);
    else if (T == 4 * width) streamed_whole_runs<4>(streams, runs_apart);
    else streamed_whole_runs<0>(streams, runs_apart);
  }
#endif

  // Regular stores: whole runs in one loop, T known to the compiler where
  // short. A call per run (runs_left) ran flat/left at 0.22-0.66 of its
  // roof in a build without streaming stores (runs of 4-20 values).
  // In locals as streamed_whole_runs, for symmetry (plain stores of Scalar
  // cannot write the walk's size_t and pointer fields).
  template <std::size_t L>
  void regular_whole_runs() {
    Scalar* const o = out;
    const Scalar* const s = d;
    const Rows rows = m;
    const std::size_t len = L ? L : T, total = n;
    std::size_t at = j, ra = r;
    std::uint64_t sum = summed;
    for (; at + len <= total; at += len, ++ra) {
      if constexpr (scaled) {
        const Scalar f = rows[ra];
        for (std::size_t t = 0; t < len; ++t) o[at + t] = f * s[at + t];
      } else {
        if constexpr (reads) sum += bits_of(rows.m[ra]);
        for (std::size_t t = 0; t < len; ++t) o[at + t] = s[at + t];
      }
    }
    j = at, r = ra, summed = sum;
  }
  void regular_whole_runs() {
    switch (T) {
      case 2: regular_whole_runs<2>(); break;
      case 4: regular_whole_runs<4>(); break;
      case 8: regular_whole_runs<8>(); break;
      case 16: regular_whole_runs<16>(); break;
      default: regular_whole_runs<0>();
    }
  }

  void runs_left() {
    for (; j < n; ++r) {
      const std::size_t len = std::min(T, n - j);
      run(j, len, r);
      j += len;
    }
    if constexpr (reads) *m.bits += summed;
  }
};

}  // namespace detail

template <bool Stream = true, class Scalar, class Rows>
inline void scaled_runs(Scalar* out, const Scalar* d, std::size_t n, std::size_t T, std::size_t t0, Rows m,
                        int streams = 1, std::size_t runs_apart = 0) {
  detail::RunWalk<Stream, Scalar, Rows> walk{out, d, n, T, m};
  walk.first_run_from(t0);
#if CVEST_HAVE_STREAMING_STORES
  if constexpr (Stream && (std::is_same_v<Scalar, double> || std::is_same_v<Scalar, float>))
    walk.streamed_whole_runs(streams, runs_apart);
#endif
  if constexpr (!(Stream && CVEST_HAVE_STREAMING_STORES)) walk.regular_whole_runs();
  (void)streams, (void)runs_apart;  // the streaming path's
  walk.runs_left();
}

// `dates` rows at once (1, 2 or 4: flat's LayoutRight walk), `stride`
// elements apart, each m vector loaded once for all of them: a kernel that
// reloads m for every date from L2 or L3 ran at 0.80-0.92 of a copy, one
// that takes it from L1 at 0.91-1.03 (docs/benchmarks.md). The caller also
// sees to it that the rows' streams do not share page offsets
// (policy::flat_dates). m = RowOf{...} multiplies; Unit{} copies (the roof
// walked the same way), ReadAlong{...} copies reading m as RowOf would.
template <bool Stream = true, class Scalar, class MFn>
inline void rows_at_once(int dates, Scalar* out, const Scalar* d, std::size_t n, std::ptrdiff_t stride, MFn m) {
  if (dates == 4) streamed_rows<4, Stream>(out, d, n, stride, m);
  else if (dates == 2) streamed_rows<2, Stream>(out, d, n, stride, m);
  else streamed_rows<1, Stream>(out, d, n, 0, m);
}

// out[j] = in[j] with streaming stores (the streaming copy roof).
template <class Scalar>
inline void copy_run(Scalar* out, const Scalar* in, std::size_t n) {
  streamed_rows<1, true>(out, in, n, 0, Unit{});
}

}  // namespace cvest::streaming
