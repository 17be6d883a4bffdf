// HDF5 files: generated inputs, input checks (one error per kind of bad
// input, naming file and dataset), and outputs written through a temporary
// file with attributes and dimension scales.
#include "io/Disk.hpp"
#include "io/Generator.hpp"
#include "io/Input.hpp"
#include "io/OutputFile.hpp"
#include "io/OutputLock.hpp"
#include "Scratch.hpp"

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
namespace fs = std::filesystem;

namespace {


// Writes a dataset of `type` with `dims` (values: zeros) into `path`.
void add_dataset(const fs::path& path, const std::string& name, hid_t type, std::vector<hsize_t> dims) {
  const bool exists = fs::exists(path);
  File f(exists ? H5Fopen(path.c_str(), H5F_ACC_RDWR, H5P_DEFAULT)
                : H5Fcreate(path.c_str(), H5F_ACC_TRUNC, H5P_DEFAULT, H5P_DEFAULT));
  REQUIRE(f);
  Dataspace s(H5Screate_simple(int(dims.size()), dims.data(), nullptr));
  Dataset d(H5Dcreate2(f.get(), name.c_str(), type, s.get(), H5P_DEFAULT, H5P_DEFAULT, H5P_DEFAULT));
  REQUIRE(d);
}

std::string error_of(const std::function<void()>& f) {
  try {
    f();
  } catch (const InputError& e) {
    return e.what();
  }
  return "no InputError";
}

}  // namespace

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

TEST_CASE("bad inputs are one-line errors naming file, dataset, expected and found", "[io]") {
  quiet_hdf5_errors();
  CHECK_THAT(error_of([] { InputFile("/nonexistent/in.h5", "multBy", "discount"); }),
             Catch::Contains("/nonexistent/in.h5: no such file"));

  const auto text = scratch("text.h5");
  std::ofstream(text) << "not hdf5 at all\n";
  CHECK_THAT(error_of([&] { InputFile(text.string(), "multBy", "discount"); }), Catch::Contains("not an HDF5 file"));

  const auto truncated = scratch("truncated.h5");
  generate_input(truncated.string(), {4, 2000, 5, 1, Precision::f64}, false);
  fs::resize_file(truncated, fs::file_size(truncated) / 2);
  CHECK_THAT(error_of([&] { InputFile(truncated.string(), "multBy", "discount"); }),
             Catch::Contains(truncated.string()) && Catch::Contains("truncated"));

  const auto missing = scratch("missing.h5");
  add_dataset(missing, "multBy", H5T_IEEE_F64LE, {4, 5});
  CHECK_THAT(error_of([&] { InputFile(missing.string(), "multBy", "discount"); }),
             Catch::Contains("dataset 'discount' not found"));

  const auto rank = scratch("rank.h5");
  add_dataset(rank, "multBy", H5T_IEEE_F64LE, {4, 5});
  add_dataset(rank, "discount", H5T_IEEE_F64LE, {3, 20});
  CHECK_THAT(error_of([&] { InputFile(rank.string(), "multBy", "discount"); }),
             Catch::Contains("dataset 'discount' has rank 2 (3, 20), expected rank 3"));

  const auto mismatch = scratch("mismatch.h5");
  add_dataset(mismatch, "multBy", H5T_IEEE_F64LE, {4, 6});
  add_dataset(mismatch, "discount", H5T_IEEE_F64LE, {3, 4, 5});
  CHECK_THAT(error_of([&] { InputFile(mismatch.string(), "multBy", "discount"); }),
             Catch::Contains("dataset 'multBy' is (4, 6), expected (4, 5)"));

  const auto zero = scratch("zero.h5");
  add_dataset(zero, "multBy", H5T_IEEE_F64LE, {0, 5});
  add_dataset(zero, "discount", H5T_IEEE_F64LE, {3, 0, 5});
  CHECK_THAT(error_of([&] { InputFile(zero.string(), "multBy", "discount"); }),
             Catch::Contains("no zero-length dimension"));

  const auto ints = scratch("ints.h5");
  add_dataset(ints, "multBy", H5T_STD_I32LE, {4, 5});
  add_dataset(ints, "discount", H5T_IEEE_F64LE, {3, 4, 5});
  CHECK_THAT(error_of([&] { InputFile(ints.string(), "multBy", "discount"); }),
             Catch::Contains("dataset 'multBy' holds 32-bit integers, expected 64-bit or 32-bit floats"));

  const auto strings = scratch("strings.h5");
  Datatype str(H5Tcopy(H5T_C_S1));
  H5Tset_size(str.get(), 8);
  add_dataset(strings, "multBy", H5T_IEEE_F64LE, {4, 5});
  add_dataset(strings, "discount", str.get(), {3, 4, 5});
  CHECK_THAT(error_of([&] { InputFile(strings.string(), "multBy", "discount"); }), Catch::Contains("holds strings"));
}

TEST_CASE("an input locked by a writer is an error that says so", "[io]") {
  quiet_hdf5_errors();
  const auto path = scratch("locked.h5");
  generate_input(path.string(), {2, 10, 3, 1, Precision::f64}, false);
  // what HDF5 does for a process that opened the file for writing
  const int fd = ::open(path.c_str(), O_RDWR);
  REQUIRE(fd >= 0);
  REQUIRE(::flock(fd, LOCK_EX | LOCK_NB) == 0);
  CHECK_THROWS_WITH(open_input_file(path.string()),
                    Catch::Contains("locked.h5: locked by a process that has it open for writing") &&
                        Catch::Contains("HDF5_USE_FILE_LOCKING=FALSE"));
  ::close(fd);
  CHECK_NOTHROW(open_input_file(path.string()));
}

TEST_CASE("outputs are written to a temporary file and renamed on commit", "[io]") {
  quiet_hdf5_errors();
  for (const Compression compression : {Compression::none, Compression::gzip}) {
    CAPTURE(to_string(compression));
    const auto path = scratch("out_" + std::string(to_string(compression)) + ".h5");
    const Index T = 3, N = 1001, K = 7;
    std::vector<double> values(std::size_t(T * N * K));
    for (std::size_t j = 0; j < values.size(); ++j) values[j] = double(j) * 0.5 - 3;
    {
      OutputFile out({path.string(), "cv", T, N, K, Precision::f64, compression, 4, 300, false, {}, true, 0});
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
    OutputFile out({path.string(), "cv", 2, 10, 3, Precision::f32, Compression::none, 4, 0, false, {}, true, 0});
    std::vector<float> buf(30, 1.0f);
    out.write({{0, 1}, {0, 10}}, buf.data());
  }
  CHECK_FALSE(fs::exists(path));
  for (const auto& entry : fs::directory_iterator(path.parent_path()))
    CHECK(entry.path().filename().string().find("abandoned") == std::string::npos);
}

TEST_CASE("output paths are checked before any work", "[io]") {
  const auto existing = scratch("exists.h5");
  std::ofstream(existing) << "x";
  CHECK_THROWS_WITH(check_output_path(existing.string(), false), Catch::Contains("output exists"));
  CHECK_NOTHROW(check_output_path(existing.string(), true));
  // a directory that cannot exist: its parent is a regular file
  CHECK_THROWS_AS(check_output_path((existing / "sub" / "out.h5").string(), false), IoError);
}

TEST_CASE("the HDF5 library loaded is thread-safe, as jobs need", "[io]") {
  CHECK_NOTHROW(require_threadsafe_hdf5());
}

TEST_CASE("an output the disk cannot hold is refused before anything is written", "[io]") {
  const auto path = scratch("huge.h5").string();
  // 1 EB: more than any file system here has free
  CHECK_THROWS_WITH(check_free_space(path, 1e18), Catch::Contains("huge.h5: needs") && Catch::Contains("free"));
  CHECK_THROWS_AS(check_free_space(path, 1e18), IoError);
  CHECK_NOTHROW(check_free_space(path, 1e6));
  OutputSpec spec;
  spec.path = path;
  spec.T = 1000000;
  spec.N = 1000000;
  spec.K = 5;  // 40 TB of doubles
  CHECK_THROWS_WITH(OutputFile(spec), Catch::Contains("huge.h5: needs"));
  CHECK_FALSE(std::filesystem::exists(path));
  spec.compression = Compression::gzip;  // size unknown ahead: not refused for space
  spec.T = 2;
  spec.N = 1000;
  CHECK_NOTHROW(OutputFile(spec));

  // Files on one file system must fit it together: an input to generate and
  // the output beside it, each fitting alone.
  const double free_here = free_space(path);
  REQUIRE(free_here > 0);
  const auto input = scratch("input_a.h5").string(), output = scratch("cv_b.h5").string();
  CHECK_NOTHROW(check_free_space({{input, 0.6 * free_here}}));
  CHECK_NOTHROW(check_free_space({{output, 0.6 * free_here}}));
  CHECK_THROWS_WITH(check_free_space({{input, 0.6 * free_here}, {output, 0.6 * free_here}}),
                    Catch::Contains("input_a.h5 and ") && Catch::Contains("cv_b.h5: need ") &&
                        Catch::Contains(" of disk together, the file system holding them has "));
  CHECK_NOTHROW(check_free_space({{input, 0.3 * free_here}, {output, 0.3 * free_here}}));
  CHECK_NOTHROW(check_free_space({{input, 0.6 * free_here}, {output, 0.0}}));  // a gzip output: size unknown
}

TEST_CASE("gzip outputs compressed by cvest read back through HDF5's own filters", "[io][deflate]") {
  quiet_hdf5_errors();
  const auto path = scratch("gzip_out.h5");
  OutputSpec spec;
  spec.path = path.string();
  spec.T = 3;
  spec.N = 10007;  // a partial last chunk
  spec.K = 5;
  spec.compression = Compression::gzip;
  spec.chunk_ids = 1000;
  std::vector<double> values(std::size_t(spec.T * spec.N * spec.K));
  for (std::size_t j = 0; j < values.size(); ++j) values[j] = double(j % 1013) * 0.25;
  const std::size_t date = std::size_t(spec.N * spec.K);
  {
    OutputFile out(spec);
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
  const OutputSpec spec{path.string(), "cv", 2, 2503, 5, Precision::f64, Compression::lzf, 4, 500, false, {}, true, 0};
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
    OutputFile out(spec);
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
  CHECK(H5Pget_filter2(create.get(), 1, &flags, &ncd, cd, 0, nullptr, nullptr) == h5py_lzf_filter);
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
