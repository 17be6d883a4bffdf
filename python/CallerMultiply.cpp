#include "python/CallerMultiply.hpp"

namespace cvest::python {

namespace {

// A clone of each loop per vector width, chosen once at load time by the
// CPU (GCC's function multi-versioning; glibc's ifunc): the build stays
// portable, and cached arrays go at the width NumPy's own loops use.
#if defined(__GNUC__) && !defined(__clang__) && !defined(__CUDACC__) && defined(__x86_64__)
#define CVEST_CLONES __attribute__((target_clones("avx512f", "avx2", "default")))
#else
#define CVEST_CLONES
#endif

CVEST_CLONES void times_f64(const double* a, const double* b, double* out,
                            std::int64_t n) {
  for (std::int64_t j = 0; j < n; ++j) out[j] = a[j] * b[j];
}
CVEST_CLONES void times_f32(const float* a, const float* b, float* out,
                            std::int64_t n) {
  for (std::int64_t j = 0; j < n; ++j) out[j] = a[j] * b[j];
}
CVEST_CLONES void scale_f64(double s, const double* b, double* out, std::int64_t n) {
  for (std::int64_t j = 0; j < n; ++j) out[j] = s * b[j];
}
CVEST_CLONES void scale_f32(float s, const float* b, float* out, std::int64_t n) {
  for (std::int64_t j = 0; j < n; ++j) out[j] = s * b[j];
}

void times(const double* a, const double* b, double* out, std::int64_t n) { times_f64(a, b, out, n); }
void times(const float* a, const float* b, float* out, std::int64_t n) { times_f32(a, b, out, n); }
void scale(double s, const double* b, double* out, std::int64_t n) { scale_f64(s, b, out, n); }
void scale(float s, const float* b, float* out, std::int64_t n) { scale_f32(s, b, out, n); }

template <class Scalar>
void c_order(const Scalar* m, const Scalar* d, Scalar* cv, std::int64_t T, std::int64_t n) {
  for (std::int64_t t = 0; t < T; ++t) times(m, d + t * n, cv + t * n, n);
}

template <class Scalar>
void f_order(const Scalar* m, const Scalar* d, Scalar* cv, std::int64_t T, std::int64_t n) {
  if (T == 1) return times(m, d, cv, n);  // one date: the columns are one row
  for (std::int64_t j = 0; j < n; ++j) scale(m[j], d + j * T, cv + j * T, T);
}

}  // namespace

void multiply_c(const double* m, const double* d, double* cv, std::int64_t T, std::int64_t n) { c_order(m, d, cv, T, n); }
void multiply_c(const float* m, const float* d, float* cv, std::int64_t T, std::int64_t n) { c_order(m, d, cv, T, n); }
void multiply_f(const double* m, const double* d, double* cv, std::int64_t T, std::int64_t n) { f_order(m, d, cv, T, n); }
void multiply_f(const float* m, const float* d, float* cv, std::int64_t T, std::int64_t n) { f_order(m, d, cv, T, n); }

}  // namespace cvest::python
