// Lab bench for flat on LayoutRight (issue 35): where does a kernel that
// reads multBy lose against a streaming copy of its bytes? Walks of the
// same cube, each timed beside the copy roof in one process, every variant
// once per repeat in a rotating order, x the mean of the copies before and
// after it in that repeat. Standalone (no Kokkos: OpenMP, SSE2, as
// core/StreamingStores.hpp and core/MultiplyKernels.hpp's FlatStreaming
// walk), so a variant is a few lines; run by bench/flat_walks/run.sh.
//
//   flat_walks DATES IDS REPEATS VARIANT...   (K = 5, double, runs of 16,384)
//   copy          the roof: discount into cv with streaming stores, multBy read once
//   tile:KIB      cvest's walk: tiles of KIB KiB of multBy, each walked date by date
//   copywalk:KIB  the same walk copying discount into cv (multBy not read): the walk's own cost
//   mtiny:KIB     the tile walk with multBy's values taken from its first 4 KiB (L1-resident)
//   mwrap:KIB     storage order, multBy's values from its first KIB KiB, wrapping
//   dates:KIB     a run of KIB KiB of multBy walked date by date, then the next run
//   pair:KIB:U    tiles of KIB KiB, U dates at a time (U = 2, 4 or 8): a multBy vector loaded once for U dates
//   skew:KIB:U    as pair, date u's stream moved back so the dates' streams sit 4096/U bytes apart in a page
//   tile:KIB:pfB  the tile walk with PREFETCHT0 of discount B bytes ahead
#include <emmintrin.h>
#include <omp.h>
#include <xmmintrin.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <vector>

namespace {

using S = double;
constexpr long K = 5, per = 16384;  // a run: as flat_run_elements gives on a 1 MiB L2

double now() { return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count(); }

// out[j] = m[j] * d[j] (m_mask: m[j & m_mask], multBy from a small block)
// Runs start 16-byte aligned (IDS even: every date's slice and run starts at
// an even element of a page-aligned array); a last odd element stored plain.
void multiply(S* out, const S* m, const S* d, long n, long m_mask, long prefetch) {
  long j = 0;
  for (; j + 2 <= n; j += 2) {
    if (prefetch > 0 && (j & 7) == 0) _mm_prefetch(reinterpret_cast<const char*>(d + j) + prefetch, _MM_HINT_T0);
    _mm_stream_pd(out + j, _mm_mul_pd(_mm_loadu_pd(m + (j & m_mask)), _mm_loadu_pd(d + j)));
  }
  if (j < n) out[j] = m[j & m_mask] * d[j];
}

void copy(S* out, const S* d, long n) {
  long j = 0;
  for (; j + 2 <= n; j += 2) _mm_stream_pd(out + j, _mm_loadu_pd(d + j));
  if (j < n) out[j] = d[j];
}

template <int U>
void multiply_dates(S* out, const S* m, const S* d, long n, long stride) {
  for (long j = 0; j + 2 <= n; j += 2) {
    const __m128d mv = _mm_loadu_pd(m + j);
    for (int u = 0; u < U; ++u) _mm_stream_pd(out + u * stride + j, _mm_mul_pd(mv, _mm_loadu_pd(d + u * stride + j)));
  }
  if (n % 2)
    for (int u = 0; u < U; ++u) out[u * stride + n - 1] = m[n - 1] * d[u * stride + n - 1];
}

// U dates at once, date u's stream moved h[u] elements back so that the
// dates' discount streams sit 4096/U bytes apart within a page whatever the
// date stride (streams at equal page offsets stall each other's loads
// behind stores: 4K aliasing). multBy from L1 for all but the leading date.
template <int U>
void multiply_skewed(S* out, const S* m, const S* d, long n, long stride, const long* h) {
  long H = 0;
  for (int u = 0; u < U; ++u) H = std::max(H, h[u]);
  if (n <= H) {
    for (int u = 0; u < U; ++u) multiply(out + u * stride, m, d + u * stride, n, -1, 0);
    return;
  }
  S* o[U];
  const S *mm[U], *dd[U];
  for (int u = 0; u < U; ++u) {
    o[u] = out + u * stride - h[u], mm[u] = m - h[u], dd[u] = d + u * stride - h[u];
    multiply(out + u * stride, m, d + u * stride, H - h[u], -1, 0);  // before the steady part
  }
  for (long k = H; k + 2 <= n; k += 2)
    for (int u = 0; u < U; ++u) _mm_stream_pd(o[u] + k, _mm_mul_pd(_mm_loadu_pd(mm[u] + k), _mm_loadu_pd(dd[u] + k)));
  for (int u = 0; u < U; ++u)  // after it (n even: the steady loop ends at n)
    multiply(out + u * stride + n - h[u], m + n - h[u], d + u * stride + n - h[u], h[u], -1, 0);
}

unsigned long long sink;
void read(const S* p, long n) {
  unsigned long long a[4] = {};
  const auto* w = reinterpret_cast<const unsigned long long*>(p);
  for (long j = 0; j + 4 <= n; j += 4)
    for (int k = 0; k < 4; ++k) a[k] ^= w[j + k];
  __atomic_fetch_xor(&sink, a[0] ^ a[1] ^ a[2] ^ a[3], __ATOMIC_RELAXED);
}

struct Cube {
  long T, slice, total;
  S *d, *cv, *m;
};

// Tiles of `bytes` of multBy as flat_tile_bytes cuts them: evened out, whole runs.
long tile_elements(const Cube& c, long bytes) {
  long tile = std::max(per, std::min(bytes / long(sizeof(S)), c.slice));
  const long tiles = (c.slice + tile - 1) / tile;
  tile = (c.slice + tiles - 1) / tiles;
  return (tile + per - 1) / per * per;
}

void roof(const Cube& c) {
  const long copies = (c.total + per - 1) / per, reads = (c.slice + per - 1) / per;
#pragma omp parallel for schedule(static)
  for (long i = 0; i < copies + reads; ++i) {
    if (i < copies) copy(c.cv + i * per, c.d + i * per, std::min(per, c.total - i * per));
    else read(c.m + (i - copies) * per, std::min(per, c.slice - (i - copies) * per));
  }
  _mm_sfence();
}

// mode 0: multiply, 1: copy, 2: multBy from its first 4 KiB
void tile_walk(const Cube& c, long bytes, int mode, long prefetch) {
  const long tile = tile_elements(c, bytes), runs = tile / per, tiles = (c.slice + tile - 1) / tile;
#pragma omp parallel for schedule(static)
  for (long i = 0; i < tiles * c.T * runs; ++i) {
    const long q = i / runs, s = i - q * runs, t = q % c.T, b = q / c.T, j = b * tile + s * per;
    if (j >= c.slice) continue;
    const long e = t * c.slice + j, n = std::min(per, c.slice - j);
    if (mode == 1) copy(c.cv + e, c.d + e, n);
    else if (mode == 2) multiply(c.cv + e, c.m, c.d + e, n, 511, 0);
    else multiply(c.cv + e, c.m + j, c.d + e, n, -1, prefetch);
  }
  _mm_sfence();
}

void wrap_walk(const Cube& c, long bytes) {
  const long span = bytes / long(sizeof(S)), chunks = (c.total + per - 1) / per;
#pragma omp parallel for schedule(static)
  for (long i = 0; i < chunks; ++i) {
    const long b = i * per, n = std::min(per, c.total - b);
    for (long j = 0, o = b % span; j < n; o = 0) {
      const long len = std::min(n - j, span - o);
      multiply(c.cv + b + j, c.m + o, c.d + b + j, len, -1, 0);
      j += len;
    }
  }
  _mm_sfence();
}

void dates_walk(const Cube& c, long bytes) {
  const long run = bytes / long(sizeof(S)), runs = (c.slice + run - 1) / run;
#pragma omp parallel for schedule(static)
  for (long q = 0; q < runs; ++q) {
    const long j = q * run, n = std::min(run, c.slice - j);
    for (long t = 0; t < c.T; ++t) multiply(c.cv + t * c.slice + j, c.m + j, c.d + t * c.slice + j, n, -1, 0);
  }
  _mm_sfence();
}

// Tiles of `bytes`, U dates at a time (the dates past the last whole group
// one or two at a time); skewed: date u's stream moved back h[u] elements.
void group_walk(const Cube& c, long bytes, int U, bool skewed) {
  const long tile = tile_elements(c, bytes), runs = tile / per, tiles = (c.slice + tile - 1) / tile,
             groups = (c.T + U - 1) / U;
  long h[8] = {};
  const long page = 4096 / long(sizeof(S)), stride_mod = c.slice % page;
  for (int u = 0; skewed && u < U; ++u)  // date u's stream u/U of a page from date 0's: u*stride - h[u] = u*page/U (mod page)
    h[u] = (((long(u) * stride_mod - long(u) * page / U) % page) + page) % page;
#pragma omp parallel for schedule(static)
  for (long i = 0; i < tiles * groups * runs; ++i) {
    const long q = i / runs, s = i - q * runs, g = q % groups, b = q / groups, j = b * tile + s * per;
    if (j >= c.slice) continue;
    const long n = std::min(per, c.slice - j);
    for (long t = g * U; t < std::min(c.T, (g + 1) * U);) {
      const long e = t * c.slice + j, left = std::min(c.T, (g + 1) * U) - t;
      S* out = c.cv + e;
      const S *m = c.m + j, *d = c.d + e;
      if (left >= 8 && U >= 8 && !skewed) multiply_dates<8>(out, m, d, n, c.slice), t += 8;
      else if (left >= 4 && U >= 4) skewed ? multiply_skewed<4>(out, m, d, n, c.slice, h) : multiply_dates<4>(out, m, d, n, c.slice), t += 4;
      else if (left >= 2 && (U == 2 || !skewed)) skewed ? multiply_skewed<2>(out, m, d, n, c.slice, h) : multiply_dates<2>(out, m, d, n, c.slice), t += 2;
      else multiply(out, m, d, n, -1, 0), t += 1;
    }
  }
  _mm_sfence();
}

double run(const Cube& c, const std::string& v) {
  const double t0 = now();
  const auto field = [&](int k) {  // the k-th ':'-separated number
    std::size_t p = 0;
    for (int i = 0; i < k; ++i) p = v.find(':', p) + 1;
    return atol(v.c_str() + p + (v.compare(p, 2, "pf") == 0 ? 2 : 0));
  };
  const long kib = v == "copy" ? 0 : field(1) << 10;
  if (v == "copy") roof(c);
  else if (kib <= 0) { fprintf(stderr, "flat_walks: %s: KIB must be positive\n", v.c_str()); exit(2); }
  else if (v.rfind("tile:", 0) == 0) tile_walk(c, kib, 0, v.find(":pf") != std::string::npos ? field(2) : 0);
  else if (v.rfind("copywalk:", 0) == 0) tile_walk(c, kib, 1, 0);
  else if (v.rfind("mtiny:", 0) == 0) tile_walk(c, kib, 2, 0);
  else if (v.rfind("mwrap:", 0) == 0) wrap_walk(c, kib);
  else if (v.rfind("dates:", 0) == 0) dates_walk(c, kib);
  else if (v.rfind("skew:", 0) == 0) group_walk(c, kib, int(field(2)) >= 4 ? 4 : 2, true);
  else if (v.rfind("pair:", 0) == 0) group_walk(c, kib, int(field(2)) >= 8 ? 8 : int(field(2)) >= 4 ? 4 : 2, false);
  else { fprintf(stderr, "flat_walks: unknown variant %s\n", v.c_str()); exit(2); }
  return now() - t0;
}

}  // namespace

int main(int argc, char** argv) {
  if (argc < 5) {
    fprintf(stderr, "usage: flat_walks DATES IDS REPEATS VARIANT...\n");
    return 2;
  }
  Cube c;
  c.T = atol(argv[1]);
  c.slice = atol(argv[2]) * K;
  c.total = c.T * c.slice;
  const int repeats = atoi(argv[3]);
  if (c.T < 1 || c.slice < 2 || c.slice % 2 || repeats < 1) {
    fprintf(stderr, "flat_walks: DATES >= 1, IDS even, REPEATS >= 1\n");
    return 2;
  }
  std::vector<std::string> variants(argv + 4, argv + argc);
  const auto alloc = [](long n) {
    const std::size_t bytes = (std::size_t(n) * sizeof(S) + 4095) / 4096 * 4096;
    S* p = static_cast<S*>(aligned_alloc(4096, bytes));
    if (!p) fprintf(stderr, "flat_walks: %zu bytes not available\n", bytes), exit(1);
    return p;
  };
  c.d = alloc(c.total);
  c.cv = alloc(c.total);
  c.m = alloc(c.slice);
#pragma omp parallel for schedule(static)  // first touch by the threads that walk them
  for (long i = 0; i < c.total; ++i) c.d[i] = 1.0 + double(i % 7), c.cv[i] = 0;
  for (long j = 0; j < c.slice; ++j) c.m[j] = 0.5 + double(j % 3);
  for (const auto& v : variants) {  // the walks that compute cv: every element right
    const bool computes = v.rfind("tile:", 0) == 0 || v.rfind("dates:", 0) == 0 || v.rfind("pair:", 0) == 0 ||
                          v.rfind("skew:", 0) == 0;
    if (!computes) continue;
    std::fill(c.cv, c.cv + c.total, S(-1));
    run(c, v);
    for (long e = 0; e < c.total; ++e)
      if (c.cv[e] != c.m[e % c.slice] * c.d[e]) {
        fprintf(stderr, "flat_walks: %s wrote element %ld wrong\n", v.c_str(), e);
        return 1;
      }
  }
  for (const double w = now(); now() - w < 3;)  // memory just touched is slow for seconds
    for (const auto& v : variants) run(c, "copy"), run(c, v);
  std::vector<std::vector<double>> ratio(variants.size());
  std::vector<double> copies;
  const std::size_t n = variants.size();
  for (int r = 0; r < repeats; ++r) {
    double before = run(c, "copy");
    for (std::size_t i = 0; i < n; ++i) {
      const std::size_t v = (i + std::size_t(r)) % n;
      const double t = run(c, variants[v]), after = run(c, "copy");
      ratio[v].push_back(0.5 * (before + after) / t);
      copies.push_back(before);
      before = after;
    }
  }
  const double bytes = (2.0 * double(c.total) + double(c.slice)) * sizeof(S);
  std::sort(copies.begin(), copies.end());
  printf("flat_walks: %ld x %ld x %ld doubles, %d threads, %d repeats; copy roof %.1f GB/s median (%.1f-%.1f)\n", c.T,
         c.slice / K, K, omp_get_max_threads(), repeats, bytes / copies[copies.size() / 2] / 1e9,
         bytes / copies.back() / 1e9, bytes / copies.front() / 1e9);
  printf("%-18s %8s %8s %8s %8s %8s   (x the copies before and after it)\n", "variant", "median", "q1", "q3", "min", "max");
  for (std::size_t v = 0; v < n; ++v) {
    auto& x = ratio[v];
    std::sort(x.begin(), x.end());
    const std::size_t m = x.size();
    printf("%-18s %8.3f %8.3f %8.3f %8.3f %8.3f\n", variants[v].c_str(), x[m / 2], x[m / 4], x[3 * m / 4], x.front(),
           x.back());
  }
  return sink == 42 ? 1 : 0;  // keeps the reads
}
