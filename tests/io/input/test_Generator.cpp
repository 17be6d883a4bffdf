// The generated input: the documented values and shapes.
#include "io/os/Disk.hpp"
#include "io/input/Generator.hpp"
#include "io/input/Input.hpp"
#include "io/output/OutputFile.hpp"
#include "io/output/OutputLock.hpp"
#include "tests/io/Scratch.hpp"
#include "tests/io/InputFiles.hpp"

#include <catch2/catch.hpp>
#include <H5DSpublic.h>
#include <algorithm>
#include <cmath>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <fcntl.h>
#include <sys/file.h>
#include <sys/wait.h>
#include <unistd.h>

using namespace cvest;
using namespace cvest::io;
using namespace cvest::test;
namespace fs = std::filesystem;

TEST_CASE("generated inputs hold the documented values and shapes", "[io]") {
  quiet_hdf5_errors();
  const auto path = scratch("gen.h5").string();
  generate_input(path, {3, 1001, 7, 9, Precision::f64}, false);
  const InputFile in(path, "multBy", "discount");
  CHECK(in.shape().T == 3);
  CHECK(in.shape().N == 1001);
  CHECK(in.shape().K == 7);
  CHECK(in.shape().precision == Precision::f64);
  std::vector<double> m(1001 * 7), d(2 * 10 * 7);
  in.read_multby({0, 1001}, Precision::f64, m.data());
  in.read_discount({{1, 3}, {500, 510}}, Precision::f64, d.data());
  // Values pinned from outside the code under test, by this Python:
  //   def v(seed, stream, j):  # splitmix64 of (seed, stream, flat index)
  //       M = 2**64 - 1
  //       z = (seed * 0x9E3779B97F4A7C15 + (stream << 60) + j * 0xD1B54A32D192ED03) & M
  //       z = ((z ^ (z >> 30)) * 0xBF58476D1CE4E5B9) & M
  //       z = ((z ^ (z >> 27)) * 0x94D049BB133111EB) & M
  //       u = ((z ^ (z >> 31)) >> 11) * 2.0**-53
  //       return 0.5 + u if stream == 0 else 0.05 + 0.95 * u
  CHECK(m[0] == 0x1.7dcaf12083931p-1);
  CHECK(m[1] == 0x1.c6f73cd856f05p-1);
  CHECK(m[7006] == 0x1.7c653da153b09p-1);  // the last id's last column
  CHECK(d[3] == 0x1.38fc441d08c4ap-1);    // date 1, id 500, column 3: flat index (1 * 1001 + 500) * 7 + 3
  CHECK(d[139] == 0x1.45b77070e9e29p-1);  // date 2, id 509, column 6
  // The documented ranges: multBy in [0.5, 1.5), discount in [0.05, 1).
  CHECK(std::all_of(m.begin(), m.end(), [](double v) { return v >= 0.5 && v < 1.5; }));
  CHECK(std::all_of(d.begin(), d.end(), [](double v) { return v >= 0.05 && v < 1.0; }));
  CHECK(std::adjacent_find(m.begin(), m.end()) == m.end());  // no run of one repeated value
  // float reads of a double file convert through HDF5
  std::vector<float> f(7);
  in.read_multby({3, 4}, Precision::f32, f.data());
  CHECK(f[0] == float(0x1.5c76c7053079fp+0));
  // Another seed, other values.
  const auto other = scratch("gen_seed10.h5").string();
  generate_input(other, {1, 4, 2, 10, Precision::f64}, false);
  std::vector<double> m10(8), d10(8);
  const InputFile in10(other, "multBy", "discount");
  in10.read_multby({0, 4}, Precision::f64, m10.data());
  in10.read_discount({{0, 1}, {0, 4}}, Precision::f64, d10.data());
  CHECK(m10[0] == 0x1.73b8488c368cbp+0);
  CHECK(d10[0] == 0x1.aa619ceab010ep-2);
  // refuses to overwrite unless asked
  CHECK_THROWS_AS(generate_input(path, {1, 1, 1, 1, Precision::f64}, false), InputError);
}

TEST_CASE("smooth generated values: discount factors falling with the date, multipliers of two decimals", "[io]") {
  quiet_hdf5_errors();
  const auto path = scratch("gen_smooth.h5").string();
  GenerateSpec spec{4, 1001, 5, 9, Precision::f64};
  spec.values = GeneratedValues::smooth;
  generate_input(path, spec, false);
  const InputFile in(path, "multBy", "discount");
  std::vector<double> m(1001 * 5), d(4 * 1001 * 5);
  in.read_multby({0, 1001}, Precision::f64, m.data());
  in.read_discount({{0, 4}, {0, 1001}}, Precision::f64, d.data());
  CHECK(std::all_of(m.begin(), m.end(), [](double v) { return v >= 0.5 && v <= 1.5 && std::round(v * 100) / 100 == v; }));
  const std::size_t nk = 1001 * 5;
  for (std::size_t j = 0; j < nk; ++j) {
    CHECK(d[j] == 1.0);  // date 0
    // The same rate r of [0.5%, 8%) at every date: d = exp(-r t / 365).
    const double r = -std::log(d[nk + j]) * 365.0;
    REQUIRE(r >= 0.005 * (1 - 1e-9));
    REQUIRE(r < 0.08);
    for (std::size_t t = 2; t < 4; ++t) {
      REQUIRE(d[t * nk + j] < d[(t - 1) * nk + j]);
      REQUIRE(std::abs(-std::log(d[t * nk + j]) * 365.0 / double(t) - r) <= 1e-9 * r);
    }
  }
  // The rates differ from id to id (drawn, not one curve).
  CHECK(std::adjacent_find(d.begin() + std::ptrdiff_t(nk), d.begin() + std::ptrdiff_t(2 * nk)) ==
        d.begin() + std::ptrdiff_t(2 * nk));
}
