// Lab bench (issue 59): flat/right's walk, 4 dates at once, in 16-byte
// (SSE2) and 32-byte (AVX2) vectors, the kernel (cv = m * d) against a
// copy walked the same way, every contender once per repeat in turn (the
// first two dropped), the threads splitting the slice as flat does. At this
// VM's fast moments (copies at 76-90 GB/s on 2 threads) the 16-byte kernel
// ran at a median 0.92 of its copy and the 32-byte one at 0.97
// (docs/benchmarks.md), which is why core/StreamingStores.hpp takes 32-byte
// vectors where the CPU has them. Each result is checked. Standalone
// (OpenMP, x86-64 with AVX2); run by run.sh.
//
//   vector_width IDS STEP REPEATS    T = 40,000,000 / IDS dates of 5 columns;
//                                    STEP: the dates' spacing (1 or 2)
#include <immintrin.h>
#include <omp.h>
#include <sys/mman.h>

#include <algorithm>
#include <chrono>
#include <cstddef>
#include <cstdio>
#include <cstdlib>
#include <vector>

namespace {

inline __m128 load16(const float* p) { return _mm_loadu_ps(p); }
inline __m128d load16(const double* p) { return _mm_loadu_pd(p); }
inline __m128 mul(__m128 a, __m128 b) { return _mm_mul_ps(a, b); }
inline __m128d mul(__m128d a, __m128d b) { return _mm_mul_pd(a, b); }
inline void stream(float* p, __m128 v) { _mm_stream_ps(p, v); }
inline void stream(double* p, __m128d v) { _mm_stream_pd(p, v); }

#define WIDE __attribute__((target("avx2")))
WIDE inline __m256 load32(const float* p) { return _mm256_loadu_ps(p); }
WIDE inline __m256d load32(const double* p) { return _mm256_loadu_pd(p); }
WIDE inline __m256 mul(__m256 a, __m256 b) { return _mm256_mul_ps(a, b); }
WIDE inline __m256d mul(__m256d a, __m256d b) { return _mm256_mul_pd(a, b); }
WIDE inline void stream(float* p, __m256 v) { _mm256_stream_ps(p, v); }
WIDE inline void stream(double* p, __m256d v) { _mm256_stream_pd(p, v); }

// 4 rows `stride` apart, n elements each (n a multiple of 8, rows aligned to 32).
template <bool Multiply, class S>
void rows16(S* out, const S* d, const S* m, std::size_t n, std::ptrdiff_t stride) {
  constexpr std::size_t w = 16 / sizeof(S);
  for (std::size_t j = 0; j + w <= n; j += w) {
    const auto mv = load16(m + j);
    for (int u = 0; u < 4; ++u) {
      auto x = load16(d + u * stride + j);
      if constexpr (Multiply) x = mul(mv, x);
      stream(out + u * stride + j, x);
    }
  }
}
template <bool Multiply, class S>
WIDE void rows32(S* out, const S* d, const S* m, std::size_t n, std::ptrdiff_t stride) {
  constexpr std::size_t w = 32 / sizeof(S);
  for (std::size_t j = 0; j + w <= n; j += w) {
    const auto mv = load32(m + j);
    for (int u = 0; u < 4; ++u) {
      auto x = load32(d + u * stride + j);
      if constexpr (Multiply) x = mul(mv, x);
      stream(out + u * stride + j, x);
    }
  }
}

const char* const names[4] = {"copy16", "kernel16", "copy32", "kernel32"};

// One pass of contender v: each thread takes its share of the slice in
// tiles, each tile date group by date group (4 dates `step` apart), in runs.
template <class S>
double pass(int v, S* out, const S* d, const S* m, std::size_t T, std::size_t slice, std::size_t step) {
  const std::size_t per = 65536 / sizeof(S), tile = 4 * per, span = 4 * step;
  const auto t0 = std::chrono::steady_clock::now();
#pragma omp parallel
  {
    const std::size_t th = std::size_t(omp_get_thread_num()), nt = std::size_t(omp_get_num_threads());
    const std::size_t lo = slice * th / nt / 64 * 64, hi = th + 1 == nt ? slice : slice * (th + 1) / nt / 64 * 64;
    for (std::size_t b = lo; b < hi; b += tile)
      for (std::size_t p = 0; p + span <= T; p += span)
        for (std::size_t r = 0; r < step; ++r)
          for (std::size_t j = b; j < std::min(hi, b + tile); j += per) {
            const std::size_t n = std::min(per, std::min(hi, b + tile) - j), e = (p + r) * slice + j;
            const auto s = std::ptrdiff_t(step * slice);
            if (v == 0) rows16<false>(out + e, d + e, m + j, n, s);
            else if (v == 1) rows16<true>(out + e, d + e, m + j, n, s);
            else if (v == 2) rows32<false>(out + e, d + e, m + j, n, s);
            else rows32<true>(out + e, d + e, m + j, n, s);
          }
    _mm_sfence();
  }
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
}

template <class S>
S* huge_array(std::size_t elements) {
  const std::size_t bytes = (elements * sizeof(S) + (2u << 20) - 1) / (2u << 20) * (2u << 20);
  S* p = static_cast<S*>(std::aligned_alloc(2u << 20, bytes));
  if (p == nullptr) std::exit(1);
  madvise(p, bytes, MADV_HUGEPAGE);  // as cvest's arrays (core/Spaces.cpp)
  return p;
}

template <class S>
void run(std::size_t N, std::size_t step, int repeats) {
  const std::size_t T = 40000000 / N, slice = N * 5, total = T * slice;
  S *d = huge_array<S>(total), *out = huge_array<S>(total), *m = huge_array<S>(slice);
#pragma omp parallel for
  for (std::size_t i = 0; i < total; ++i) d[i] = S(i % 7), out[i] = 0;
  for (std::size_t i = 0; i < slice; ++i) m[i] = S(i % 3 + 1);
  std::vector<double> gbps[4], paired[2];
  for (int r = 0; r < repeats + 2; ++r) {
    double s[4];
    for (int k = 0; k < 4; ++k) {
      const int v = (k + r) % 4;
      s[v] = pass(v, out, d, m, T, slice, step);
      std::size_t wrong = 0;  // the dates the walk covers
      for (std::size_t e = 0; e < (T / (4 * step)) * 4 * step * slice; e += 4099)
        wrong += out[e] != (v % 2 ? m[e % slice] * d[e] : d[e]);
      if (wrong) std::printf("%s: %zu elements wrong\n", names[v], wrong), std::exit(1);
    }
    if (r < 2) continue;
    for (int v = 0; v < 4; ++v) gbps[v].push_back(2.0 * double(total * sizeof(S)) / s[v] / 1e9);
    paired[0].push_back(s[0] / s[1]), paired[1].push_back(s[2] / s[3]);
  }
  const auto median = [](std::vector<double> x) { std::sort(x.begin(), x.end()); return x[x.size() / 2]; };
  std::printf("%s %zu x %zu x 5, dates %zu apart:", sizeof(S) == 4 ? "float" : "double", T, N, step);
  for (int v = 0; v < 4; ++v) std::printf("  %s %.1f GB/s", names[v], median(gbps[v]));
  std::printf("  | kernel/copy: 16-byte %.3f, 32-byte %.3f (medians of per-repeat pairs)\n", median(paired[0]),
              median(paired[1]));
  std::free(d), std::free(out), std::free(m);
}

}  // namespace

int main(int argc, char** argv) {
  if (argc != 4 || !__builtin_cpu_supports("avx2")) {
    std::fprintf(stderr, "usage: vector_width IDS STEP REPEATS (a CPU with AVX2)\n");
    return 2;
  }
  const std::size_t N = std::strtoul(argv[1], nullptr, 10), step = std::strtoul(argv[2], nullptr, 10);
  const int repeats = std::atoi(argv[3]);
  run<float>(N, step, repeats);
  run<double>(N, step, repeats);
}
