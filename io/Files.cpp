#include "io/Files.hpp"

#include <Kokkos_Core.hpp>

#include <cmath>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <unistd.h>

namespace fs = std::filesystem;

namespace cvest::io {

namespace {

std::string temp_path_for(const std::string& path) {
  const fs::path p(path);
  return (p.parent_path() / ("." + p.filename().string() + ".tmp-" + std::to_string(::getpid()))).string();
}

std::size_t element_size(Precision p) { return p == Precision::f64 ? 8 : 4; }

// Creates `path` (truncating) as a new HDF5 file. IoError when it can't.
File create_file(const std::string& path, const std::string& shown) {
  File file(H5Fcreate(path.c_str(), H5F_ACC_TRUNC, H5P_DEFAULT, H5P_DEFAULT));
  if (!file) throw IoError(shown + ": cannot create (directory missing or not writable?)");
  return file;
}

Dataset create_dataset(const File& file, const std::string& name, Precision precision, const std::vector<hsize_t>& dims,
                       const std::vector<hsize_t>& chunk, int gzip_level, const std::string& shown) {
  Dataspace space(H5Screate_simple(int(dims.size()), dims.data(), nullptr));
  PropList create(H5Pcreate(H5P_DATASET_CREATE));
  H5Pset_chunk(create.get(), int(chunk.size()), chunk.data());
  if (gzip_level > 0) {
    H5Pset_shuffle(create.get());
    H5Pset_deflate(create.get(), unsigned(gzip_level));
  }
  // Space is allocated as chunks are written; nothing is pre-filled.
  H5Pset_fill_time(create.get(), H5D_FILL_TIME_NEVER);
  const hid_t type = precision == Precision::f64 ? H5T_IEEE_F64LE : H5T_IEEE_F32LE;
  Dataset ds(H5Dcreate2(file.get(), name.c_str(), type, space.get(), H5P_DEFAULT, create.get(), H5P_DEFAULT));
  if (!ds) throw IoError(shown + ": cannot create dataset '" + name + "'");
  return ds;
}

void rename_into_place(const std::string& temp, const std::string& path) {
  std::error_code ec;
  fs::rename(temp, path, ec);
  if (ec) throw IoError(path + ": cannot rename the finished output into place: " + ec.message());
}

}  // namespace

void check_output_path(const std::string& path, bool overwrite) {
  std::error_code ec;
  if (fs::exists(path, ec) && !overwrite)
    throw InputError(path + ": output exists; set [output] overwrite = true to replace it");
  if (fs::is_directory(path, ec)) throw InputError(path + ": output is a directory");
  const fs::path dir = fs::path(path).parent_path().empty() ? fs::path(".") : fs::path(path).parent_path();
  fs::create_directories(dir, ec);
  if (!fs::is_directory(dir, ec)) throw IoError(path + ": cannot create the output directory " + dir.string());
  if (::access(dir.c_str(), W_OK) != 0) throw IoError(path + ": output directory " + dir.string() + " is not writable");
}

// --- input -----------------------------------------------------------------

InputFile::InputFile(const std::string& path, const std::string& multby, const std::string& discount,
                     std::size_t chunk_cache_bytes)
    : path_(path), multby_name_(multby), discount_name_(discount), file_(open_input_file(path)) {
  DatasetShape m, d;
  multby_ = open_dataset(file_, path, multby, 2, m, chunk_cache_bytes);
  discount_ = open_dataset(file_, path, discount, 3, d, chunk_cache_bytes);
  const auto dims = [](const std::vector<Index>& v) {
    std::string s = "(";
    for (std::size_t i = 0; i < v.size(); ++i) s += (i ? ", " : "") + std::to_string(v[i]);
    return s + ")";
  };
  for (std::size_t i = 0; i < 3; ++i)
    if (d.dims[i] == 0)
      throw InputError(path + ": dataset '" + discount + "' is " + dims(d.dims) + ", expected no zero-length dimension");
  if (m.dims[0] != d.dims[1] || m.dims[1] != d.dims[2])
    throw InputError(path + ": dataset '" + multby + "' is " + dims(m.dims) + ", expected (" + std::to_string(d.dims[1]) +
                     ", " + std::to_string(d.dims[2]) + ") to match '" + discount + "' " + dims(d.dims));
  shape_ = {d.dims[0], d.dims[1], d.dims[2], d.precision};
}

void InputFile::read_multby(Range ids, Precision precision, void* buffer) const {
  read_hyperslab(multby_, native_type(precision), {ids.begin, 0}, {ids.size(), shape_.K}, buffer,
                 path_ + ": dataset '" + multby_name_ + "'");
}

void InputFile::read_discount(const Block& b, Precision precision, void* buffer) const {
  read_hyperslab(discount_, native_type(precision), {b.dates.begin, b.ids.begin, 0},
                 {b.dates.size(), b.ids.size(), shape_.K}, buffer, path_ + ": dataset '" + discount_name_ + "'");
}

// --- generated input --------------------------------------------------------

double generated_value(std::uint64_t seed, int stream, std::uint64_t index) {
  // splitmix64 of (seed, stream, index): reproducible and cheap.
  std::uint64_t z = seed * 0x9E3779B97F4A7C15ull + (std::uint64_t(stream) << 60) + index * 0xD1B54A32D192ED03ull;
  z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
  z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
  z ^= z >> 31;
  const double u = double(z >> 11) * 0x1.0p-53;  // [0, 1)
  return stream == 0 ? 0.5 + u : 0.05 + 0.95 * u;  // multBy in [0.5, 1.5), discount in [0.05, 1)
}

void generate_input(const std::string& path, const GenerateSpec& spec, bool overwrite) {
  if (spec.dates <= 0 || spec.ids <= 0 || spec.cols <= 0)
    throw InputError(path + ": generate needs positive dates, ids and cols");
  check_output_path(path, overwrite);
  const std::string temp = temp_path_for(path);
  try {
    const auto chunk = cube_chunk(spec.ids, spec.cols, element_size(spec.precision));
    File file = create_file(temp, path);
    const hsize_t T = spec.dates, N = spec.ids, K = spec.cols;
    Dataset m = create_dataset(file, "multBy", spec.precision, {N, K}, {hsize_t(chunk[1]), K}, 0, path);
    Dataset d = create_dataset(file, "discount", spec.precision, {T, N, K}, {1, hsize_t(chunk[1]), K}, 0, path);
    using Host = Kokkos::DefaultHostExecutionSpace;
    const Index NK = spec.ids * spec.cols;
    const std::uint64_t seed = spec.seed;
    const bool f64 = spec.precision == Precision::f64;
    // One date of values at a time (a 10M x 5 date is 400 MB in double).
    Kokkos::View<double*, Kokkos::HostSpace> vd(Kokkos::view_alloc("cvest::generate::values", Kokkos::WithoutInitializing), NK);
    Kokkos::View<float*, Kokkos::HostSpace> vf(Kokkos::view_alloc("cvest::generate::values_f32", Kokkos::WithoutInitializing), f64 ? 0 : NK);
    const auto fill = [&](int stream, Index base) {
      Kokkos::parallel_for("cvest::generate::fill", Kokkos::RangePolicy<Host, Kokkos::IndexType<Index>>(0, NK), [=](Index j) {
        const double v = generated_value(seed, stream, std::uint64_t(base + j));
        if (f64) vd(j) = v;
        else vf(j) = float(v);
      });
      Kokkos::fence();
      return f64 ? static_cast<const void*>(vd.data()) : static_cast<const void*>(vf.data());
    };
    write_hyperslab(m, native_type(spec.precision), {0, 0}, {spec.ids, spec.cols}, fill(0, 0), path + ": dataset 'multBy'");
    for (Index t = 0; t < spec.dates; ++t)
      write_hyperslab(d, native_type(spec.precision), {t, 0, 0}, {1, spec.ids, spec.cols}, fill(1, t * NK),
                      path + ": dataset 'discount'");
    write_string_attribute(d.get(), "generator", "cvest generate seed=" + std::to_string(spec.seed));
    d.reset();
    m.reset();
    if (H5Fflush(file.get(), H5F_SCOPE_GLOBAL) < 0) throw IoError(path + ": flush failed (disk full?)");
    file.reset();
    rename_into_place(temp, path);
  } catch (...) {
    std::error_code ec;
    fs::remove(temp, ec);
    throw;
  }
}

// --- output -------------------------------------------------------------------

OutputFile::OutputFile(const OutputSpec& spec) : spec_(spec), temp_path_(temp_path_for(spec.path)) {
  check_output_path(spec.path, spec.overwrite);
  const std::size_t es = element_size(spec.precision);
  chunk_ = spec.chunk_ids > 0 ? std::array<Index, 3>{1, std::min(spec.chunk_ids, spec.N), spec.K}
                              : cube_chunk(spec.N, spec.K, es);
  file_ = create_file(temp_path_, spec.path);
  try {
    ds_ = create_dataset(file_, spec.dataset, spec.precision, {hsize_t(spec.T), hsize_t(spec.N), hsize_t(spec.K)},
                         {hsize_t(chunk_[0]), hsize_t(chunk_[1]), hsize_t(chunk_[2])},
                         spec.compression == "gzip" ? spec.gzip_level : 0, spec.path);
  } catch (...) {
    file_.reset();
    std::error_code ec;
    fs::remove(temp_path_, ec);
    throw;
  }
  // Uncompressed chunks are written as they are: no chunk cache, no copy.
  direct_chunks_ = spec.compression != "gzip";
  pad_.resize(std::size_t(chunk_[1] * chunk_[2]) * es);
}

OutputFile::~OutputFile() {
  if (!committed_) {
    ds_.reset();
    file_.reset();
    std::error_code ec;
    fs::remove(temp_path_, ec);
  }
}

void OutputFile::write(const Block& b, const void* buffer) {
  const std::string what = spec_.path + ": dataset '" + spec_.dataset + "'";
  const bool aligned = b.ids.begin % chunk_[1] == 0 && (b.ids.end % chunk_[1] == 0 || b.ids.end == spec_.N);
  if (!direct_chunks_ || !aligned) {
    write_hyperslab(ds_, native_type(spec_.precision), {b.dates.begin, b.ids.begin, 0},
                    {b.dates.size(), b.ids.size(), spec_.K}, buffer, what);
    return;
  }
  const std::size_t es = element_size(spec_.precision);
  const auto* bytes = static_cast<const unsigned char*>(buffer);
  const std::size_t chunk_bytes = std::size_t(chunk_[1] * spec_.K) * es;
  for (Index t = b.dates.begin; t < b.dates.end; ++t)
    for (Index i = b.ids.begin; i < b.ids.end; i += chunk_[1]) {
      const std::size_t offset_in_block = std::size_t(((t - b.dates.begin) * b.ids.size() + (i - b.ids.begin)) * spec_.K) * es;
      const Index ids = std::min(chunk_[1], b.ids.end - i);
      const void* src = bytes + offset_in_block;
      if (ids < chunk_[1]) {  // the last, partial chunk travels padded to full size
        std::memcpy(pad_.data(), src, std::size_t(ids * spec_.K) * es);
        std::memset(pad_.data() + std::size_t(ids * spec_.K) * es, 0, chunk_bytes - std::size_t(ids * spec_.K) * es);
        src = pad_.data();
      }
      const hsize_t offset[3] = {hsize_t(t), hsize_t(i), 0};
      if (H5Dwrite_chunk(ds_.get(), H5P_DEFAULT, 0, offset, chunk_bytes, src) < 0)
        throw IoError(what + ": write of chunk at (" + std::to_string(t) + ", " + std::to_string(i) + ", 0) failed (disk full?)");
    }
}

void OutputFile::commit(const std::map<std::string, std::string>& attributes) {
  for (const auto& [k, v] : attributes) write_string_attribute(ds_.get(), k, v);
  attach_dimension_scales(file_, ds_, {"date", "id", "col"}, {spec_.T, spec_.N, spec_.K}, spec_.path);
  ds_.reset();
  if (H5Fflush(file_.get(), H5F_SCOPE_GLOBAL) < 0) throw IoError(spec_.path + ": flush failed (disk full?)");
  file_.reset();
  rename_into_place(temp_path_, spec_.path);
  committed_ = true;
}

}  // namespace cvest::io
