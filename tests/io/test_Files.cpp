// HDF5 files: generated inputs, input checks (one error per kind of bad
// input, naming file and dataset), and outputs written through a temporary
// file with attributes and dimension scales.
#include "io/Files.hpp"

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

fs::path scratch(const std::string& name) {
  const fs::path dir = fs::temp_directory_path() / "cvest_test_files";
  fs::create_directories(dir);
  fs::remove(dir / name);
  return dir / name;
}

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
  for (std::size_t j = 0; j < m.size(); ++j) REQUIRE(m[j] == generated_value(9, 0, j));
  in.read_discount({{1, 3}, {500, 510}}, Precision::f64, d.data());
  for (Index t = 1; t < 3; ++t)
    for (Index i = 500; i < 510; ++i)
      for (Index k = 0; k < 7; ++k)
        REQUIRE(d[std::size_t(((t - 1) * 10 + (i - 500)) * 7 + k)] == generated_value(9, 1, std::uint64_t((t * 1001 + i) * 7 + k)));
  // float reads of a double file convert through HDF5
  std::vector<float> f(7);
  in.read_multby({3, 4}, Precision::f32, f.data());
  CHECK(f[0] == float(generated_value(9, 0, 21)));
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
  for (const std::string compression : {"none", "gzip"}) {
    CAPTURE(compression);
    const auto path = scratch("out_" + compression + ".h5");
    const Index T = 3, N = 1001, K = 7;
    std::vector<double> values(std::size_t(T * N * K));
    for (std::size_t j = 0; j < values.size(); ++j) values[j] = double(j) * 0.5 - 3;
    {
      OutputFile out({path.string(), "cv", T, N, K, Precision::f64, compression, 4, 300, false});
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
    OutputFile out({path.string(), "cv", 2, 10, 3, Precision::f32, "none", 4, 0, false});
    std::vector<float> buf(30, 1.0f);
    out.write({{0, 1}, {0, 10}}, buf.data());
  }
  CHECK_FALSE(fs::exists(path));
  for (const auto& entry : fs::directory_iterator(path.parent_path()))
    CHECK(entry.path().filename().string().find("abandoned") == std::string::npos);
}

TEST_CASE("temporary files of killed runs on this host are removed by the next run", "[io]") {
  quiet_hdf5_errors();
  const auto path = scratch("killed.h5");
  const std::string ours = temp_path_for(path.string());
  const std::string prefix = ours.substr(0, ours.rfind('-') + 1);  // .killed.h5.tmp-HOST-
  REQUIRE(prefix.find(".killed.h5.tmp-") != std::string::npos);
  const pid_t child = ::fork();  // a process id that no longer runs
  if (child == 0) ::_exit(0);
  REQUIRE(child > 0);
  ::waitpid(child, nullptr, 0);
  const std::string dead = prefix + std::to_string(child), running = prefix + std::to_string(::getppid());
  const std::string other_host = (path.parent_path() / ".killed.h5.tmp-elsewhere-1").string();
  const std::string unrelated = (path.parent_path() / ".killed.h5.tmp-notes").string();
  for (const auto& f : {dead, running, other_host, unrelated}) std::ofstream(f) << "half-written";
  { OutputFile out({path.string(), "cv", 1, 10, 3, Precision::f64, "none", 4, 0, true}); }
  CHECK_FALSE(fs::exists(dead));
  CHECK(fs::exists(running));     // another run of the same output, still going
  CHECK(fs::exists(other_host));  // its process id means nothing here
  CHECK(fs::exists(unrelated));
  for (const auto& f : {running, other_host, unrelated}) fs::remove(f);
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
  spec.compression = "gzip";  // size unknown ahead: not refused for space
  spec.T = 2;
  spec.N = 1000;
  CHECK_NOTHROW(OutputFile(spec));
}

TEST_CASE("chunked inputs are decoded by cvest, chunk by chunk, like HDF5 would", "[io][deflate]") {
  quiet_hdf5_errors();
  const Index T = 5, N = 2503, K = 3;  // every chunk shape below has partial chunks at the ends
  std::vector<double> values(std::size_t(T * N * K)), m(std::size_t(N * K), 1.0);
  for (std::size_t j = 0; j < values.size(); ++j) values[j] = std::ldexp(double(j % 977) - 488.5, int(j % 61) - 30);
  enum class Filters { none, deflate, shuffle_deflate };
  // cvest's own (1, ids, K); h5py's default choice, one column per chunk;
  // columns split unevenly; all dates in one chunk
  const std::array<hsize_t, 3> shapes[] = {{1, 500, 3}, {2, 700, 1}, {3, 400, 2}, {5, 300, 3}};
  for (const auto& chunk : shapes)
    for (const Filters filters : {Filters::none, Filters::deflate, Filters::shuffle_deflate}) {
      CAPTURE(chunk[0], chunk[1], chunk[2], int(filters));
      const auto path = scratch("chunked.h5");
      {  // written through HDF5's own filters
        File f(H5Fcreate(path.c_str(), H5F_ACC_TRUNC, H5P_DEFAULT, H5P_DEFAULT));
        const hsize_t dims[3] = {hsize_t(T), hsize_t(N), hsize_t(K)}, mdims[2] = {hsize_t(N), hsize_t(K)};
        Dataspace s(H5Screate_simple(3, dims, nullptr)), ms(H5Screate_simple(2, mdims, nullptr));
        PropList create(H5Pcreate(H5P_DATASET_CREATE));
        H5Pset_chunk(create.get(), 3, chunk.data());
        if (filters == Filters::shuffle_deflate) H5Pset_shuffle(create.get());
        if (filters != Filters::none) H5Pset_deflate(create.get(), 6);
        Dataset d(H5Dcreate2(f.get(), "discount", H5T_IEEE_F64LE, s.get(), H5P_DEFAULT, create.get(), H5P_DEFAULT));
        Dataset md(H5Dcreate2(f.get(), "multBy", H5T_IEEE_F64LE, ms.get(), H5P_DEFAULT, H5P_DEFAULT, H5P_DEFAULT));
        REQUIRE(H5Dwrite(d.get(), H5T_NATIVE_DOUBLE, H5S_ALL, H5S_ALL, H5P_DEFAULT, values.data()) >= 0);
        REQUIRE(H5Dwrite(md.get(), H5T_NATIVE_DOUBLE, H5S_ALL, H5S_ALL, H5P_DEFAULT, m.data()) >= 0);
      }
      const InputFile input(path.string(), "multBy", "discount");
      // plain (1, ids, K) chunks are read straight into blocks instead
      const bool decoded = filters != Filters::none || chunk[0] != 1 || Index(chunk[2]) != K;
      CHECK(input.decoded_chunk() ==
            (decoded ? std::array<Index, 2>{Index(chunk[0]), Index(chunk[1])} : std::array<Index, 2>{0, 0}));
      {
        File f(H5Fopen(path.c_str(), H5F_ACC_RDONLY, H5P_DEFAULT));
        Dataset d(H5Dopen2(f.get(), "discount", H5P_DEFAULT));
        CHECK(ChunkedCube::open(d, path.string(), path.string(), H5T_NATIVE_DOUBLE, K));
        CHECK_FALSE(ChunkedCube::open(d, path.string(), path.string(), H5T_NATIVE_FLOAT, K));  // a conversion: HDF5's
        // chunks whose decoding would not fit the scratch allowed go through
        // HDF5, with the same result
        const CubeReader tight(d, path.string(), "discount", N, K, 1);
        CHECK(tight.decoded_chunk() == std::array<Index, 2>{0, 0});
        CHECK(tight.storage(Precision::f64).read_by == (decoded ? "hdf5" : "pread"));
        const auto storage = input.discount_storage(Precision::f64);
        CHECK(storage.read_by == (decoded ? "decode" : "pread"));
        CHECK(input.discount_storage(Precision::f32).read_by == "hdf5");  // a conversion
        CHECK(storage.chunk == std::vector<Index>{Index(chunk[0]), Index(chunk[1]), Index(chunk[2])});
        CHECK(storage.filters == (filters == Filters::none      ? std::vector<std::string>{}
                                  : filters == Filters::deflate ? std::vector<std::string>{"deflate"}
                                                                : std::vector<std::string>{"shuffle", "deflate"}));
        const Block b{{1, 4}, {333, 2222}};
        std::vector<double> via_hdf5(std::size_t(b.dates.size() * b.ids.size() * K)), decoded(via_hdf5.size());
        tight.read(b, Precision::f64, via_hdf5.data());
        input.read_discount(b, Precision::f64, decoded.data());
        CHECK(std::memcmp(via_hdf5.data(), decoded.data(), decoded.size() * sizeof(double)) == 0);
      }
      // blocks cutting chunks at every side, one in the partial last chunks,
      // one id, the whole cube
      for (const Block b : {Block{{1, 3}, {250, 1750}}, Block{{0, 5}, {2000, N}}, Block{{4, 5}, {0, 1}},
                            Block{{2, 3}, {N - 1, N}}, Block{{0, T}, {0, N}}}) {
        CAPTURE(b.dates.begin, b.dates.end, b.ids.begin, b.ids.end);
        std::vector<double> got(std::size_t(b.dates.size() * b.ids.size() * K));
        std::vector<float> got32(got.size());
        input.read_discount(b, Precision::f64, got.data());
        input.read_discount(b, Precision::f32, got32.data());
        std::size_t wrong = 0, wrong32 = 0;
        for (Index t = b.dates.begin; t < b.dates.end; ++t)
          for (Index i = b.ids.begin; i < b.ids.end; ++i)
            for (Index k = 0; k < K; ++k) {
              const double want = values[std::size_t((t * N + i) * K + k)];
              const std::size_t at = std::size_t(((t - b.dates.begin) * b.ids.size() + (i - b.ids.begin)) * K + k);
              wrong += std::memcmp(&got[at], &want, sizeof want) != 0;
              wrong32 += got32[at] != float(want);
            }
        CHECK(wrong == 0);
        CHECK(wrong32 == 0);
      }
    }
}

TEST_CASE("a chunked multBy (N, K) is decoded by cvest too, id range by id range", "[io][deflate]") {
  quiet_hdf5_errors();
  const hsize_t T = 2, N = 1001, K = 3;
  const auto path = scratch("multby_chunked.h5");
  std::vector<double> m(N * K), d(T * N * K, 1.0);
  for (std::size_t j = 0; j < m.size(); ++j) m[j] = std::ldexp(double(j % 101) + 0.25, int(j % 17) - 8);
  {
    File f(H5Fcreate(path.c_str(), H5F_ACC_TRUNC, H5P_DEFAULT, H5P_DEFAULT));
    const hsize_t mdims[2] = {N, K}, mchunk[2] = {300, 2}, dims[3] = {T, N, K};  // partial chunks both ways
    Dataspace ms(H5Screate_simple(2, mdims, nullptr)), s(H5Screate_simple(3, dims, nullptr));
    PropList create(H5Pcreate(H5P_DATASET_CREATE));
    H5Pset_chunk(create.get(), 2, mchunk);
    H5Pset_shuffle(create.get());
    H5Pset_deflate(create.get(), 4);
    Dataset md(H5Dcreate2(f.get(), "multBy", H5T_IEEE_F64LE, ms.get(), H5P_DEFAULT, create.get(), H5P_DEFAULT));
    Dataset dd(H5Dcreate2(f.get(), "discount", H5T_IEEE_F64LE, s.get(), H5P_DEFAULT, H5P_DEFAULT, H5P_DEFAULT));
    REQUIRE(H5Dwrite(md.get(), H5T_NATIVE_DOUBLE, H5S_ALL, H5S_ALL, H5P_DEFAULT, m.data()) >= 0);
    REQUIRE(H5Dwrite(dd.get(), H5T_NATIVE_DOUBLE, H5S_ALL, H5S_ALL, H5P_DEFAULT, d.data()) >= 0);
  }
  const InputFile input(path.string(), "multBy", "discount");
  CHECK(input.multby_storage(Precision::f64).read_by == "decode");
  CHECK(input.multby_storage(Precision::f64).chunk == std::vector<Index>{300, 2});
  for (const Range ids : {Range{0, Index(N)}, Range{299, 301}, Range{1000, 1001}, Range{450, 900}}) {
    CAPTURE(ids.begin, ids.end);
    std::vector<double> got(std::size_t(ids.size()) * K);
    std::vector<float> got32(got.size());
    input.read_multby(ids, Precision::f64, got.data());
    input.read_multby(ids, Precision::f32, got32.data());  // a conversion: through HDF5
    CHECK(std::memcmp(got.data(), m.data() + ids.begin * K, got.size() * sizeof(double)) == 0);
    std::size_t wrong32 = 0;
    for (std::size_t j = 0; j < got.size(); ++j) wrong32 += got32[j] != float(m[std::size_t(ids.begin) * K + j]);
    CHECK(wrong32 == 0);
  }
}

TEST_CASE("a deflated chunk that does not inflate is an I/O error naming it", "[io][deflate]") {
  quiet_hdf5_errors();
  const auto path = scratch("deflated_bad.h5");
  {
    File f(H5Fcreate(path.c_str(), H5F_ACC_TRUNC, H5P_DEFAULT, H5P_DEFAULT));
    const hsize_t dims[3] = {2, 100, 5}, chunk[3] = {1, 100, 5};
    Dataspace s(H5Screate_simple(3, dims, nullptr));
    PropList create(H5Pcreate(H5P_DATASET_CREATE));
    H5Pset_chunk(create.get(), 3, chunk);
    H5Pset_deflate(create.get(), 4);
    Dataset d(H5Dcreate2(f.get(), "discount", H5T_IEEE_F64LE, s.get(), H5P_DEFAULT, create.get(), H5P_DEFAULT));
    const char garbage[] = "not a zlib stream at all";
    const hsize_t offset[3] = {1, 0, 0};
    REQUIRE(H5Dwrite_chunk(d.get(), H5P_DEFAULT, 0, offset, sizeof garbage, garbage) >= 0);
  }
  File f(H5Fopen(path.c_str(), H5F_ACC_RDONLY, H5P_DEFAULT));
  Dataset d(H5Dopen2(f.get(), "discount", H5P_DEFAULT));
  const auto cube = ChunkedCube::open(d, path.string(), path.string(), H5T_NATIVE_DOUBLE, 5);
  REQUIRE(cube);
  std::vector<double> buffer(500);
  // date 0 was never written: not read here (HDF5 supplies its fill values)
  CHECK_FALSE(cube->read(Block{{0, 1}, {0, 100}}, buffer.data()));
  CHECK_THROWS_WITH(cube->read(Block{{1, 2}, {0, 100}}, buffer.data()),
                    Catch::Contains("deflated_bad.h5: chunk at (1, 0, 0): not a valid deflate stream"));
  const CubeReader reader(d, path.string(), "discount", 100, 5);
  buffer.assign(500, 1.0);
  reader.read(Block{{0, 1}, {0, 100}}, Precision::f64, buffer.data());
  CHECK(std::count(buffer.begin(), buffer.end(), 0.0) == 500);
}

TEST_CASE("a block's chunks decoded by a team: values, a bad chunk and a missing one reach the caller",
          "[io][deflate]") {
  quiet_hdf5_errors();
  const auto path = scratch("team_decoded.h5");
  const hsize_t T = 6, N = 1000, K = 5;
  std::vector<double> values(5 * N * K);
  for (std::size_t j = 0; j < values.size(); ++j) values[j] = double(j) * 0.5;
  {
    File f(H5Fcreate(path.c_str(), H5F_ACC_TRUNC, H5P_DEFAULT, H5P_DEFAULT));
    const hsize_t dims[3] = {T, N, K}, chunk[3] = {1, 100, K};
    Dataspace s(H5Screate_simple(3, dims, nullptr));
    PropList create(H5Pcreate(H5P_DATASET_CREATE));
    H5Pset_chunk(create.get(), 3, chunk);
    H5Pset_deflate(create.get(), 4);
    Dataset d(H5Dcreate2(f.get(), "discount", H5T_IEEE_F64LE, s.get(), H5P_DEFAULT, create.get(), H5P_DEFAULT));
    // dates 0-4 written by HDF5, then one chunk of date 4 replaced by garbage; date 5 nothing
    write_hyperslab(d, H5T_NATIVE_DOUBLE, {0, 0, 0}, {5, Index(N), Index(K)}, values.data(), "discount");
    const char garbage[] = "not a zlib stream at all";
    const hsize_t offset[3] = {4, 300, 0};
    REQUIRE(H5Dwrite_chunk(d.get(), H5P_DEFAULT, 0, offset, sizeof garbage, garbage) >= 0);
  }
  File f(H5Fopen(path.c_str(), H5F_ACC_RDONLY, H5P_DEFAULT));
  Dataset d(H5Dopen2(f.get(), "discount", H5P_DEFAULT));
  const auto cube = ChunkedCube::open(d, path.string(), path.string(), H5T_NATIVE_DOUBLE, K);
  REQUIRE(cube);
  // called outside any parallel region, as the overlapped pipeline's reader
  // is: 40 chunks, decoded side by side
  std::vector<double> got(4 * N * K);
  REQUIRE(cube->read(Block{{0, 4}, {0, Index(N)}}, got.data()));
  CHECK(std::memcmp(got.data(), values.data(), got.size() * sizeof(double)) == 0);
  CHECK_THROWS_WITH(cube->read(Block{{3, 5}, {0, Index(N)}}, got.data()),
                    Catch::Contains("team_decoded.h5: chunk at (4, 300, 0): not a valid deflate stream"));
  CHECK(cube->read(Block{{2, 4}, {0, Index(N)}}, got.data()));  // and it goes on after an error
  CHECK_FALSE(cube->read(Block{{5, 6}, {0, Index(N)}}, got.data()));  // HDF5's fill values then
}

TEST_CASE("gzip outputs compressed by cvest read back through HDF5's own filters", "[io][deflate]") {
  quiet_hdf5_errors();
  const auto path = scratch("gzip_out.h5");
  OutputSpec spec;
  spec.path = path.string();
  spec.T = 3;
  spec.N = 10007;  // a partial last chunk
  spec.K = 5;
  spec.compression = "gzip";
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
