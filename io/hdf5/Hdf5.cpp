#include "io/hdf5/Hdf5.hpp"
#include "io/hdf5/FloatingPointMode.hpp"

#include <H5DSpublic.h>

#include <fcntl.h>
#include <numeric>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdint>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <mutex>
#include <stdexcept>
#include <utility>

namespace cvest::io {

namespace {

std::string describe_type(hid_t type) {
  switch (H5Tget_class(type)) {
    case H5T_INTEGER: return std::to_string(8 * H5Tget_size(type)) + "-bit integers";
    case H5T_FLOAT: return std::to_string(8 * H5Tget_size(type)) + "-bit floats";
    case H5T_STRING: return "strings";
    case H5T_COMPOUND: return "a compound type";
    default: return "a non-numeric type";
  }
}

Dataspace select(const Dataset& ds, const std::vector<Index>& start, const std::vector<Index>& count,
                 const std::string& what) {
  Dataspace space(H5Dget_space(ds.get()));
  if (!space) throw IoError(what + ": cannot get the dataspace");
  std::vector<hsize_t> s(start.begin(), start.end()), c(count.begin(), count.end());
  if (H5Sselect_hyperslab(space.get(), H5S_SELECT_SET, s.data(), nullptr, c.data(), nullptr) < 0)
    throw IoError(what + ": cannot select hyperslab at " + dims_text(start) + " of " + dims_text(count));
  return space;
}

}  // namespace

std::string dims_text(const std::vector<Index>& dims) {
  std::string s = "(";
  for (std::size_t i = 0; i < dims.size(); ++i) s += (i ? ", " : "") + std::to_string(dims[i]);
  return s + ")";
}

void quiet_hdf5_errors() {
  // No library clean-up at exit: every id cvest opens is closed by its
  // Handle, and HDF5 1.10's exit-time close of a file whose close already
  // failed (disk full) crashes instead of exiting with cvest's error code.
  static const bool once = [] {
    H5dont_atexit();
    return true;
  }();
  (void)once;
  // The thread-safe build keeps this setting per thread: every thread that
  // calls HDF5 (the pipeline's, their teams) turns its own printing off.
  thread_local bool quiet = false;
  if (!quiet) quiet = H5Eset_auto2(H5E_DEFAULT, nullptr, nullptr) >= 0;
}

void check(long status, const char* call, const std::string& what) {
  if (status < 0) throw IoError(what + ": HDF5's " + call + " failed");
}

void hdf5_version(unsigned& major, unsigned& minor, unsigned& release) {
  if (H5get_libversion(&major, &minor, &release) < 0) major = minor = release = 0;
}

std::string hdf5_filters_text() {
  const std::pair<H5Z_filter_t, const char*> known[] = {{H5Z_FILTER_DEFLATE, "deflate"}, {H5Z_FILTER_SHUFFLE, "shuffle"},
                                                        {H5Z_FILTER_FLETCHER32, "fletcher32"}, {H5Z_FILTER_SZIP, "szip"},
                                                        {H5Z_FILTER_NBIT, "nbit"}, {H5Z_FILTER_SCALEOFFSET, "scaleoffset"},
                                                        {32000, "lzf"}, {32001, "blosc"},  // plugins
                                                        {32008, "bitshuffle"}};
  std::string text;
  const KeepFloatingPointMode keep;
  for (const auto& [id, name] : known)
    if (H5Zfilter_avail(id) > 0) text += (text.empty() ? "" : ", ") + std::string(name);
  return text;
}

void require_threadsafe_hdf5() {
  hbool_t threadsafe = false;
  if (H5is_library_threadsafe(&threadsafe) < 0 || !threadsafe) {
    unsigned major = 0, minor = 0, release = 0;
    H5get_libversion(&major, &minor, &release);
    throw std::runtime_error("cvest: the HDF5 " + std::to_string(major) + "." + std::to_string(minor) + "." +
                             std::to_string(release) +
                             " library loaded is not thread-safe (built without --enable-threadsafe); jobs "
                             "call it from several threads at once");
  }
}

hid_t native_type(Precision precision) {
  return precision == Precision::f64 ? H5T_NATIVE_DOUBLE : H5T_NATIVE_FLOAT;
}

namespace {

// The messages on HDF5's error stack for the call that just failed, innermost
// first ("unable to lock file, errno = 11, ..."): printing is off, the stack
// is still kept.
std::string hdf5_error_messages() {
  std::string text;
  H5Ewalk2(
      H5E_DEFAULT, H5E_WALK_DOWNWARD,
      [](unsigned, const H5E_error2_t* e, void* data) -> herr_t {
        auto& t = *static_cast<std::string*>(data);
        if (e->desc && *e->desc) t += (t.empty() ? "" : "; ") + std::string(e->desc);
        return 0;
      },
      &text);
  return text;
}

}  // namespace

File open_input_file(const std::string& path) {
  std::error_code ec;
  if (!std::filesystem::exists(path, ec)) throw InputError(path + ": no such file");
  if (std::filesystem::is_directory(path, ec)) throw InputError(path + ": is a directory, expected an HDF5 file");
  if (!std::ifstream(path)) throw InputError(path + ": cannot be opened for reading");
  if (H5Fis_hdf5(path.c_str()) <= 0) throw InputError(path + ": not an HDF5 file");
  File file(H5Fopen(path.c_str(), H5F_ACC_RDONLY, H5P_DEFAULT));
  if (!file) {
    // Opened for writing elsewhere (a notebook's h5py.File(..., "a")), HDF5's
    // file lock refuses readers: say so rather than blame the file.
    const std::string why = hdf5_error_messages();
    if (why.find("unable to lock file") != std::string::npos || why.find("unable to lock the file") != std::string::npos)
      throw InputError(path + ": locked by a process that has it open for writing (h5py in 'r+', 'a' or 'w' mode?); "
                              "close it there, or set HDF5_USE_FILE_LOCKING=FALSE on a file system without locks");
    throw InputError(path + ": cannot be opened as HDF5 (truncated or damaged?)");
  }
  return file;
}

Dataset open_dataset(const File& file, const std::string& path, const std::string& name, int rank,
                     DatasetShape& shape, std::size_t chunk_cache_bytes) {
  const std::string where = path + ": dataset '" + name + "'";
  if (H5Lexists(file.get(), name.c_str(), H5P_DEFAULT) <= 0) throw InputError(where + " not found");
  PropList access(H5Pcreate(H5P_DATASET_ACCESS));
  if (chunk_cache_bytes > 0)
    // A prime slot count; w0 at HDF5's default. With w0 = 1 HDF5 1.10 never
    // evicts a chunk that is only ever read in part (every chunk, when blocks
    // are thinner than chunks): 12 chunks of 128 MiB stayed resident under a
    // 128 MiB cache, 1.6 GB of RSS in a job with a 1 GiB budget.
    check(H5Pset_chunk_cache(access.get(), 100003, chunk_cache_bytes, 0.75), "H5Pset_chunk_cache", where);
  Dataset ds(H5Dopen2(file.get(), name.c_str(), access.get()));
  if (!ds) throw InputError(where + " cannot be opened (is it a dataset?)");
  Dataspace space(H5Dget_space(ds.get()));
  const int found = H5Sget_simple_extent_ndims(space.get());
  shape.dims.assign(std::max(found, 0), 0);
  std::vector<hsize_t> dims(shape.dims.size()), max_dims(shape.dims.size());
  if (found > 0) check(H5Sget_simple_extent_dims(space.get(), dims.data(), max_dims.data()), "H5Sget_simple_extent_dims", where);
  for (std::size_t i = 0; i < dims.size(); ++i) shape.dims[i] = Index(dims[i]);
  if (found != rank)
    throw InputError(where + " has rank " + std::to_string(found) + " " + dims_text(shape.dims) + ", expected rank " +
                     std::to_string(rank));
  Datatype type(H5Dget_type(ds.get()));
  if (H5Tget_class(type.get()) != H5T_FLOAT || (H5Tget_size(type.get()) != 8 && H5Tget_size(type.get()) != 4))
    throw InputError(where + " holds " + describe_type(type.get()) + ", expected 64-bit or 32-bit floats");
  shape.precision = H5Tget_size(type.get()) == 8 ? Precision::f64 : Precision::f32;
  PropList create(H5Dget_create_plist(ds.get()));
  if (H5Pget_layout(create.get()) == H5D_COMPACT) {
    // Compact data lives in the object header, its size recorded beside
    // it; HDF5 1.10.8 copies the dataspace's bytes whatever that size says
    // (a damaged one crashed H5Dread, and h5py; found by the input fuzzer).
    hsize_t elements = 1;
    for (const hsize_t d : dims) elements *= d;
    const hsize_t expected = elements * H5Tget_size(type.get()), stored = H5Dget_storage_size(ds.get());
    if (stored != expected)
      throw InputError(where + ": compact storage of " + std::to_string(stored) + " bytes, expected " +
                       std::to_string(expected) + " for " + dims_text(shape.dims) + " (damaged)");
  }
  shape.chunk.clear();
  if (H5Pget_layout(create.get()) == H5D_CHUNKED) {
    std::vector<hsize_t> chunk(rank);
    const int chunk_rank = H5Pget_chunk(create.get(), rank, chunk.data());
    shape.chunk.assign(chunk.begin(), chunk.end());
    // HDF5 writes no chunk of over 4 GiB, nor one longer than a dimension
    // of fixed size; a damaged layout message can claim any (2^78 bytes a
    // chunk, which overflowed every size computed from it; 8,388,609 dates
    // a chunk of a 3-date dataset, whose fill HDF5 spent seconds writing:
    // both found by the input fuzzer).
    double chunk_bytes = double(H5Tget_size(type.get()));
    bool within = chunk_rank == rank;
    for (std::size_t i = 0; i < chunk.size(); ++i) {
      chunk_bytes *= double(chunk[i]);
      within = within && (max_dims[i] == H5S_UNLIMITED || chunk[i] <= max_dims[i]);
    }
    if (!within || chunk_bytes < 1 || chunk_bytes > 4294967295.0)
      throw InputError(where + " " + dims_text(shape.dims) + ": chunks of " + dims_text(shape.chunk) + " (" +
                       std::to_string(chunk_rank) + " dimensions), expected " + std::to_string(rank) +
                       " dimensions, none longer than a fixed one, at most 4 GiB a chunk (damaged layout)");
  }
  return ds;
}

void read_hyperslab(const Dataset& ds, hid_t type, const std::vector<Index>& start, const std::vector<Index>& count,
                    void* buffer, const std::string& what) {
  quiet_hdf5_errors();
  Dataspace file_space = select(ds, start, count, what);
  std::vector<hsize_t> c(count.begin(), count.end());
  Dataspace mem(H5Screate_simple(int(c.size()), c.data(), nullptr));
  const KeepFloatingPointMode keep;
  if (H5Dread(ds.get(), type, mem.get(), file_space.get(), H5P_DEFAULT, buffer) < 0) {
    // Which dates and ids, and what HDF5 says went wrong where it says.
    std::string range;
    if (start.size() == 3)
      range = " (dates " + std::to_string(start[0]) + "-" + std::to_string(start[0] + count[0] - 1) + ", ids " +
              std::to_string(start[1]) + "-" + std::to_string(start[1] + count[1] - 1) + ")";
    const std::string why = hdf5_error_messages();
    const std::string cause = why.find("checksum") != std::string::npos ? "a chunk failed its checksum (corrupt data)"
                              : why.find("filter") != std::string::npos ? "a chunk failed to decode (corrupt data?)"
                                                                         : "truncated file?";
    throw IoError(what + ": read of " + dims_text(count) + " at " + dims_text(start) + range + " failed (" + cause + ")");
  }
}

void write_hyperslab(const Dataset& ds, hid_t type, const std::vector<Index>& start, const std::vector<Index>& count,
                     const void* buffer, const std::string& what) {
  quiet_hdf5_errors();
  Dataspace file_space = select(ds, start, count, what);
  std::vector<hsize_t> c(count.begin(), count.end());
  Dataspace mem(H5Screate_simple(int(c.size()), c.data(), nullptr));
  const KeepFloatingPointMode keep;
  if (H5Dwrite(ds.get(), type, mem.get(), file_space.get(), H5P_DEFAULT, buffer) < 0)
    throw IoError(what + ": write of " + dims_text(count) + " at " + dims_text(start) + " failed (disk full?)");
}

std::array<Index, 3> cube_chunk(Index N, Index K, std::size_t element_size, std::size_t target_bytes) {
  // Equal chunks along ids: N split into as many pieces as target_bytes asks,
  // so the last chunk of a date is not mostly padding.
  const Index target = std::max<Index>(1, Index(target_bytes / (element_size * std::max<Index>(K, 1))));
  const Index pieces = (N + target - 1) / target;
  Index ids = std::max<Index>(1, (N + pieces - 1) / std::max<Index>(pieces, 1));
  // Whole chunks of whole 4096-byte pages, so that a date's chunks (HDF5
  // aligns each to a page in cvest's files) lie back to back and go to the
  // disk in direct writes (io/os/DirectWriter.hpp) with no buffered tails.
  const std::size_t row = element_size * std::size_t(std::max<Index>(K, 1));
  const Index page_ids = Index(4096 / std::gcd(std::size_t(4096), row));
  ids = (ids + page_ids - 1) / page_ids * page_ids;
  return {1, std::min(N, ids), std::max<Index>(K, 1)};
}

// Variable-length UTF-8 strings: h5py and xarray read them as str.
void write_string_attribute(hid_t object, const std::string& name, const std::string& value) {
  const std::string where = "attribute '" + name + "'";
  Datatype type(H5Tcopy(H5T_C_S1));
  check(H5Tset_size(type.get(), H5T_VARIABLE), "H5Tset_size", where);
  check(H5Tset_cset(type.get(), H5T_CSET_UTF8), "H5Tset_cset", where);
  Dataspace scalar(H5Screate(H5S_SCALAR));
  if (H5Aexists(object, name.c_str()) > 0) check(H5Adelete(object, name.c_str()), "H5Adelete", where);
  Attribute attr(H5Acreate2(object, name.c_str(), type.get(), scalar.get(), H5P_DEFAULT, H5P_DEFAULT));
  const char* text = value.c_str();
  if (!attr || H5Awrite(attr.get(), type.get(), &text) < 0) throw IoError("cannot write attribute '" + name + "'");
}

std::string read_string_attribute(hid_t object, const std::string& name) {
  if (H5Aexists(object, name.c_str()) <= 0) return "";
  Attribute attr(H5Aopen(object, name.c_str(), H5P_DEFAULT));
  Datatype type(H5Aget_type(attr.get()));
  if (H5Tget_class(type.get()) != H5T_STRING) return "";
  if (H5Tis_variable_str(type.get()) > 0) {
    char* text = nullptr;
    Datatype mem(H5Tcopy(H5T_C_S1));
    // A string HDF5 cannot convert reads as absent, as a failed read does.
    if (H5Tset_size(mem.get(), H5T_VARIABLE) < 0 || H5Tset_cset(mem.get(), H5Tget_cset(type.get())) < 0) return "";
    if (H5Aread(attr.get(), mem.get(), &text) < 0 || !text) return "";
    std::string value(text);
    check(H5free_memory(text), "H5free_memory", "attribute '" + name + "'");
    return value;
  }
  std::string value(H5Tget_size(type.get()), '\0');
  if (H5Aread(attr.get(), type.get(), value.data()) < 0) return "";
  return value.substr(0, value.find('\0'));
}

namespace {

// The first scale attached to dimension `dim` of `ds`: its file, its path
// there, its length. Empty path when there is none.
struct AttachedScale {
  File file;
  std::string path;
  Index length = -1;
};

AttachedScale attached_scale(hid_t ds, unsigned dim) {
  AttachedScale found;
  if (ds < 0 || H5DSget_num_scales(ds, dim) <= 0) return found;
  const auto first = [](hid_t, unsigned, hid_t scale, void* data) -> herr_t {
    auto& out = *static_cast<AttachedScale*>(data);
    const ssize_t size = H5Iget_name(scale, nullptr, 0);
    if (size <= 0) return 1;
    out.path.assign(std::size_t(size) + 1, '\0');
    if (H5Iget_name(scale, out.path.data(), std::size_t(size) + 1) != size) return -1;
    out.path.resize(std::size_t(size));
    out.file = File(H5Iget_file_id(scale));
    const Dataspace space(H5Dget_space(scale));
    hsize_t n = 0;
    if (H5Sget_simple_extent_ndims(space.get()) == 1) {
      if (H5Sget_simple_extent_dims(space.get(), &n, nullptr) < 0) return -1;
      out.length = Index(n);
    }
    return 1;  // the first is enough
  };
  int index = 0;
  if (H5DSiterate_scales(ds, dim, &index, first, &found) < 0) return AttachedScale{};  // none to carry over
  return found;
}

// netCDF-4 marks a dimension that has no coordinate variable this way.
bool is_netcdf_dimension_only(hid_t scale) {
  char name[64] = {};
  return H5DSget_scale_name(scale, name, sizeof name) > 0 &&
         std::string(name).rfind("This is a netCDF dimension but not a netCDF variable", 0) == 0;
}

}  // namespace

void attach_dimension_scales(const File& file, const Dataset& ds, const std::string& group,
                             const std::vector<std::string>& names, const std::vector<Index>& dims,
                             const std::string& path, hid_t like) {
  std::vector<std::string> made;
  for (std::size_t d = 0; d < names.size(); ++d) {
    std::string name = names[d];
    Dataset scale;
    const AttachedScale source = attached_scale(like, unsigned(d));
    if (!source.path.empty() && source.length == dims[d]) {
      const std::string base = source.path.substr(source.path.rfind('/') + 1);
      if (!base.empty() && std::find(made.begin(), made.end(), base) == made.end()) {
        name = base;
        const Dataset original(H5Dopen2(source.file.get(), source.path.c_str(), H5P_DEFAULT));
        if (original && !is_netcdf_dimension_only(original.get())) {
          // Values, type and attributes as they are; what tied it to the
          // input's datasets (references into that file) goes.
          if (H5Ocopy(source.file.get(), source.path.c_str(), file.get(), (group + name).c_str(), H5P_DEFAULT,
                      H5P_DEFAULT) < 0)
            throw IoError(path + ": cannot copy dimension scale '" + name + "' from the input");
          scale = Dataset(H5Dopen2(file.get(), (group + name).c_str(), H5P_DEFAULT));
          for (const char* attribute : {"CLASS", "NAME", "REFERENCE_LIST", "DIMENSION_LIST", "_Netcdf4Dimid"})
            if (H5Aexists(scale.get(), attribute) > 0)
              check(H5Adelete(scale.get(), attribute), "H5Adelete", path + ": dimension scale '" + name + "'");
        }
      }
    }
    if (!scale) {  // 0 .. dims[d]-1
      std::vector<std::int64_t> values(dims[d]);
      for (Index i = 0; i < dims[d]; ++i) values[i] = i;
      hsize_t n = hsize_t(dims[d]);
      Dataspace space(H5Screate_simple(1, &n, nullptr));
      const PropList create(H5Pcreate(H5P_DATASET_CREATE));
      // Reproducible bytes, as the output's own dataset.
      check(H5Pset_obj_track_times(create.get(), false), "H5Pset_obj_track_times", path);
      scale = Dataset(H5Dcreate2(file.get(), (group + name).c_str(), H5T_NATIVE_INT64, space.get(), H5P_DEFAULT,
                                 create.get(), H5P_DEFAULT));
      if (!scale) throw IoError(path + ": cannot create dimension scale '" + name + "'");
      if (n > 0 && H5Dwrite(scale.get(), H5T_NATIVE_INT64, H5S_ALL, H5S_ALL, H5P_DEFAULT, values.data()) < 0)
        throw IoError(path + ": cannot write dimension scale '" + name + "' (disk full?)");
    }
    if (H5DSset_scale(scale.get(), name.c_str()) < 0 || H5DSattach_scale(ds.get(), scale.get(), unsigned(d)) < 0)
      throw IoError(path + ": cannot attach dimension scale '" + name + "'");
    made.push_back(name);
  }
}

}  // namespace cvest::io
