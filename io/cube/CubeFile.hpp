#pragma once
// A file of cubes opened for reading: the HDF5 file read-only and the
// datasets asked for by name, each checked for its rank and element type,
// and read through HDF5 alone (H5Dread). A job's input (io/input/Input.hpp)
// builds cvest's own readers on them; verification opens its own to read
// the same bytes through HDF5 (app/run/Verify.hpp).
#include "core/Plan.hpp"
#include "io/hdf5/Hdf5.hpp"

#include <cstddef>
#include <string>
#include <vector>

namespace cvest::io {

class CubeFile {
 public:
  struct Named {
    std::string name;
    int rank = 3;  // 2: a table (ids, columns); 3: a cube (dates, ids, columns)
  };
  // InputError naming the file, and the dataset, where it is not HDF5 or a
  // dataset is missing or of another rank or type (open_input_file,
  // open_dataset). `chunk_cache_bytes`: each dataset's (0: HDF5's default).
  CubeFile(const std::string& path, const std::vector<Named>& datasets, std::size_t chunk_cache_bytes = 0);
  CubeFile(const CubeFile&) = delete;  // readers refer to its datasets
  CubeFile& operator=(const CubeFile&) = delete;
  const std::string& path() const { return path_; }
  // The datasets in the order asked for.
  const Dataset& dataset(std::size_t d) const { return datasets_[d]; }
  const DatasetShape& shape(std::size_t d) const { return shapes_[d]; }
  // Block `b` of dataset `d` through H5Dread, converted to `precision`, C
  // order: its dates and ids of a cube, its ids of a table. IoError naming
  // the file.
  void read(std::size_t d, const Block& b, Precision precision, void* buffer) const;

 private:
  std::string path_;
  File file_;
  std::vector<Dataset> datasets_;
  std::vector<DatasetShape> shapes_;
};

}  // namespace cvest::io
