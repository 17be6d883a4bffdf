#pragma once
// cvest.multiply on the calling thread, without Kokkos: for arrays too small
// for the hand-off to the module's Kokkos thread to pay (about 12 us a call,
// against NumPy's 1 us for a small array), and in a forked child, where
// neither that thread nor Kokkos' OpenMP threads exist (python/KokkosThread.hpp).
// The same products as every strategy and NumPy, bit for bit: one IEEE
// multiplication per element, in loops the compiler vectorizes for the CPU
// it runs on (NumPy dispatches its loops the same way).
#include <cstddef>
#include <cstdint>

namespace cvest::python {

// C order: cv[t, i, k] = m[i, k] * d[t, i, k], rows of n = N * K values.
void multiply_c(const double* m, const double* d, double* cv, std::int64_t T, std::int64_t n);
void multiply_c(const float* m, const float* d, float* cv, std::int64_t T, std::int64_t n);
// Fortran order: cv[:, i, k] = m[i, k] * d[:, i, k], n = N * K columns of T.
void multiply_f(const double* m, const double* d, double* cv, std::int64_t T, std::int64_t n);
void multiply_f(const float* m, const float* d, float* cv, std::int64_t T, std::int64_t n);

}  // namespace cvest::python
