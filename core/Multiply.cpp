// Instantiates the kernels once for every execution space this build enables,
// both precisions and both layouts, so the app and the tests link them rather
// than compiling them again.
#include "core/MultiplyKernels.hpp"

namespace cvest {

#define CVEST_INSTANTIATE(SPACE, SCALAR, LAYOUT)                                            \
  template void multiply<SPACE, SCALAR, LAYOUT>(Strategy, SPACE const&,                     \
                                                const Operands<SCALAR, LAYOUT, SPACE::memory_space>&, CvNext);

#define CVEST_INSTANTIATE_SPACE(SPACE)                                    \
  CVEST_INSTANTIATE(SPACE, double, Kokkos::LayoutRight)                   \
  CVEST_INSTANTIATE(SPACE, double, Kokkos::LayoutLeft)                    \
  CVEST_INSTANTIATE(SPACE, float, Kokkos::LayoutRight)                    \
  CVEST_INSTANTIATE(SPACE, float, Kokkos::LayoutLeft)                     \
  template bool writes_streaming<SPACE>(Strategy, LayoutKind, Index, Index, Index, std::size_t, CvNext);

#ifdef KOKKOS_ENABLE_SERIAL
CVEST_INSTANTIATE_SPACE(Kokkos::Serial)
#endif
#ifdef KOKKOS_ENABLE_OPENMP
CVEST_INSTANTIATE_SPACE(Kokkos::OpenMP)
#endif
#ifdef KOKKOS_ENABLE_THREADS
CVEST_INSTANTIATE_SPACE(Kokkos::Threads)
#endif
#ifdef KOKKOS_ENABLE_CUDA
CVEST_INSTANTIATE_SPACE(Kokkos::Cuda)
#endif

}  // namespace cvest
