#pragma once
// Test inputs made by hand: datasets of any type and shape, files of HDF5's
// defaults, and damage done to them as a fault would.
#include "io/hdf5/Hdf5.hpp"
#include "core/Errors.hpp"

#include <catch2/catch.hpp>

#include <algorithm>
#include <cstdio>
#include <filesystem>
#include <functional>
#include <string>
#include <string_view>
#include <vector>

namespace cvest::test {

using namespace cvest::io;
namespace fs = std::filesystem;

// Writes a dataset of `type` with `dims` (values: zeros) into `path`.
inline void add_dataset(const fs::path& path, const std::string& name, hid_t type, std::vector<hsize_t> dims) {
  const bool exists = fs::exists(path);
  File f(exists ? H5Fopen(path.c_str(), H5F_ACC_RDWR, H5P_DEFAULT)
                : H5Fcreate(path.c_str(), H5F_ACC_TRUNC, H5P_DEFAULT, H5P_DEFAULT));
  REQUIRE(f);
  Dataspace s(H5Screate_simple(int(dims.size()), dims.data(), nullptr));
  Dataset d(H5Dcreate2(f.get(), name.c_str(), type, s.get(), H5P_DEFAULT, H5P_DEFAULT, H5P_DEFAULT));
  REQUIRE(d);
}

inline std::string error_of(const std::function<void()>& f) {
  try {
    f();
  } catch (const InputError& e) {
    return e.what();
  }
  return "no InputError";
}

// Damages a file as a fault would: `size` bytes written at `offset` past the
// first occurrence of `pattern`, which must be there. Returns the bytes
// they replaced.
inline std::vector<char> overwrite_after(const std::filesystem::path& path, std::string_view pattern, long offset,
                                  const void* bytes, std::size_t size) {
  std::vector<char> contents(std::filesystem::file_size(path));
  std::FILE* f = std::fopen(path.c_str(), "r+b");
  REQUIRE(f);
  REQUIRE(std::fread(contents.data(), 1, contents.size(), f) == contents.size());
  const auto at = std::search(contents.begin(), contents.end(), pattern.begin(), pattern.end());
  REQUIRE(at != contents.end());
  const long position = long(at - contents.begin()) + offset;
  REQUIRE(position >= 0);
  REQUIRE(std::size_t(position) + size <= contents.size());
  std::fseek(f, position, SEEK_SET);
  REQUIRE(std::fwrite(bytes, 1, size, f) == size);
  std::fclose(f);
  return {contents.begin() + position, contents.begin() + position + long(size)};
}

// A chunk index's v1 B-tree node: "TREE", type 1 (chunks), level, entries,
// two siblings (24 bytes); then keys (the chunk's size, its filter mask, its
// offsets) and children (addresses) in turn.
inline constexpr std::string_view chunk_btree{"TREE\x01", 5};

// multBy (3, 2) and discount (2, 3, 2), unwritten, in a file of HDF5's
// defaults: superblock version 0, an old-style root group (its link names
// in a local heap).
inline void write_defaults_input(const std::filesystem::path& path) {
  File f(H5Fcreate(path.c_str(), H5F_ACC_TRUNC, H5P_DEFAULT, H5P_DEFAULT));
  const hsize_t mdims[2] = {3, 2}, ddims[3] = {2, 3, 2};
  Dataspace ms(H5Screate_simple(2, mdims, nullptr)), ds(H5Screate_simple(3, ddims, nullptr));
  Dataset m(H5Dcreate2(f.get(), "multBy", H5T_IEEE_F64LE, ms.get(), H5P_DEFAULT, H5P_DEFAULT, H5P_DEFAULT));
  Dataset d(H5Dcreate2(f.get(), "discount", H5T_IEEE_F64LE, ds.get(), H5P_DEFAULT, H5P_DEFAULT, H5P_DEFAULT));
}

}  // namespace cvest::test
