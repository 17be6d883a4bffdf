#pragma once
// Thin RAII over the HDF5 C API: every id is owned by a move-only Handle and
// every return code is checked. Failures throw cvest::IoError (the file system
// or HDF5 failed) or cvest::InputError (the file is not what a job needs),
// with the file and dataset named.
#include "core/Errors.hpp"
#include "core/Names.hpp"

#include <hdf5.h>

#include <array>
#include <cstdint>
#include <string>
#include <utility>
#include <vector>

namespace cvest::io {

template <herr_t (*Close)(hid_t)>
class Handle {
 public:
  Handle() = default;
  explicit Handle(hid_t id) : id_(id) {}
  Handle(Handle&& o) noexcept : id_(std::exchange(o.id_, H5I_INVALID_HID)) {}
  Handle& operator=(Handle&& o) noexcept {
    if (this != &o) {
      reset();
      id_ = std::exchange(o.id_, H5I_INVALID_HID);
    }
    return *this;
  }
  Handle(const Handle&) = delete;
  Handle& operator=(const Handle&) = delete;
  ~Handle() { reset(); }
  hid_t get() const { return id_; }
  explicit operator bool() const { return id_ >= 0; }
  void reset() {
    if (id_ >= 0) Close(id_);
    id_ = H5I_INVALID_HID;
  }

 private:
  hid_t id_ = H5I_INVALID_HID;
};

using File = Handle<H5Fclose>;
using Dataset = Handle<H5Dclose>;
using Dataspace = Handle<H5Sclose>;
using Datatype = Handle<H5Tclose>;
using PropList = Handle<H5Pclose>;
using Attribute = Handle<H5Aclose>;

// Call before any other HDF5 use, on every thread that uses it (cheap after
// the first call on a thread): turns off HDF5's own stack printing (cvest
// reports one line instead) and its exit-time clean-up.
void quiet_hdf5_errors();

// A status HDF5 returned (herr_t, or a count) where a failure is an error:
// IoError "WHAT: HDF5's CALL failed" where it is negative. Every HDF5 call
// whose status matters goes through here or a check with a message of its
// own; the metadata sandbox (io/hdf5/MetadataSandbox.cpp) ignores statuses on
// purpose, and says so.
void check(long status, const char* call, const std::string& what);

// The HDF5 library loaded at run time: its version.
void hdf5_version(unsigned& major, unsigned& minor, unsigned& release);

// The standard filters (and h5py's lzf) this HDF5 can apply, by name:
// "deflate, shuffle, fletcher32, nbit, scaleoffset".
std::string hdf5_filters_text();

// Throws std::runtime_error when the HDF5 library loaded at run time is not
// thread-safe (CMake checks the headers; this checks what the loader found):
// jobs call it from several threads at once.
void require_threadsafe_hdf5();

// "(2, 3, 4)", for messages.
std::string dims_text(const std::vector<Index>& dims);

// The element types cvest computes in.
hid_t native_type(Precision precision);

struct DatasetShape {
  std::vector<Index> dims;
  Precision precision = Precision::f64;
  std::vector<Index> chunk;  // empty when the dataset is not chunked
};

// Opens an existing HDF5 file read-only. InputError when it is missing or not
// HDF5 (or truncated), naming the file.
File open_input_file(const std::string& path);

// Opens `name` in `file` (for messages: `path`) and checks its rank and
// element type. InputError names the file, the dataset and what was found.
Dataset open_dataset(const File& file, const std::string& path, const std::string& name, int rank,
                     DatasetShape& shape, std::size_t chunk_cache_bytes = 0);

// Reads or writes the hyperslab [start, start + count) of a dataset, from or
// into a C-order buffer of count's shape, of `type`.
void read_hyperslab(const Dataset& ds, hid_t type, const std::vector<Index>& start,
                    const std::vector<Index>& count, void* buffer, const std::string& what);
void write_hyperslab(const Dataset& ds, hid_t type, const std::vector<Index>& start,
                     const std::vector<Index>& count, const void* buffer, const std::string& what);

// A chunk shape of about `target_bytes` for a (T, N, K) cube: one date, as
// many ids as fit, all columns, so blocks of whole dates are whole chunks.
std::array<Index, 3> cube_chunk(Index N, Index K, std::size_t element_size, std::size_t target_bytes = 1 << 20);

void write_string_attribute(hid_t object, const std::string& name, const std::string& value);
std::string read_string_attribute(hid_t object, const std::string& name);  // "" when absent

// Makes datasets `group` + names[d] of 0..dims[d]-1 (group: "" for the
// root, else ending in '/'), makes each a dimension scale named names[d] and
// attaches it to dimension d of `ds`: the scales sit beside the dataset, so
// xarray opening that group sees named dimensions. Where `like` (the input's
// discount) has a scale of the same length on dimension d, that one is
// carried over instead, under its own name: its values and type (xarray's
// coordinates: ids, string labels, dates with their units) and its
// attributes. A netCDF dimension without a coordinate variable lends only
// its name.
void attach_dimension_scales(const File& file, const Dataset& ds, const std::string& group,
                             const std::vector<std::string>& names, const std::vector<Index>& dims,
                             const std::string& path, hid_t like = H5I_INVALID_HID);

}  // namespace cvest::io
