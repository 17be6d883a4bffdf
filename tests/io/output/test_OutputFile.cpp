// Outputs: written through a temporary file with attributes and dimension
// scales, renamed on commit, gone when never committed; compressed ones
// read back through HDF5. Each spec is settled as the app settles a run's
// (app/run/WriteMode.hpp: an uncompressed output this small is written
// through the page cache), so the tests take the users' path.
#include "app/run/WriteMode.hpp"
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

TEST_CASE("outputs are written to a temporary file and renamed on commit", "[io]") {
  quiet_hdf5_errors();
  // Uncompressed, also unsettled: past the page cache where O_DIRECT is
  // granted, the way an output above the write-back threshold is written.
  for (const auto& [compression, settled] :
       {std::pair{Compression::none, true}, std::pair{Compression::none, false}, std::pair{Compression::gzip, true}}) {
    CAPTURE(to_string(compression), settled);
    const auto path = scratch("out_" + std::string(to_string(compression)) + (settled ? "" : "_auto") + ".h5");
    const Index T = 3, N = 1001, K = 7;
    std::vector<double> values(std::size_t(T * N * K));
    for (std::size_t j = 0; j < values.size(); ++j) values[j] = double(j) * 0.5 - 3;
    {
      const OutputSpec spec{path.string(), "cv", T, N, K, Precision::f64, {compression, 4}, 300, false, {}, true, 0};
      if (settled && compression == Compression::none) REQUIRE(app::settled_output(spec).direct == DirectMode::off);
      OutputFile out(settled ? app::settled_output(spec) : spec);
      CHECK_FALSE(fs::exists(path));  // nothing at the final name until commit
      // three blocks: ids [0, 600) and [600, 1001) of dates 0-1, then date 2
      const auto block = [&](Index t0, Index t1, Index i0, Index i1) {
        std::vector<double> buf;
        for (Index t = t0; t < t1; ++t)
          for (Index i = i0; i < i1; ++i)
            for (Index k = 0; k < K; ++k) buf.push_back(values[std::size_t((t * N + i) * K + k)]);
        out.write({{t0, t1}, {i0, i1}}, buf.data());
      };
      block(0, 2, 0, 600);
      block(0, 2, 600, 1001);
      block(2, 3, 0, 1001);
      out.commit({{"strategy", "flat"}});
    }
    REQUIRE(fs::exists(path));
    // This output's temporary file only: other tests share the directory (ctest -j).
    for (const auto& entry : fs::directory_iterator(path.parent_path()))
      CHECK(entry.path().filename().string().rfind("." + path.filename().string() + ".tmp-", 0) == std::string::npos);
    File f = open_input_file(path.string());
    DatasetShape shape;
    Dataset ds = open_dataset(f, path.string(), "cv", 3, shape);
    CHECK(shape.dims == std::vector<Index>{T, N, K});
    CHECK(shape.chunk == std::vector<Index>{1, 300, K});
    std::vector<double> back(values.size());
    read_hyperslab(ds, H5T_NATIVE_DOUBLE, {0, 0, 0}, {T, N, K}, back.data(), "cv");
    CHECK(std::memcmp(back.data(), values.data(), values.size() * sizeof(double)) == 0);
    CHECK(read_string_attribute(ds.get(), "strategy") == "flat");
    char name[16] = {};
    for (unsigned d = 0; d < 3; ++d) CHECK(H5DSget_num_scales(ds.get(), d) == 1);
    Dataset date(H5Dopen2(f.get(), "date", H5P_DEFAULT));
    CHECK(H5DSget_scale_name(date.get(), name, sizeof name) > 0);
    CHECK(std::string(name) == "date");
  }
}

TEST_CASE("an output never committed leaves nothing behind", "[io]") {
  quiet_hdf5_errors();
  const auto path = scratch("abandoned.h5");
  {
    OutputFile out(app::settled_output({path.string(), "cv", 2, 10, 3, Precision::f32, {Compression::none, 4}, 0, false,
                                        {}, true, 0}));
    std::vector<float> buf(30, 1.0f);
    out.write({{0, 1}, {0, 10}}, buf.data());
  }
  CHECK_FALSE(fs::exists(path));
  for (const auto& entry : fs::directory_iterator(path.parent_path()))
    CHECK(entry.path().filename().string().find("abandoned") == std::string::npos);
}

TEST_CASE("gzip outputs compressed by cvest read back through HDF5's own filters", "[io][deflate]") {
  quiet_hdf5_errors();
  const auto path = scratch("gzip_out.h5");
  OutputSpec spec;
  spec.path = path.string();
  spec.T = 3;
  spec.N = 10007;  // a partial last chunk
  spec.K = 5;
  spec.compression.kind = Compression::gzip;
  spec.chunk_ids = 1000;
  std::vector<double> values(std::size_t(spec.T * spec.N * spec.K));
  for (std::size_t j = 0; j < values.size(); ++j) values[j] = double(j % 1013) * 0.25;
  const std::size_t date = std::size_t(spec.N * spec.K);
  {
    OutputFile out(app::settled_output(spec));
    // two dates in one block from outside any parallel region: its chunks
    // are compressed by a team; the last date in two halves written side by
    // side by two threads of one (each compresses its own)
    out.write(Block{{0, 2}, {0, spec.N}}, values.data());
    const Block halves[2] = {{{2, 3}, {0, 5000}}, {{2, 3}, {5000, spec.N}}};
    const double* half_data[2] = {values.data() + 2 * date, values.data() + 2 * date + 5000 * 5};
    std::string error;
#ifdef _OPENMP
#pragma omp parallel for num_threads(2)
#endif
    for (int h = 0; h < 2; ++h) {
      try {
        out.write(halves[h], half_data[h]);
      } catch (const std::exception& e) {
#ifdef _OPENMP
#pragma omp critical
#endif
        error = e.what();
      }
    }
    CHECK(error.empty());
    out.commit({});
  }
  File f(H5Fopen(path.c_str(), H5F_ACC_RDONLY, H5P_DEFAULT));
  Dataset d(H5Dopen2(f.get(), "cv", H5P_DEFAULT));
  PropList create(H5Dget_create_plist(d.get()));
  REQUIRE(H5Pget_nfilters(create.get()) == 2);
  std::vector<double> back(values.size());
  REQUIRE(H5Dread(d.get(), H5T_NATIVE_DOUBLE, H5S_ALL, H5S_ALL, H5P_DEFAULT, back.data()) >= 0);
  CHECK(std::memcmp(back.data(), values.data(), values.size() * sizeof(double)) == 0);
  hsize_t stored = 0;
  const hsize_t first[3] = {0, 0, 0};
  REQUIRE(H5Dget_chunk_storage_size(d.get(), first, &stored) >= 0);
  CHECK(stored < 1000 * 5 * sizeof(double) / 2);  // a repetitive pattern: compressed
}

TEST_CASE("lzf outputs as h5py writes them: shuffle, then lzf where it shrinks a chunk, read back", "[io][deflate]") {
  quiet_hdf5_errors();
  const auto path = scratch("lzf_out.h5");
  // 2 dates x 2503 ids (a partial last chunk) x 5, chunks of 500 ids
  const OutputSpec spec{path.string(), "cv", 2, 2503, 5, Precision::f64, {Compression::lzf}, 500, false, {}, true, 0};
  std::vector<double> values(std::size_t(spec.T * spec.N * spec.K));
  for (std::size_t j = 0; j < values.size(); ++j) {  // date 0 compressible; date 1 random bits, which lzf cannot shrink
    std::uint64_t z = (j + 1) * 0x9E3779B97F4A7C15ull;  // splitmix64
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    z ^= z >> 31;
    values[j] = double(j % 7) * 0.25;
    if (j >= values.size() / 2) std::memcpy(&values[j], &z, sizeof z);  // every byte random, even shuffled
  }
  {
    OutputFile out(app::settled_output(spec));
    out.write(Block{{0, 2}, {0, spec.N}}, values.data());
    out.commit({});
  }
  File f(H5Fopen(path.c_str(), H5F_ACC_RDONLY, H5P_DEFAULT));
  Dataset d(H5Dopen2(f.get(), "cv", H5P_DEFAULT));
  PropList create(H5Dget_create_plist(d.get()));
  REQUIRE(H5Pget_nfilters(create.get()) == 2);
  unsigned flags = 0, cd[3] = {0, 0, 0};
  std::size_t ncd = 3;
  CHECK(H5Pget_filter2(create.get(), 0, &flags, &ncd, cd, 0, nullptr, nullptr) == H5Z_FILTER_SHUFFLE);
  ncd = 3;
  CHECK(H5Pget_filter2(create.get(), 1, &flags, &ncd, cd, 0, nullptr, nullptr) == 32000);  // h5py's lzf
  CHECK(cd[2] == 500 * 5 * sizeof(double));  // what h5py's filter sizes its buffer by
  unsigned mask = 0;
  haddr_t addr = 0;
  hsize_t stored = 0;
  const hsize_t compressible[3] = {0, 0, 0}, random[3] = {1, 0, 0};
  REQUIRE(H5Dget_chunk_info_by_coord(d.get(), compressible, &mask, &addr, &stored) >= 0);
  CHECK(mask == 0);
  CHECK(stored < 500 * 5 * sizeof(double) / 4);
  REQUIRE(H5Dget_chunk_info_by_coord(d.get(), random, &mask, &addr, &stored) >= 0);
  CHECK(mask == 2u);  // lzf skipped, as h5py's optional filter does
  CHECK(stored == 500 * 5 * sizeof(double));
  const CubeReader reader(d, path.string(), "cv", spec.N, spec.K);
  CHECK(reader.storage(Precision::f64).read_by == ReadBy::decode);
  std::vector<double> back(values.size());
  reader.read(Block{{0, 2}, {0, spec.N}}, Precision::f64, back.data());
  CHECK(std::memcmp(back.data(), values.data(), values.size() * sizeof(double)) == 0);
}
