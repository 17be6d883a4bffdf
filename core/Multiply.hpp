#pragma once
// cv(t, i, k) = m(i, k) * d(t, i, k), cut into work items by a Strategy.
#include "core/Strategy.hpp"
#include "core/Types.hpp"

#include <stdexcept>
#include <string>

namespace cvest {

// "(2, 3, 4)": a view's extents, for messages.
template <class View>
std::string extents(const View& v) {
  std::string s = "(";
  for (unsigned r = 0; r < View::rank; ++r) {
    if (r) s += ", ";
    s += std::to_string(v.extent(r));
  }
  return s + ")";
}

template <class Scalar, class Layout, class MemSpace>
struct Operands {
  Table<const Scalar, Layout, MemSpace> m;   // multBy (N, K)
  Cube<const Scalar, Layout, MemSpace> d;    // discount (T, N, K)
  Cube<Scalar, Layout, MemSpace> cv;         // result (T, N, K)
};

// Checks extents and contiguity; throws std::invalid_argument naming the
// views and the shapes expected versus found.
template <class Scalar, class Layout, class MemSpace>
void check_operands(const Operands<Scalar, Layout, MemSpace>& ops) {
  const auto shape = [&] {
    return " (multBy " + extents(ops.m) + ", discount " + extents(ops.d) + ", cv " + extents(ops.cv) + ")";
  };
  if (ops.m.extent(0) != ops.d.extent(1) || ops.m.extent(1) != ops.d.extent(2))
    throw std::invalid_argument("multBy must be (N, K) of discount (T, N, K)" + shape());
  if (ops.cv.extent(0) != ops.d.extent(0) || ops.cv.extent(1) != ops.d.extent(1) ||
      ops.cv.extent(2) != ops.d.extent(2))
    throw std::invalid_argument("cv must have discount's shape" + shape());
  if (!ops.m.span_is_contiguous() || !ops.d.span_is_contiguous() || !ops.cv.span_is_contiguous())
    throw std::invalid_argument("multBy, discount and cv must be contiguous views" + shape());
}

// Where cv goes after the kernel, which decides its stores on the host.
// memory: written once and not read again soon (a large array): streaming
// stores skip the read-for-ownership of every line. cache: another pass reads
// the block at once while it is still in cache (the pipeline's transpose out
// of a LayoutLeft block, or the write of a block to the file): regular stores
// leave it there, where streaming stores would send it to memory and make
// that pass read it back (a LayoutLeft transpose out took 0.43 s after
// streaming stores against 0.13 s after regular ones, 1.6 GB in 2 MiB blocks).
enum class CvNext { memory, cache };

// Runs one strategy on `space`. Returns when the kernel has been launched;
// fence `space` before reading cv on the host.
template <class ExecSpace, class Scalar, class Layout>
void multiply(Strategy strategy, ExecSpace const& space,
              const Operands<Scalar, Layout, typename ExecSpace::memory_space>& ops, CvNext next = CvNext::memory);

// Whether `strategy` writes cv with streaming stores on ExecSpace for `layout`
// on a (T, N, K) cube of `element_size`-byte values: only where cv goes to
// memory and its work items write contiguous runs of at least
// streaming::min_run_bytes.
template <class ExecSpace>
bool writes_streaming(Strategy strategy, LayoutKind layout, Index T, Index N, Index K, std::size_t element_size,
                      CvNext next = CvNext::memory);

}  // namespace cvest
