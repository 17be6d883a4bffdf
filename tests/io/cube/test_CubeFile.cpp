// A file of cubes opened by name and read through HDF5 alone
// (io/cube/CubeFile.hpp).
#include "io/cube/CubeFile.hpp"
#include "io/input/Generator.hpp"
#include "tests/io/InputFiles.hpp"
#include "tests/io/Scratch.hpp"

#include <catch2/catch.hpp>

#include <vector>

using namespace cvest;
using namespace cvest::io;
using namespace cvest::test;

TEST_CASE("a file of cubes: datasets opened by name, checked, and read through HDF5", "[io]") {
  quiet_hdf5_errors();
  const auto path = scratch("cube_file.h5").string();
  const GenerateSpec spec{3, 700, 4, 9, Precision::f64};
  generate_input(path, spec, true);
  const CubeFile file(path, {{"multBy", 2}, {"discount", 3}});
  CHECK(file.path() == path);
  CHECK(file.shape(0).dims == std::vector<Index>{700, 4});
  CHECK(file.shape(1).dims == std::vector<Index>{3, 700, 4});
  CHECK(file.shape(1).precision == Precision::f64);

  // A cube's dates and ids; a table's ids (its block's dates do not matter).
  const Block b{{1, 3}, {100, 150}};
  std::vector<double> d(2 * 50 * 4), m(50 * 4);
  file.read(1, b, Precision::f64, d.data());
  file.read(0, b, Precision::f64, m.data());
  for (Index t = 0; t < 2; ++t)
    for (Index j = 0; j < 50 * 4; ++j)
      CHECK(d[std::size_t(t * 200 + j)] == generated_value(spec, 1, std::uint64_t((t + 1) * 2800 + 400 + j)));
  for (Index j = 0; j < 50 * 4; ++j) CHECK(m[std::size_t(j)] == generated_value(spec, 0, std::uint64_t(400 + j)));
  std::vector<float> f(2 * 50 * 4);  // converted by HDF5
  file.read(1, b, Precision::f32, f.data());
  CHECK(f[0] == float(d[0]));

  CHECK_THAT(error_of([&] { CubeFile(path, {{"discount", 2}}); }),
             Catch::Contains(path) && Catch::Contains("discount"));
  CHECK_THAT(error_of([&] { CubeFile(path, {{"cv", 3}}); }), Catch::Contains(path) && Catch::Contains("'cv'"));
}
