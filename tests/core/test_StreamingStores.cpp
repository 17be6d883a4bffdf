// The host's bulk loops of core/StreamingStores.hpp against the plain loop,
// bit for bit, at every alignment of out, for run lengths either side of the
// vector width (the fast path for whole-vector runs and the per-run path).
#include "core/StreamingStores.hpp"

#include <catch2/catch.hpp>

#include <cstdint>
#include <cstring>
#include <vector>

using namespace cvest;

namespace {

// out[j] = m[(t0 + j) / T] * d[j] (or d[j] for a copy) for j < n, checked
// bit for bit, and the elements around it untouched.
template <class Scalar, bool Stream, bool Copy>
void check_runs(std::size_t T, std::size_t t0, std::size_t n, std::size_t offset) {
  CAPTURE(sizeof(Scalar), Stream, Copy, T, t0, n, offset);
  const std::size_t runs = (t0 + n + T - 1) / T + 1;
  std::vector<Scalar> m(runs), d(n + 1);
  for (std::size_t r = 0; r < runs; ++r) m[r] = Scalar(1.0 + 0.37 * double(r)) / Scalar(3);
  for (std::size_t j = 0; j < d.size(); ++j) d[j] = Scalar(0.1 * double(j) - 7.3) / Scalar(7);
  // 16-byte aligned storage, out starting `offset` elements past it
  constexpr std::size_t width = 16 / sizeof(Scalar);
  std::vector<Scalar> storage(n + offset + 3 * width, Scalar(-99.5));
  const auto base = reinterpret_cast<std::uintptr_t>(storage.data());  // malloc's: 16-byte aligned
  Scalar* aligned = storage.data() + width + ((16 - base % 16) % 16) / sizeof(Scalar);
  Scalar* out = aligned + offset;
  if constexpr (Copy) streaming::scaled_runs<Stream>(out, d.data(), n, T, t0, streaming::Unit{});
  else streaming::scaled_runs<Stream>(out, d.data(), n, T, t0, m.data());
  streaming::fence_this_thread();
  std::size_t wrong = 0;
  for (std::size_t j = 0; j < n; ++j) {
    const Scalar want = Copy ? d[j] : Scalar(m[(t0 + j) / T] * d[j]);
    wrong += std::memcmp(&out[j], &want, sizeof(Scalar)) != 0;
  }
  CHECK(wrong == 0);
  CHECK(out[-1] == Scalar(-99.5));
  CHECK(out[n] == Scalar(-99.5));
}

template <class Scalar>
void check_all() {
  for (std::size_t T : {1, 2, 3, 4, 5, 8, 12, 16, 40, 100})
    for (std::size_t t0 : {std::size_t(0), std::size_t(1), T - 1})
      for (std::size_t n : {std::size_t(0), std::size_t(1), T - t0, 3 * T + 1, std::size_t(1000)})
        for (std::size_t offset = 0; offset < 4; ++offset) {
          if (t0 >= T) continue;
          check_runs<Scalar, true, false>(T, t0, n, offset);
          check_runs<Scalar, false, false>(T, t0, n, offset);
          check_runs<Scalar, true, true>(T, t0, n, offset);
        }
}

}  // namespace

TEST_CASE("runs of T scaled one multBy value each equal the plain loop bit for bit", "[multiply][streaming]") {
  check_all<double>();
  check_all<float>();
}
