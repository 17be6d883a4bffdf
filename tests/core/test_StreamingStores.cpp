// The host's bulk loops of core/StreamingStores.hpp against the plain loop,
// bit for bit, at every alignment of out, for run lengths either side of the
// vector width (the fast path for whole-vector runs and the per-run path),
// and the copy that reads m beside it (ReadAlong: the roofs in flat's walk).
#include "core/StreamingStores.hpp"

#include "core/Errors.hpp"
#include "core/Spaces.hpp"

#include <catch2/catch.hpp>

#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

using namespace cvest;

namespace {

// Each test in this file at both vector widths where the CPU has 32-byte ones.
template <class F>
void at_each_width(F&& check) {
  const bool before = streaming::use_wide_vectors(false);
  check();
  streaming::use_wide_vectors(true);
  REQUIRE(streaming::wide_vectors() == streaming::wide_vectors_possible());
  if (streaming::wide_vectors()) check();
  streaming::use_wide_vectors(before);
}

// out[j] = m[(t0 + j) / T] * d[j] (or d[j] for a copy, and for a copy that
// reads m beside it) for j < n, in `streams` stretches of runs at once
// `apart` runs apart where they fit, checked bit for bit, the elements
// around it untouched, and a reading copy's sum that of each run's value
// read once.
enum class Runs { scale, copy, read };
template <class Scalar, bool Stream, Runs kind>
void check_runs(std::size_t T, std::size_t t0, std::size_t n, std::size_t offset, int streams = 1,
                std::size_t apart = 0) {
  CAPTURE(sizeof(Scalar), Stream, int(kind), T, t0, n, offset, streams, apart);
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
  std::uint64_t bits = 0;
  if constexpr (kind == Runs::copy)
    streaming::scaled_runs<Stream>(out, d.data(), n, T, t0, streaming::Unit{}, streams, apart);
  else if constexpr (kind == Runs::read)
    streaming::scaled_runs<Stream>(out, d.data(), n, T, t0, streaming::ReadAlong<Scalar>{m.data(), &bits}, streams,
                                   apart);
  else
    streaming::scaled_runs<Stream>(out, d.data(), n, T, t0, m.data(), streams, apart);
  streaming::fence_this_thread();
  std::size_t wrong = 0;
  for (std::size_t j = 0; j < n; ++j) {
    const Scalar want = kind != Runs::scale ? d[j] : Scalar(m[(t0 + j) / T] * d[j]);
    wrong += std::memcmp(&out[j], &want, sizeof(Scalar)) != 0;
  }
  CHECK(wrong == 0);
  std::size_t touched = 0;  // every element of storage outside [0, n)
  for (Scalar* p = storage.data(); p < storage.data() + storage.size(); ++p)
    touched += (p < out || p >= out + n) && *p != Scalar(-99.5);
  CHECK(touched == 0);
  if constexpr (kind == Runs::read) {
    std::uint64_t want = 0;  // the runs [0, n) touches
    for (std::size_t r = 0; n > 0 && r <= (t0 + n - 1) / T; ++r) want += streaming::bits_of(m[r]);
    CHECK(bits == want);
  }
}

template <class Scalar>
void check_all() {
  for (std::size_t T : {1, 2, 3, 4, 5, 6, 8, 10, 12, 14, 16, 28, 40, 100})
    for (std::size_t t0 : {std::size_t(0), std::size_t(1), T - 1})
      for (std::size_t n : {std::size_t(0), std::size_t(1), T - t0, 3 * T + 1, std::size_t(1000)})
        for (std::size_t offset = 0; offset < 32 / sizeof(Scalar); ++offset) {
          if (t0 >= T) continue;
          check_runs<Scalar, true, Runs::scale>(T, t0, n, offset);
          check_runs<Scalar, false, Runs::scale>(T, t0, n, offset);
          check_runs<Scalar, true, Runs::copy>(T, t0, n, offset);
          check_runs<Scalar, true, Runs::read>(T, t0, n, offset);
          // several stretches at once: spacings that fit once, several
          // times, or not at all, and leave runs over
          for (int streams : {2, 4})
            for (std::size_t apart : {1, 2, 3, 4, 7, 40}) {
              check_runs<Scalar, true, Runs::scale>(T, t0, n, offset, streams, apart);
              check_runs<Scalar, true, Runs::copy>(T, t0, n, offset, streams, apart);
              check_runs<Scalar, true, Runs::read>(T, t0, n, offset, streams, apart);
              check_runs<Scalar, false, Runs::read>(T, t0, n, offset, streams, apart);
            }
        }
}

}  // namespace

TEST_CASE("runs of T scaled one multBy value each equal the plain loop bit for bit", "[multiply][streaming]") {
  at_each_width([] {
    check_all<double>();
    check_all<float>();
  });
}

namespace {

// rows_at_once multiplying (RowOf) or copying with ReadAlong: each of the
// `dates` rows of d multiplied by m or copied bit for bit, nothing around
// them touched, and a reading copy's m elements added into the sink
// exactly once each (the sum of their bits), at every alignment of out
// (the scalar head's length, to 16 or to 32 bytes) and of m, with rows
// whose stride keeps out's alignment to 32 (extra 0 where the vectors
// round so) or only to 16 (extra 1: 16-byte vectors).
enum class Rows { multiply, read };
template <class Scalar, bool Stream, Rows kind>
void check_rows(int dates, std::size_t n, std::size_t offset, std::size_t m_offset, std::size_t extra) {
  CAPTURE(sizeof(Scalar), Stream, int(kind), dates, n, offset, m_offset, extra, streaming::wide_vectors());
  constexpr std::size_t width = 16 / sizeof(Scalar);
  // rows a whole number of 16-byte vectors apart: they share out's alignment to 16
  const std::size_t stride_v = ((n + 2 * width + 2 * width - 1) / (2 * width) * 2 + extra) * width;
  std::vector<Scalar> d(std::size_t(dates) * stride_v), m(n + m_offset + 1);
  for (std::size_t j = 0; j < d.size(); ++j) d[j] = Scalar(0.1 * double(j) - 7.3) / Scalar(7);
  for (std::size_t j = 0; j < m.size(); ++j) m[j] = Scalar(1.0 + 0.37 * double(j)) / Scalar(3);
  std::vector<Scalar> storage(std::size_t(dates) * stride_v + offset + 3 * width, Scalar(-99.5));
  const auto base = reinterpret_cast<std::uintptr_t>(storage.data());
  Scalar* out = storage.data() + width + ((16 - base % 16) % 16) / sizeof(Scalar) + offset;
  std::uint64_t bits = 0;
  if constexpr (kind == Rows::read)
    streaming::rows_at_once<Stream>(dates, out, d.data(), n, std::ptrdiff_t(stride_v),
                                    streaming::ReadAlong<Scalar>{m.data() + m_offset, &bits});
  else
    streaming::rows_at_once<Stream>(dates, out, d.data(), n, std::ptrdiff_t(stride_v),
                                    streaming::RowOf<Scalar>{m.data() + m_offset});
  streaming::fence_this_thread();
  if constexpr (kind == Rows::read) {
    std::uint64_t want = 0;
    for (std::size_t j = 0; j < n; ++j) want += streaming::bits_of(m[m_offset + j]);
    CHECK(bits == want);
  }
  std::size_t wrong = 0;
  for (int u = 0; u < dates; ++u)
    for (std::size_t j = 0; j < n; ++j) {
      const Scalar in = d[u * stride_v + j];
      const Scalar want = kind == Rows::read ? in : Scalar(m[m_offset + j] * in);
      wrong += std::memcmp(&out[u * stride_v + j], &want, sizeof(Scalar)) != 0;
    }
  CHECK(wrong == 0);
  CHECK(out[-1] == Scalar(-99.5));
  for (int u = 0; u < dates; ++u) CHECK(out[u * stride_v + n] == Scalar(-99.5));
}

template <class Scalar, Rows kind>
void check_rows_all() {
  for (int dates : {1, 2, 4})
    for (std::size_t n : {0, 1, 3, 4, 5, 17, 33, 1000})
      for (std::size_t offset = 0; offset < 32 / sizeof(Scalar); ++offset)
        for (std::size_t m_offset : {0, 1})
          for (std::size_t extra : {0, 1}) {
            check_rows<Scalar, true, kind>(dates, n, offset, m_offset, extra);
            check_rows<Scalar, false, kind>(dates, n, offset, m_offset, extra);
          }
}

}  // namespace

TEST_CASE("a copy reading m beside it copies every row and reads each m element once", "[roof][streaming]") {
  at_each_width([] {
    check_rows_all<double, Rows::read>();
    check_rows_all<float, Rows::read>();
  });
}

TEST_CASE("rows multiplied at once equal the plain loop bit for bit at either vector width", "[multiply][streaming]") {
  at_each_width([] {
    check_rows_all<double, Rows::multiply>();
    check_rows_all<float, Rows::multiply>();
  });
}

TEST_CASE("CVEST_HOST_VECTORS unset or 16 or 32 where the CPU has them and anything else one error", "[streaming]") {
  const char* before = std::getenv("CVEST_HOST_VECTORS");
  const std::string kept = before ? before : "";
  const auto with = [](const char* v) {
    ::setenv("CVEST_HOST_VECTORS", v, 1);
    check_host_vectors_setting();
  };
  ::unsetenv("CVEST_HOST_VECTORS");
  CHECK_NOTHROW(check_host_vectors_setting());
  CHECK_NOTHROW(with("16"));
  CHECK_THROWS_AS(with("8"), InputError);
  CHECK_THROWS_WITH(with("16 "), "CVEST_HOST_VECTORS: expected 16 or 32 (bytes a host vector takes), found '16 '");
  if (streaming::wide_vectors_possible()) CHECK_NOTHROW(with("32"));
  else CHECK_THROWS_AS(with("32"), InputError);
  if (before) ::setenv("CVEST_HOST_VECTORS", kept.c_str(), 1);
  else ::unsetenv("CVEST_HOST_VECTORS");
}
