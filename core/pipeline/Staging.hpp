#pragma once
// Moving blocks between C-order host staging and the compute space's views
// (transposes for LayoutLeft), the execution-space instances the steps run
// on, and the clock that times them.
#include "core/Policies.hpp"
#include "core/Spaces.hpp"
#include "core/Types.hpp"
#include "core/pipeline/Recording.hpp"

#include <Kokkos_Core.hpp>

#include <algorithm>
#include <stdexcept>
#include <type_traits>
#ifdef __SSE2__
#include <emmintrin.h>
#include <xmmintrin.h>
#endif
#if defined(__x86_64__) && !defined(__CUDACC__)
#include <immintrin.h>
#endif

namespace cvest::pipeline_detail {

template <class Scalar, class Layout, class Mem>
using BlockCube = Cube<Scalar, Layout, Mem>;

inline constexpr Index max_tile_columns = 256;  // 16 ids of up to 16 columns

// Dates [t0, t1) of columns [j0, J), one value at a time: what the vector
// steps below leave over.
template <bool ToLeft, class Scalar>
inline void transpose_values(Scalar* row, Index stride, Scalar* const* cols, Index j0, Index J, Index t0, Index t1) {
  for (Index t = t0; t < t1; ++t)
    for (Index j = j0; j < J; ++j) {
      if constexpr (ToLeft) cols[j][t] = row[t * stride + j];
      else row[t * stride + j] = cols[j][t];
    }
}

// One tile of a C-order <-> LayoutLeft transpose of doubles: `row` is the
// C-order side (date t's values at row + t*stride, the tile's J columns
// contiguous), `cols[j]` the LayoutLeft side's column j (its T dates
// contiguous). ToLeft: row -> cols. Moved four dates by four columns at a
// time with AVX2 where the processor has it (chosen at run time: the build
// targets baseline x86-64), then two by two with SSE2, then one by one.
// A 4x4 block is four loads and four stores where the element-wise loop
// made sixteen of each (that loop ran at a third of in-cache copy speed; two
// by two at about half).
#if defined(__x86_64__) && !defined(__CUDACC__) && (defined(__GNUC__) || defined(__clang__))
#define CVEST_TRANSPOSE_AVX2 1

// Dates [0, returned) of the tile, four at a time.
template <bool ToLeft>
__attribute__((target("avx2"))) Index transpose_tile_avx2(double* row, Index stride, double* const* cols, Index J,
                                                           Index T) {
  Index t = 0;
  for (; t + 3 < T; t += 4) {
    double* r0 = row + t * stride;
    double* r1 = r0 + stride;
    double* r2 = r1 + stride;
    double* r3 = r2 + stride;
    Index j = 0;
    for (; j + 3 < J; j += 4) {
      // rows (a, b, c, d) = dates t..t+3 of columns j..j+3, or columns j..j+3 of dates t..t+3
      __m256d a, b, c, d;
      if constexpr (ToLeft) {
        a = _mm256_loadu_pd(r0 + j), b = _mm256_loadu_pd(r1 + j), c = _mm256_loadu_pd(r2 + j),
        d = _mm256_loadu_pd(r3 + j);
      } else {
        a = _mm256_loadu_pd(cols[j] + t), b = _mm256_loadu_pd(cols[j + 1] + t), c = _mm256_loadu_pd(cols[j + 2] + t),
        d = _mm256_loadu_pd(cols[j + 3] + t);
      }
      const __m256d ab_lo = _mm256_unpacklo_pd(a, b), ab_hi = _mm256_unpackhi_pd(a, b);
      const __m256d cd_lo = _mm256_unpacklo_pd(c, d), cd_hi = _mm256_unpackhi_pd(c, d);
      const __m256d o0 = _mm256_permute2f128_pd(ab_lo, cd_lo, 0x20), o1 = _mm256_permute2f128_pd(ab_hi, cd_hi, 0x20);
      const __m256d o2 = _mm256_permute2f128_pd(ab_lo, cd_lo, 0x31), o3 = _mm256_permute2f128_pd(ab_hi, cd_hi, 0x31);
      if constexpr (ToLeft) {
        _mm256_storeu_pd(cols[j] + t, o0), _mm256_storeu_pd(cols[j + 1] + t, o1);
        _mm256_storeu_pd(cols[j + 2] + t, o2), _mm256_storeu_pd(cols[j + 3] + t, o3);
      } else {
        _mm256_storeu_pd(r0 + j, o0), _mm256_storeu_pd(r1 + j, o1);
        _mm256_storeu_pd(r2 + j, o2), _mm256_storeu_pd(r3 + j, o3);
      }
    }
    transpose_values<ToLeft>(row, stride, cols, j, J, t, t + 4);
  }
  return t;
}
#endif

inline bool transpose_avx2_available() {
#ifdef CVEST_TRANSPOSE_AVX2
  static const bool has = __builtin_cpu_supports("avx2");
  return has;
#else
  return false;
#endif
}

// `avx2`: take the AVX2 steps (tests pass false to check the others alone).
template <bool ToLeft>
inline void transpose_tile(double* row, Index stride, double* const* cols, Index J, Index T,
                           bool avx2 = transpose_avx2_available()) {
  Index t = 0;
#ifdef CVEST_TRANSPOSE_AVX2
  if (avx2) t = transpose_tile_avx2<ToLeft>(row, stride, cols, J, T);
#else
  (void)avx2;
#endif
#ifdef __SSE2__
  for (; t + 1 < T; t += 2) {
    double* r0 = row + t * stride;
    double* r1 = r0 + stride;
    Index j = 0;
    for (; j + 1 < J; j += 2) {
      if constexpr (ToLeft) {
        const __m128d a = _mm_loadu_pd(r0 + j), b = _mm_loadu_pd(r1 + j);
        _mm_storeu_pd(cols[j] + t, _mm_unpacklo_pd(a, b));
        _mm_storeu_pd(cols[j + 1] + t, _mm_unpackhi_pd(a, b));
      } else {
        const __m128d a = _mm_loadu_pd(cols[j] + t), b = _mm_loadu_pd(cols[j + 1] + t);
        _mm_storeu_pd(r0 + j, _mm_unpacklo_pd(a, b));
        _mm_storeu_pd(r1 + j, _mm_unpackhi_pd(a, b));
      }
    }
    transpose_values<ToLeft>(row, stride, cols, j, J, t, t + 2);
  }
#endif
  transpose_values<ToLeft>(row, stride, cols, 0, J, t, T);
}

// The same for floats: four dates by four columns per SSE load and store
// (baseline x86-64 has SSE), then one by one.
template <bool ToLeft>
inline void transpose_tile(float* row, Index stride, float* const* cols, Index J, Index T) {
  Index t = 0;
#ifdef __SSE2__
  for (; t + 3 < T; t += 4) {
    float* r0 = row + t * stride;
    float* r1 = r0 + stride;
    float* r2 = r1 + stride;
    float* r3 = r2 + stride;
    Index j = 0;
    for (; j + 3 < J; j += 4) {
      __m128 a, b, c, d;
      if constexpr (ToLeft) {
        a = _mm_loadu_ps(r0 + j), b = _mm_loadu_ps(r1 + j), c = _mm_loadu_ps(r2 + j), d = _mm_loadu_ps(r3 + j);
      } else {
        a = _mm_loadu_ps(cols[j] + t), b = _mm_loadu_ps(cols[j + 1] + t), c = _mm_loadu_ps(cols[j + 2] + t),
        d = _mm_loadu_ps(cols[j + 3] + t);
      }
      _MM_TRANSPOSE4_PS(a, b, c, d);
      if constexpr (ToLeft) {
        _mm_storeu_ps(cols[j] + t, a), _mm_storeu_ps(cols[j + 1] + t, b);
        _mm_storeu_ps(cols[j + 2] + t, c), _mm_storeu_ps(cols[j + 3] + t, d);
      } else {
        _mm_storeu_ps(r0 + j, a), _mm_storeu_ps(r1 + j, b), _mm_storeu_ps(r2 + j, c), _mm_storeu_ps(r3 + j, d);
      }
    }
    transpose_values<ToLeft>(row, stride, cols, j, J, t, t + 4);
  }
#endif
  transpose_values<ToLeft>(row, stride, cols, 0, J, t, T);
}

// Host spaces: between a C-order block `c` (date t's N*K values at
// c + t*c_stride: a whole block, or the slice of a wider block's ids a
// LayoutLeft tile is computed from) and a compact LayoutLeft cube `left`
// (T, N, K). ToLeft: c -> left. Indexed directly, so the inner loops are
// plain strided copies (a one-date block, T = 1, is an (N, K) <-> (K, N)
// transpose). Each work item takes a tile of `tile` ids over all dates: the
// C-order side of a tile is T runs of tile*K values, the LayoutLeft side K
// runs of tile*T; with tile*K values to a few cache lines per date, one
// tile's lines stay in L1 while every value in them is moved (an
// element-wise MDRange moved 1.3 GB/s on one-date blocks; 256-id items
// swept a megabyte per column, 5-10 GB/s).
template <bool ToLeft, class Space, class Scalar>
void transpose_host(Space const& space, Scalar* c, Index c_stride, Scalar* left, Index T, Index N, Index K,
                    const char* label) {
  const Index tile = T == 1 ? 1024 : 16;
  if constexpr (std::is_same_v<Scalar, double> || std::is_same_v<Scalar, float>) {
    if (T > 1 && tile * K <= max_tile_columns) {  // tiles of 16 ids x K columns, every date
      Kokkos::parallel_for(label, policy::range(space, (N + tile - 1) / tile), [=](Index q) {
        const Index i0 = q * tile, i1 = std::min(N, i0 + tile), J = (i1 - i0) * K;
        Scalar* cols[max_tile_columns];  // column j = (i, k) of the tile, on the LayoutLeft side
        for (Index j = 0; j < J; ++j) cols[j] = left + T * ((i0 + j / K) + N * (j % K));
        transpose_tile<ToLeft>(c + i0 * K, c_stride, cols, J, T);
      });
      return;
    }
  }
  Kokkos::parallel_for(label, policy::range(space, (N + tile - 1) / tile), [=](Index q) {
    const Index i0 = q * tile, i1 = std::min(N, i0 + tile);
    if constexpr (ToLeft) {  // left[t + T*(i + N*k)] = c[t*c_stride + i*K + k]
      if (T == 1) {
        for (Index k = 0; k < K; ++k)
          for (Index i = i0; i < i1; ++i) left[i + N * k] = c[i * K + k];
      } else {
        for (Index i = i0; i < i1; ++i)
          for (Index k = 0; k < K; ++k) {
            Scalar* o = left + T * (i + N * k);
            const Scalar* src = c + i * K + k;
            for (Index t = 0; t < T; ++t) o[t] = src[t * c_stride];
          }
      }
    } else {  // c[t*c_stride + i*K + k] = left[t + T*(i + N*k)]
      for (Index t = 0; t < T; ++t) {
        Scalar* o = c + t * c_stride;
        for (Index i = i0; i < i1; ++i)
          for (Index k = 0; k < K; ++k) o[i * K + k] = left[t + T * (i + N * k)];
      }
    }
  });
}

// C-order staging <-> the compute view (layouts may differ): on host spaces
// transposed in place of a copy, on devices copied as C order and
// transposed by a device kernel. to(t, i, k) = from(t, i, k) between layouts.
template <class Space, class From, class To>
void transpose(Space const& space, const From& from, const To& to, const char* label) {
  using Layout = typename To::array_layout;
  const Index T = to.extent(0), N = to.extent(1), K = to.extent(2);
  if constexpr (policy::on_host<Space>) {
    // Both views are contiguous blocks.
    using Scalar = typename To::non_const_value_type;
    auto* in = const_cast<Scalar*>(from.data());  // only read: one kernel serves both directions
    if constexpr (std::is_same_v<Layout, Kokkos::LayoutLeft>)
      transpose_host<true>(space, in, N * K, to.data(), T, N, K, label);
    else
      transpose_host<false>(space, to.data(), N * K, in, T, N, K, label);
  } else {
    policy::for_cube_elements<Space, Layout>(label, space, T, N, K,
                                             KOKKOS_LAMBDA(Index t, Index i, Index k) { to(t, i, k) = from(t, i, k); });
  }
}

template <class Space, class Scalar, class Layout>
void stage(Space const& space, const Cube<const Scalar, Kokkos::LayoutRight, Kokkos::HostSpace>& from_host,
           const Cube<Scalar, Layout, typename Space::memory_space>& to,
           const Cube<Scalar, Kokkos::LayoutRight, typename Space::memory_space>& scratch) {
  if constexpr (std::is_same_v<Layout, Kokkos::LayoutRight>) {
    Kokkos::deep_copy(space, to, from_host);
  } else if constexpr (policy::on_host<Space>) {
    transpose(space, from_host, to, "cvest::pipeline::transpose_in");
  } else {
    Kokkos::deep_copy(space, scratch, from_host);
    transpose(space, scratch, to, "cvest::pipeline::transpose_in");
  }
}

template <class Space, class Scalar, class Layout>
void unstage(Space const& space, const Cube<const Scalar, Layout, typename Space::memory_space>& from,
             const Cube<Scalar, Kokkos::LayoutRight, Kokkos::HostSpace>& to_host,
             const Cube<Scalar, Kokkos::LayoutRight, typename Space::memory_space>& scratch) {
  if constexpr (std::is_same_v<Layout, Kokkos::LayoutRight>) {
    Kokkos::deep_copy(space, to_host, from);
  } else if constexpr (policy::on_host<Space>) {
    transpose(space, from, to_host, "cvest::pipeline::transpose_out");
  } else {
    transpose(space, from, scratch, "cvest::pipeline::transpose_out");
    Kokkos::deep_copy(space, to_host, scratch);
  }
}

// The execution-space instances the staged path issues work to: copies in
// (h2d), kernels, copies out (d2h). On Cuda each is its own stream, so block
// k+1's copy in and block k-1's copy out overlap block k's kernel; on host
// spaces all three are the one instance and every step is synchronous.
template <class Space>
struct Instances {
  Space h2d, compute, d2h;
};

#ifdef KOKKOS_ENABLE_CUDA
template <>
struct Instances<Kokkos::Cuda> {
  // Streams made here and instances made from them (works on 3.4 and 4.x);
  // the instances go before the streams.
  struct Streams {
    cudaStream_t s[3] = {};
    Streams() {
      for (auto& st : s)
        if (cudaStreamCreateWithFlags(&st, cudaStreamNonBlocking) != cudaSuccess)
          throw std::runtime_error("cvest: cannot create a Cuda stream");
    }
    ~Streams() {
      for (auto st : s)
        if (st) cudaStreamDestroy(st);
    }
  } streams;
  Kokkos::Cuda h2d{streams.s[0]}, compute{streams.s[1]}, d2h{streams.s[2]};
};
#endif

// When the staged path's steps ran, per step kind (h2d, kernel, d2h; one of
// each is in flight at a time). On host spaces every step has finished when
// its call returns, so a mark is the host clock after a fence. On Cuda a mark
// is an event recorded on the step's stream and read once the fence that
// retires the step has returned: h2d, kernel and d2h are timed on the device's
// own clock, not by when the host thread happened to look.
enum class Step { h2d, kernel, d2h };

template <class Space>
class StepClock {
 public:
  StepClock(Recorder& rec, Instances<Space>&) : rec_(rec) {}
  void begin(Step s, Space const&) { begin_[int(s)] = rec_.now(); }
  void end(Step s, Space const& space) {
    space.fence();
    end_[int(s)] = rec_.now();
  }
  // Seconds since the pipeline started; call after the step's fence.
  std::pair<double, double> span(Step s) { return {begin_[int(s)], end_[int(s)]}; }

 private:
  Recorder& rec_;
  double begin_[3] = {}, end_[3] = {};
};

#ifdef KOKKOS_ENABLE_CUDA
template <>
class StepClock<Kokkos::Cuda> {
 public:
  // `origin_` is recorded and waited for now, so device times map onto the
  // host clock at this point.
  StepClock(Recorder& rec, Instances<Kokkos::Cuda>& inst) {
    check(cudaEventCreate(&origin_));
    for (int i = 0; i < 3; ++i) {
      check(cudaEventCreate(&begin_[i]));
      check(cudaEventCreate(&end_[i]));
    }
    check(cudaEventRecord(origin_, inst.h2d.cuda_stream()));
    check(cudaEventSynchronize(origin_));
    origin_s_ = rec.now();
  }
  ~StepClock() {
    for (auto e : {origin_, begin_[0], begin_[1], begin_[2], end_[0], end_[1], end_[2]})
      if (e) cudaEventDestroy(e);
  }
  StepClock(const StepClock&) = delete;
  StepClock& operator=(const StepClock&) = delete;
  void begin(Step s, Kokkos::Cuda const& space) { check(cudaEventRecord(begin_[int(s)], space.cuda_stream())); }
  void end(Step s, Kokkos::Cuda const& space) { check(cudaEventRecord(end_[int(s)], space.cuda_stream())); }
  std::pair<double, double> span(Step s) { return {at(begin_[int(s)]), at(end_[int(s)])}; }

 private:
  static void check(cudaError_t e) {
    if (e != cudaSuccess) throw std::runtime_error(std::string("cvest: Cuda event: ") + cudaGetErrorString(e));
  }
  double at(cudaEvent_t e) const {
    float ms = 0;
    check(cudaEventElapsedTime(&ms, origin_, e));
    return origin_s_ + double(ms) * 1e-3;
  }
  cudaEvent_t origin_ = nullptr, begin_[3] = {}, end_[3] = {};
  double origin_s_ = 0;
};
#endif

}  // namespace cvest::pipeline_detail
