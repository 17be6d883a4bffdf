#include "io/cube/CubeFile.hpp"

namespace cvest::io {

CubeFile::CubeFile(const std::string& path, const std::vector<Named>& datasets, std::size_t chunk_cache_bytes)
    : path_(path), file_(open_input_file(path)), shapes_(datasets.size()) {
  datasets_.reserve(datasets.size());
  for (std::size_t d = 0; d < datasets.size(); ++d)
    datasets_.push_back(open_dataset(file_, path, datasets[d].name, datasets[d].rank, shapes_[d], chunk_cache_bytes));
}

void CubeFile::read(std::size_t d, const Block& b, Precision precision, void* buffer) const {
  std::vector<Index> start{b.ids.begin, 0}, count{b.ids.size(), shapes_[d].dims.back()};
  if (shapes_[d].dims.size() == 3) {
    start.insert(start.begin(), b.dates.begin);
    count.insert(count.begin(), b.dates.size());
  }
  read_hyperslab(datasets_[d], native_type(precision), start, count, buffer, path_);
}

}  // namespace cvest::io
