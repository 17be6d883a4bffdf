// Chunks decoded by cvest's threads (io/cube/): every chunk shape and
// filter set h5py, xarray and cvest write, against HDF5's own reading; the
// fallbacks to HDF5; errors naming the chunk.
#include "io/os/Disk.hpp"
#include "io/input/Generator.hpp"
#include "io/input/Input.hpp"
#include "io/output/OutputFile.hpp"
#include "io/output/OutputLock.hpp"
#include "tests/io/Scratch.hpp"
#include "tests/io/InputFiles.hpp"

#include <catch2/catch.hpp>
#include <fcntl.h>
#include <libdeflate.h>
#include <omp.h>
#include <sys/file.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <array>
#include <cmath>
#include <csignal>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <string_view>
#include <vector>

using namespace cvest;
using namespace cvest::io;
using namespace cvest::test;

namespace {
// A deflated (T, N, 5) "discount" of doubles in (1, chunk_ids, 5) chunks, nothing written yet.
Dataset deflated_discount(const File& f, hsize_t T, hsize_t N, hsize_t chunk_ids) {
  const hsize_t dims[3] = {T, N, 5}, chunk[3] = {1, chunk_ids, 5};
  Dataspace s(H5Screate_simple(3, dims, nullptr));
  PropList create(H5Pcreate(H5P_DATASET_CREATE));
  H5Pset_chunk(create.get(), 3, chunk);
  H5Pset_deflate(create.get(), 4);
  return Dataset(H5Dcreate2(f.get(), "discount", H5T_IEEE_F64LE, s.get(), H5P_DEFAULT, create.get(), H5P_DEFAULT));
}
}  // namespace

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
      CHECK(input.decoded_chunk(Precision::f64) ==
            (decoded ? std::array<Index, 2>{Index(chunk[0]), Index(chunk[1])} : std::array<Index, 2>{0, 0}));
      {
        File f(H5Fopen(path.c_str(), H5F_ACC_RDONLY, H5P_DEFAULT));
        Dataset d(H5Dopen2(f.get(), "discount", H5P_DEFAULT));
        CHECK(ChunkedCube::open(d, path.string(), H5T_NATIVE_DOUBLE, K));
        CHECK(ChunkedCube::open(d, path.string(), H5T_NATIVE_FLOAT, K));  // converted as copied
        CHECK_FALSE(ChunkedCube::open(d, path.string(), H5T_NATIVE_INT, K));  // HDF5's
        // chunks whose decoding would not fit the scratch allowed are held
        // decoded while blocks cut them, with HDF5's result
        const CubeReader tight(d, path.string(), "discount", N, K, 1, DirectMode::off, "", SIZE_MAX, true);
        CHECK(tight.decoded_chunk(Precision::f64) == std::array<Index, 2>{0, 0});
        CHECK(tight.storage(Precision::f64).read_by == (decoded ? ReadBy::decode : ReadBy::pread));
        CHECK(tight.storage(Precision::f64).held == decoded);
        CHECK(tight.held_chunk(Precision::f64).bytes == (decoded ? std::size_t(chunk[0] * chunk[1] * chunk[2]) * 8 : 0));
        const auto storage = input.discount_storage(Precision::f64);
        CHECK(storage.read_by == (decoded ? ReadBy::decode : ReadBy::pread));
        // narrowed to float as copied, as HDF5 narrows
        CHECK(input.discount_storage(Precision::f32).read_by == ReadBy::decode);
        CHECK(storage.chunk == std::vector<Index>{Index(chunk[0]), Index(chunk[1]), Index(chunk[2])});
        CHECK(storage.filters == (filters == Filters::none      ? std::vector<std::string>{}
                                  : filters == Filters::deflate ? std::vector<std::string>{"deflate"}
                                                                : std::vector<std::string>{"shuffle", "deflate"}));
        const Block b{{1, 4}, {333, 2222}};
        std::vector<double> via_hdf5(std::size_t(b.dates.size() * b.ids.size() * K)), decoded(via_hdf5.size());
        read_hyperslab(d, H5T_NATIVE_DOUBLE, {b.dates.begin, b.ids.begin, 0}, {b.dates.size(), b.ids.size(), K},
                       via_hdf5.data(), path.string());
        input.read_discount(b, Precision::f64, decoded.data());
        CHECK(std::memcmp(via_hdf5.data(), decoded.data(), decoded.size() * sizeof(double)) == 0);
        std::vector<float> narrowed_hdf5(decoded.size()), narrowed(decoded.size());
        read_hyperslab(d, H5T_NATIVE_FLOAT, {b.dates.begin, b.ids.begin, 0}, {b.dates.size(), b.ids.size(), K},
                       narrowed_hdf5.data(), path.string());
        input.read_discount(b, Precision::f32, narrowed.data());
        CHECK(std::memcmp(narrowed_hdf5.data(), narrowed.data(), narrowed.size() * sizeof(float)) == 0);
        std::fill(decoded.begin(), decoded.end(), 0.0);
        tight.read(b, Precision::f64, decoded.data());
        CHECK(std::memcmp(via_hdf5.data(), decoded.data(), decoded.size() * sizeof(double)) == 0);
      }
      // blocks cutting chunks at every side, one in the partial last chunks,
      // one id, the whole cube; blocks some chunks lie in whole, decoded
      // straight into them (several dates of a chunk's ids exactly: (5, 300,
      // 3)'s second chunk; one-date chunks of two dates: (1, 500, 3)'s)
      for (const Block b : {Block{{1, 3}, {250, 1750}}, Block{{0, 5}, {2000, N}}, Block{{4, 5}, {0, 1}},
                            Block{{2, 3}, {N - 1, N}}, Block{{0, T}, {0, N}}, Block{{0, 5}, {300, 600}},
                            Block{{1, 3}, {500, 1500}}}) {
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

TEST_CASE("rarer filter settings read like HDF5 reads them: shuffle alone, unfiltered partial edge chunks", "[io]") {
  quiet_hdf5_errors();
  const hsize_t T = 3, N = 1003, K = 5, chunk[3] = {2, 400, 5};  // partial chunks along dates and ids
  std::vector<double> values(T * N * K), m(N * K, 1.0);
  for (std::size_t j = 0; j < values.size(); ++j) values[j] = std::ldexp(double(j % 53) - 26.5, int(j % 19) - 9);
  for (const bool deflate : {false, true})
    for (const bool unfiltered_edges : {false, true}) {
      CAPTURE(deflate, unfiltered_edges);
      const auto path = scratch("rare_filters.h5");
      {
        File f(H5Fcreate(path.c_str(), H5F_ACC_TRUNC, H5P_DEFAULT, H5P_DEFAULT));
        const hsize_t dims[3] = {T, N, K}, mdims[2] = {N, K};
        Dataspace sp(H5Screate_simple(3, dims, nullptr)), ms(H5Screate_simple(2, mdims, nullptr));
        PropList create(H5Pcreate(H5P_DATASET_CREATE));
        H5Pset_chunk(create.get(), 3, chunk);
        H5Pset_shuffle(create.get());
        if (deflate) H5Pset_deflate(create.get(), 1);
        if (unfiltered_edges) H5Pset_chunk_opts(create.get(), H5D_CHUNK_DONT_FILTER_PARTIAL_CHUNKS);
        Dataset d(H5Dcreate2(f.get(), "discount", H5T_IEEE_F64LE, sp.get(), H5P_DEFAULT, create.get(), H5P_DEFAULT));
        Dataset md(H5Dcreate2(f.get(), "multBy", H5T_IEEE_F64LE, ms.get(), H5P_DEFAULT, H5P_DEFAULT, H5P_DEFAULT));
        REQUIRE(H5Dwrite(d.get(), H5T_NATIVE_DOUBLE, H5S_ALL, H5S_ALL, H5P_DEFAULT, values.data()) >= 0);
        REQUIRE(H5Dwrite(md.get(), H5T_NATIVE_DOUBLE, H5S_ALL, H5S_ALL, H5P_DEFAULT, m.data()) >= 0);
      }
      const InputFile input(path.string(), "multBy", "discount");
      // unfiltered edge chunks are not marked in a chunk's filter mask: HDF5 reads them
      CHECK(input.discount_storage(Precision::f64).read_by == (unfiltered_edges ? ReadBy::hdf5 : ReadBy::decode));
      std::vector<double> got(values.size());
      input.read_discount({{0, Index(T)}, {0, Index(N)}}, Precision::f64, got.data());
      CHECK(std::memcmp(got.data(), values.data(), values.size() * sizeof(double)) == 0);
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
  CHECK(input.multby_storage(Precision::f64).read_by == ReadBy::decode);
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

TEST_CASE("a multBy in one chunk too large to read by rows is read whole by cvest's decoders, straight in",
          "[io][deflate]") {
  // Dask's to_hdf5 of an (N, K) array: one gzip chunk. Its rows read a
  // block at a time would decode it whole each time, so it is read once;
  // HDF5's zlib took seconds on one thread for 400 MB, cvest decodes it.
  quiet_hdf5_errors();
  const hsize_t N = 500000, K = 5;  // 20 MB: over HDF5's slack
  const auto path = scratch("multby_one_chunk.h5");
  std::vector<double> m(N * K), d(N * K, 1.0);
  for (std::size_t j = 0; j < m.size(); ++j) m[j] = std::ldexp(double(j % 1013) + 0.5, int(j % 19) - 9);
  const auto write = [&](bool damaged) {
    File f(H5Fcreate(path.c_str(), H5F_ACC_TRUNC, H5P_DEFAULT, H5P_DEFAULT));
    const hsize_t mdims[2] = {N, K}, dims[3] = {1, N, K};
    Dataspace ms(H5Screate_simple(2, mdims, nullptr)), s(H5Screate_simple(3, dims, nullptr));
    PropList create(H5Pcreate(H5P_DATASET_CREATE));
    H5Pset_chunk(create.get(), 2, mdims);
    H5Pset_deflate(create.get(), 1);
    Dataset md(H5Dcreate2(f.get(), "multBy", H5T_IEEE_F64LE, ms.get(), H5P_DEFAULT, create.get(), H5P_DEFAULT));
    Dataset dd(H5Dcreate2(f.get(), "discount", H5T_IEEE_F64LE, s.get(), H5P_DEFAULT, H5P_DEFAULT, H5P_DEFAULT));
    REQUIRE(H5Dwrite(dd.get(), H5T_NATIVE_DOUBLE, H5S_ALL, H5S_ALL, H5P_DEFAULT, d.data()) >= 0);
    if (!damaged) {
      REQUIRE(H5Dwrite(md.get(), H5T_NATIVE_DOUBLE, H5S_ALL, H5S_ALL, H5P_DEFAULT, m.data()) >= 0);
      return;
    }
    // A valid stream of a tenth of the chunk: HDF5's H5Dread copies a whole
    // chunk out of it (1.10.8), cvest's decoder refuses it.
    libdeflate_compressor* c = libdeflate_alloc_compressor(1);
    std::vector<char> short_stream(libdeflate_zlib_compress_bound(c, m.size() * 8 / 10));
    short_stream.resize(libdeflate_zlib_compress(c, m.data(), m.size() * 8 / 10, short_stream.data(), short_stream.size()));
    libdeflate_free_compressor(c);
    const hsize_t origin[2] = {0, 0};
    REQUIRE(H5Dwrite_chunk(md.get(), H5P_DEFAULT, 0, origin, short_stream.size(), short_stream.data()) >= 0);
  };
  write(false);
  {
    const InputFile input(path.string(), "multBy", "discount");
    CHECK(input.multby_storage(Precision::f64).read_by == ReadBy::hdf5);  // its rows: HDF5's, a block at a time
    REQUIRE(input.multby_rereads(Precision::f64));
    std::vector<double> whole(N * K, -1.0);
    input.read_multby({0, Index(N)}, Precision::f64, whole.data());  // a resident multBy
    CHECK(std::memcmp(whole.data(), m.data(), whole.size() * sizeof(double)) == 0);
    input.keep_multby(Precision::f64);
    std::vector<double> rows(1000 * K);
    input.read_multby({123456, 124456}, Precision::f64, rows.data());
    CHECK(std::memcmp(rows.data(), m.data() + 123456 * K, rows.size() * sizeof(double)) == 0);
  }
  write(true);
  const InputFile input(path.string(), "multBy", "discount");
  std::vector<double> whole(N * K);
  CHECK_THROWS_WITH(input.read_multby({0, Index(N)}, Precision::f64, whole.data()),
                    Catch::Contains("multby_one_chunk.h5: dataset 'multBy'") &&
                        Catch::Contains("not a valid deflate stream of 20000000 bytes"));
  CHECK_THROWS_WITH(input.keep_multby(Precision::f64), Catch::Contains("not a valid deflate stream of 20000000 bytes"));
}

TEST_CASE("datasets behind an external link, or in a file with a user block, are read where they lie", "[io]") {
  // Found by reading h5py's files: cvest read such datasets at the offsets
  // HDF5 reports, but in the file it opened (not the linked one), and without
  // the user block HDF5 1.10 leaves out of chunk addresses: wrong values,
  // silently, or "not a valid deflate stream".
  quiet_hdf5_errors();
  const hsize_t T = 3, N = 1001, K = 5;
  std::vector<double> m(N * K), d(T * N * K), pad(20000, -1.0);
  for (std::size_t j = 0; j < m.size(); ++j) m[j] = std::ldexp(double(j % 97) + 0.5, int(j % 13) - 6);
  for (std::size_t j = 0; j < d.size(); ++j) d[j] = std::ldexp(double(j % 89) - 44.25, int(j % 23) - 11);
  enum class Storage { contiguous, chunks, deflate };
  // Writes multBy and discount (stored as asked) into `path`, after a pad
  // dataset so that offsets differ between files.
  const auto write = [&](const std::filesystem::path& path, Storage storage, hsize_t userblock, bool with_multby,
                         bool with_discount) {
    PropList fcpl(H5Pcreate(H5P_FILE_CREATE));
    if (userblock) H5Pset_userblock(fcpl.get(), userblock);
    File f(H5Fcreate(path.c_str(), H5F_ACC_TRUNC, fcpl.get(), H5P_DEFAULT));
    const hsize_t pdims[1] = {pad.size()}, mdims[2] = {N, K}, dims[3] = {T, N, K}, chunk[3] = {1, 400, K};
    Dataspace ps(H5Screate_simple(1, pdims, nullptr)), ms(H5Screate_simple(2, mdims, nullptr)),
        s(H5Screate_simple(3, dims, nullptr));
    Dataset pd(H5Dcreate2(f.get(), "pad", H5T_IEEE_F64LE, ps.get(), H5P_DEFAULT, H5P_DEFAULT, H5P_DEFAULT));
    REQUIRE(H5Dwrite(pd.get(), H5T_NATIVE_DOUBLE, H5S_ALL, H5S_ALL, H5P_DEFAULT, pad.data()) >= 0);
    PropList create(H5Pcreate(H5P_DATASET_CREATE));
    if (storage != Storage::contiguous) H5Pset_chunk(create.get(), 3, chunk);
    if (storage == Storage::deflate) H5Pset_deflate(create.get(), 1);
    if (with_multby) {
      Dataset md(H5Dcreate2(f.get(), "multBy", H5T_IEEE_F64LE, ms.get(), H5P_DEFAULT, H5P_DEFAULT, H5P_DEFAULT));
      REQUIRE(H5Dwrite(md.get(), H5T_NATIVE_DOUBLE, H5S_ALL, H5S_ALL, H5P_DEFAULT, m.data()) >= 0);
    }
    if (with_discount) {
      Dataset dd(H5Dcreate2(f.get(), "discount", H5T_IEEE_F64LE, s.get(), H5P_DEFAULT, create.get(), H5P_DEFAULT));
      REQUIRE(H5Dwrite(dd.get(), H5T_NATIVE_DOUBLE, H5S_ALL, H5S_ALL, H5P_DEFAULT, d.data()) >= 0);
    }
  };
  const auto check = [&](const std::filesystem::path& path, Storage storage) {
    const InputFile input(path.string(), "multBy", "discount");
    // still cvest's own fast paths, not H5Dread
    CHECK(input.discount_storage(Precision::f64).read_by == (storage == Storage::deflate ? ReadBy::decode : ReadBy::pread));
    CHECK(input.multby_storage(Precision::f64).read_by == ReadBy::pread);
    std::vector<double> got_d(d.size()), got_m(m.size());
    input.read_discount({{0, Index(T)}, {0, Index(N)}}, Precision::f64, got_d.data());
    input.read_multby({0, Index(N)}, Precision::f64, got_m.data());
    CHECK(std::memcmp(got_d.data(), d.data(), d.size() * sizeof(double)) == 0);
    CHECK(std::memcmp(got_m.data(), m.data(), m.size() * sizeof(double)) == 0);
  };
  for (const Storage storage : {Storage::contiguous, Storage::chunks, Storage::deflate}) {
    CAPTURE(int(storage));
    {  // discount and multBy each in a file of their own, linked from the input
      const auto linked_m = scratch("linked_m.h5"), linked_d = scratch("linked_d.h5"), in = scratch("links.h5");
      write(linked_m, storage, 0, true, false);
      write(linked_d, storage, 0, false, true);
      {
        File f(H5Fcreate(in.c_str(), H5F_ACC_TRUNC, H5P_DEFAULT, H5P_DEFAULT));
        REQUIRE(H5Lcreate_external(linked_m.c_str(), "multBy", f.get(), "multBy", H5P_DEFAULT, H5P_DEFAULT) >= 0);
        REQUIRE(H5Lcreate_external(linked_d.c_str(), "discount", f.get(), "discount", H5P_DEFAULT, H5P_DEFAULT) >= 0);
      }
      check(in, storage);
    }
    {  // a user block ahead of the HDF5 data
      const auto path = scratch("userblock.h5");
      write(path, storage, 4096, true, true);
      check(path, storage);
    }
  }
}

TEST_CASE("a deflated chunk that does not inflate, or inflates short, is an I/O error naming it", "[io][deflate]") {
  quiet_hdf5_errors();
  const auto path = scratch("deflated_bad.h5");
  std::vector<double> values(500, 0.25);
  {
    File f(H5Fcreate(path.c_str(), H5F_ACC_TRUNC, H5P_DEFAULT, H5P_DEFAULT));
    const Dataset d = deflated_discount(f, 3, 100, 100);
    const char garbage[] = "not a zlib stream at all";
    const hsize_t offset[3] = {1, 0, 0};
    REQUIRE(H5Dwrite_chunk(d.get(), H5P_DEFAULT, 0, offset, sizeof garbage, garbage) >= 0);
    // A valid stream of a tenth of a chunk (the input fuzzer's case; HDF5
    // 1.10.8's own H5Dread copies a whole chunk out of it, so only cvest's
    // decoder is tried on it).
    libdeflate_compressor* c = libdeflate_alloc_compressor(6);
    std::vector<char> short_stream(libdeflate_zlib_compress_bound(c, 400));
    short_stream.resize(libdeflate_zlib_compress(c, values.data(), 400, short_stream.data(), short_stream.size()));
    libdeflate_free_compressor(c);
    const hsize_t third[3] = {2, 0, 0};
    REQUIRE(H5Dwrite_chunk(d.get(), H5P_DEFAULT, 0, third, short_stream.size(), short_stream.data()) >= 0);
  }
  File f(H5Fopen(path.c_str(), H5F_ACC_RDONLY, H5P_DEFAULT));
  Dataset d(H5Dopen2(f.get(), "discount", H5P_DEFAULT));
  const auto cube = ChunkedCube::open(d, path.string(), H5T_NATIVE_DOUBLE, 5);
  REQUIRE(cube);
  std::vector<double> buffer(500);
  // date 0 was never written: not read here (HDF5 supplies its fill values)
  CHECK_FALSE(cube->read(Block{{0, 1}, {0, 100}}, buffer.data()));
  CHECK_THROWS_WITH(cube->read(Block{{1, 2}, {0, 100}}, buffer.data()),
                    Catch::Contains("deflated_bad.h5: chunk at (1, 0, 0) (dates 1-1, ids 0-99): not a valid deflate stream"));
  CHECK_THROWS_WITH(cube->read(Block{{2, 3}, {0, 100}}, buffer.data()),
                    Catch::Contains("deflated_bad.h5: chunk at (2, 0, 0) (dates 2-2, ids 0-99): not a valid deflate stream of 4000 bytes"));
  const CubeReader reader(d, path.string(), "discount", 100, 5);
  buffer.assign(500, 1.0);
  reader.read(Block{{0, 1}, {0, 100}}, Precision::f64, buffer.data());
  CHECK(std::count(buffer.begin(), buffer.end(), 0.0) == 500);
}

TEST_CASE("a block with a chunk never written goes to HDF5 only after cvest decoded its stored chunks",
          "[io][deflate]") {
  // Found by the input fuzzer: such a block went to H5Dread whole, and a
  // damaged chunk beside the one never written reached HDF5's filters
  // (Debian's bitshuffle plugin ran past a heap buffer). Read on one thread
  // of a parallel region, as the per-thread pipeline reads: chunk by chunk,
  // the one never written first.
  quiet_hdf5_errors();
  std::vector<double> values(500);
  for (std::size_t j = 0; j < values.size(); ++j) values[j] = double(j) + 0.5;
  const auto write = [&](const std::filesystem::path& path, bool damaged) {
    File f(H5Fcreate(path.c_str(), H5F_ACC_TRUNC, H5P_DEFAULT, H5P_DEFAULT));
    const Dataset d = deflated_discount(f, 1, 200, 100);
    const char garbage[] = "not a zlib stream at all";
    const hsize_t second[3] = {0, 100, 0};
    if (damaged) REQUIRE(H5Dwrite_chunk(d.get(), H5P_DEFAULT, 0, second, sizeof garbage, garbage) >= 0);
    else write_hyperslab(d, H5T_NATIVE_DOUBLE, {0, 100, 0}, {1, 100, 5}, values.data(), "discount");
  };
  const auto read = [](const std::filesystem::path& path, std::vector<double>& buffer) {
    File f(H5Fopen(path.c_str(), H5F_ACC_RDONLY, H5P_DEFAULT));
    Dataset d(H5Dopen2(f.get(), "discount", H5P_DEFAULT));
    const CubeReader reader(d, path.string(), "discount", 200, 5);
    std::string error;
    bool in_team = false;  // else ChunkedCube::read decodes the chunks side by side, the damaged one maybe first
#pragma omp parallel num_threads(2)
#pragma omp single
    try {
      in_team = omp_in_parallel();
      reader.read(Block{{0, 1}, {0, 200}}, Precision::f64, buffer.data());
    } catch (const std::exception& e) {
      error = e.what();
    }
    CHECK(in_team);
    return error;
  };
  std::vector<double> buffer(1000, -1.0);
  const auto bad = scratch("never_written_beside_bad.h5");
  write(bad, true);
  CHECK_THAT(read(bad, buffer), Catch::Contains("never_written_beside_bad.h5: dataset 'discount': chunk at (0, 100, 0) "
                                                "(dates 0-0, ids 100-199): not a valid deflate stream"));
  const auto good = scratch("never_written_beside_good.h5");
  write(good, false);
  CHECK(read(good, buffer).empty());  // HDF5's fill values, then the chunk written
  CHECK(std::count(buffer.begin(), buffer.begin() + 500, 0.0) == 500);
  CHECK(std::equal(values.begin(), values.end(), buffer.begin() + 500));
}

TEST_CASE("a damaged chunk index is an I/O error naming the chunk, before anything reads it", "[io]") {
  // Found by the input fuzzer: HDF5 1.10.8 trusts a chunk's recorded size
  // and copied past its buffer (a crash, or other bytes read as values).
  quiet_hdf5_errors();
  const auto write = [](const std::filesystem::path& path, bool deflate, std::size_t stored) {
    File f(H5Fcreate(path.c_str(), H5F_ACC_TRUNC, H5P_DEFAULT, H5P_DEFAULT));
    const hsize_t dims[3] = {2, 100, 5}, chunk[3] = {1, 100, 5};
    Dataspace s(H5Screate_simple(3, dims, nullptr));
    PropList create(H5Pcreate(H5P_DATASET_CREATE));
    H5Pset_chunk(create.get(), 3, chunk);
    if (deflate) H5Pset_deflate(create.get(), 4);
    Dataset d(H5Dcreate2(f.get(), "discount", H5T_IEEE_F64LE, s.get(), H5P_DEFAULT, create.get(), H5P_DEFAULT));
    const std::vector<double> values(500, 0.5);
    const hsize_t offset[3] = {1, 0, 0};
    // Stored as given: HDF5 writes the bytes and records their size.
    REQUIRE(H5Dwrite_chunk(d.get(), H5P_DEFAULT, 0, offset, stored, values.data()) >= 0);
  };
  // Then the record's size made larger than the file, as damage would.
  const auto enlarge_record = [](const std::filesystem::path& path, std::uint32_t size) {
    overwrite_after(path, chunk_btree, 24, &size, sizeof size);  // the first key's chunk size
  };
  std::vector<double> buffer(500);
  for (const bool deflate : {false, true}) {
    CAPTURE(deflate);
    const auto path = scratch("damaged_index.h5");
    write(path, deflate, deflate ? 4000 : 24);  // unfiltered: 24 bytes recorded for a chunk of 4000
    if (deflate) enlarge_record(path, 0x7fffff00u);
    File f(H5Fopen(path.c_str(), H5F_ACC_RDONLY, H5P_DEFAULT));
    Dataset d(H5Dopen2(f.get(), "discount", H5P_DEFAULT));
    // Each path that reads chunks: pread at their addresses, cvest's
    // decoders, HDF5 (no scratch for decoding).
    for (const std::size_t scratch_bytes : {std::size_t(64) << 20, std::size_t(0)}) {
      CAPTURE(scratch_bytes);
      const CubeReader reader(d, path.string(), "discount", 100, 5, scratch_bytes);
      CHECK_THROWS_WITH(reader.read(Block{{1, 2}, {0, 100}}, Precision::f64, buffer.data()),
                        Catch::Contains("damaged_index.h5") && Catch::Contains("chunk at (1, 0, 0) (dates 1-1, ids 0-99)") &&
                            Catch::Contains(deflate ? "beyond the file's" : "recorded as 24 bytes, expected 4000"));
    }
  }
}

TEST_CASE("compact storage whose recorded size is damaged is an input error, not a crash", "[io]") {
  // Found by the input fuzzer: HDF5 1.10.8 copies a compact dataset's bytes
  // whatever size its layout message records (H5Dread crashed, as h5py did).
  quiet_hdf5_errors();
  const auto path = scratch("damaged_compact.h5");
  const std::vector<double> m = {1.25, 2.5, 3.75, 5.0, 6.25, 7.5};  // (3, 2)
  {
    File f(H5Fcreate(path.c_str(), H5F_ACC_TRUNC, H5P_DEFAULT, H5P_DEFAULT));
    const hsize_t dims[2] = {3, 2};
    Dataspace s(H5Screate_simple(2, dims, nullptr));
    PropList create(H5Pcreate(H5P_DATASET_CREATE));
    H5Pset_layout(create.get(), H5D_COMPACT);
    Dataset d(H5Dcreate2(f.get(), "multBy", H5T_IEEE_F64LE, s.get(), H5P_DEFAULT, create.get(), H5P_DEFAULT));
    REQUIRE(H5Dwrite(d.get(), H5T_NATIVE_DOUBLE, H5S_ALL, H5S_ALL, H5P_DEFAULT, m.data()) >= 0);
  }
  DatasetShape shape;
  CHECK_NOTHROW(open_dataset(open_input_file(path.string()), path.string(), "multBy", 2, shape));
  {  // the layout message: ..., size (2 bytes), then the data
    const std::uint16_t zero = 0;
    const auto was = overwrite_after(path, {reinterpret_cast<const char*>(m.data()), 48}, -2, &zero, 2);
    std::uint16_t size = 0;
    std::memcpy(&size, was.data(), 2);
    REQUIRE(size == 48);
  }
  CHECK_THROWS_WITH(open_dataset(open_input_file(path.string()), path.string(), "multBy", 2, shape),
                    Catch::Contains("damaged_compact.h5: dataset 'multBy': compact storage of 0 bytes, expected 48 for "
                                    "(3, 2) (damaged)"));
}

TEST_CASE("a chunk layout claiming chunks HDF5 never writes is an input error, not an overflow", "[io]") {
  // Found by the input fuzzer on a (3, 7, 2) dataset: (2^24, 2^26, 2^25)
  // chunks, whose byte count overflowed (HDF5's own 64-bit product wraps it
  // to 0, and HDF5 opens it; it refuses a plain 16 GiB), and (8388609, 7, 2),
  // 940 MB a chunk, whose fill values HDF5 spent over 10 s writing for a
  // read of two dates. HDF5 creates neither: no chunk over 4 GiB, none
  // longer than a dimension of fixed size.
  quiet_hdf5_errors();
  const std::array<std::uint32_t, 3> claims[] = {{1u << 24, 1u << 26, 1u << 25}, {8388609, 7, 2}};
  for (const auto& claimed : claims) {
    CAPTURE(claimed[0], claimed[1], claimed[2]);
    const auto path = scratch("damaged_layout.h5");
    {
      File f(H5Fcreate(path.c_str(), H5F_ACC_TRUNC, H5P_DEFAULT, H5P_DEFAULT));
      const hsize_t dims[3] = {3, 7, 2}, chunk[3] = {1, 7, 2};
      Dataspace s(H5Screate_simple(3, dims, nullptr));
      PropList create(H5Pcreate(H5P_DATASET_CREATE));
      H5Pset_chunk(create.get(), 3, chunk);
      Dataset d(H5Dcreate2(f.get(), "discount", H5T_IEEE_F64LE, s.get(), H5P_DEFAULT, create.get(), H5P_DEFAULT));
    }
    DatasetShape shape;
    CHECK_NOTHROW(open_dataset(open_input_file(path.string()), path.string(), "discount", 3, shape));
    // The layout message's chunk dimensions, 4 bytes each, then the element's size: 1, 7, 2, 8.
    const std::uint32_t dims[4] = {1, 7, 2, 8};
    overwrite_after(path, {reinterpret_cast<const char*>(dims), sizeof dims}, 0, claimed.data(),
                    sizeof(std::uint32_t) * claimed.size());
    const std::string chunks = "(" + std::to_string(claimed[0]) + ", " + std::to_string(claimed[1]) + ", " +
                               std::to_string(claimed[2]) + ")";
    CHECK_THROWS_WITH(open_dataset(open_input_file(path.string()), path.string(), "discount", 3, shape),
                      Catch::Contains("damaged_layout.h5: dataset 'discount' (3, 7, 2): chunks of " + chunks) &&
                          Catch::Contains("none longer than a fixed one, at most 4 GiB a chunk (damaged layout)"));
  }
}

TEST_CASE("a chunk index listing one chunk twice does not let HDF5 write past cvest's buffer", "[io]") {
  // Found by the input fuzzer: with a user block, cvest reads the first
  // chunk through H5Dread_chunk to learn where chunk addresses start; in an
  // index holding chunk (0, 0, 0) twice, every query answers the first
  // record (112 bytes) and H5Dread_chunk copies the second (2,928).
  quiet_hdf5_errors();
  const auto path = scratch("duplicate_chunk.h5");
  std::vector<double> values(42);
  for (std::size_t j = 0; j < values.size(); ++j) values[j] = double(j);
  {
    PropList file_create(H5Pcreate(H5P_FILE_CREATE));
    H5Pset_userblock(file_create.get(), 512);
    File f(H5Fcreate(path.c_str(), H5F_ACC_TRUNC, file_create.get(), H5P_DEFAULT));
    const hsize_t dims[3] = {3, 7, 2}, mdims[2] = {7, 2}, chunk[3] = {1, 7, 2};
    Dataspace s(H5Screate_simple(3, dims, nullptr)), ms(H5Screate_simple(2, mdims, nullptr));
    PropList create(H5Pcreate(H5P_DATASET_CREATE));
    H5Pset_chunk(create.get(), 3, chunk);
    Dataset m(H5Dcreate2(f.get(), "multBy", H5T_IEEE_F64LE, ms.get(), H5P_DEFAULT, H5P_DEFAULT, H5P_DEFAULT));
    Dataset d(H5Dcreate2(f.get(), "discount", H5T_IEEE_F64LE, s.get(), H5P_DEFAULT, create.get(), H5P_DEFAULT));
    REQUIRE(H5Dwrite(d.get(), H5T_NATIVE_DOUBLE, H5S_ALL, H5S_ALL, H5P_DEFAULT, values.data()) >= 0);
  }
  {  // the second key (each 40 bytes, then an 8-byte child): 2,928 bytes of chunk (0, 0, 0), at the file's start
    const std::uint32_t key[2] = {2928, 0};
    const std::uint64_t origin_and_child[5] = {0, 0, 0, 0, 0};
    overwrite_after(path, chunk_btree, 24 + 48, key, sizeof key);
    overwrite_after(path, chunk_btree, 24 + 48 + sizeof key, origin_and_child, sizeof origin_and_child);
  }
  // The sanitizer build saw HDF5's write past the buffer; here it must come
  // to HDF5 reading, and the record left intact read as written.
  const InputFile input(path.string(), "multBy", "discount");
  CHECK(input.discount_storage(Precision::f64).read_by == ReadBy::hdf5);
  std::vector<double> date2(14);
  input.read_discount(Block{{2, 3}, {0, 7}}, Precision::f64, date2.data());
  CHECK(date2 == std::vector<double>(values.begin() + 28, values.end()));
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
  const auto cube = ChunkedCube::open(d, path.string(), H5T_NATIVE_DOUBLE, K);
  REQUIRE(cube);
  // called outside any parallel region, as the overlapped pipeline's reader
  // is: 40 chunks, decoded side by side
  std::vector<double> got(4 * N * K);
  REQUIRE(cube->read(Block{{0, 4}, {0, Index(N)}}, got.data()));
  CHECK(std::memcmp(got.data(), values.data(), got.size() * sizeof(double)) == 0);
  CHECK_THROWS_WITH(cube->read(Block{{3, 5}, {0, Index(N)}}, got.data()),
                    Catch::Contains("team_decoded.h5: chunk at (4, 300, 0) (dates 4-4, ids 300-399): not a valid deflate stream"));
  std::fill(got.begin(), got.end(), -1.0);
  CHECK(cube->read(Block{{2, 4}, {0, Index(N)}}, got.data()));  // and it goes on after an error, values intact
  CHECK(std::memcmp(got.data(), values.data() + 2 * N * K, 2 * N * K * sizeof(double)) == 0);
  CHECK_FALSE(cube->read(Block{{5, 6}, {0, Index(N)}}, got.data()));  // HDF5's fill values then
}
