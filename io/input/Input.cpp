#include "io/input/Input.hpp"

#include "core/Interrupt.hpp"
#include "io/os/Faults.hpp"
#include "io/hdf5/MetadataSandbox.hpp"

#include <cstring>

namespace cvest::io {

namespace {
// A job's input, unless a test makes it unreadable (CVEST_FAULT=open_input).
CubeFile open_job_input(const std::string& path, const std::string& multby, const std::string& discount,
                        std::size_t chunk_cache_bytes) {
  if (fault_injected("open_input")) throw InputError(path + ": cannot be opened for reading");
  check_metadata_in_child(path, {multby, discount});  // before this process lets HDF5 read any of it
  return CubeFile(path, {{multby, 2}, {discount, 3}}, chunk_cache_bytes);
}
}  // namespace

InputFile::InputFile(const std::string& path, const std::string& multby, const std::string& discount,
                     std::size_t chunk_cache_bytes, DirectMode reads, const std::string& reads_because,
                     std::size_t held_bytes)
    : path_(path), multby_name_(multby), discount_name_(discount), reads_(reads), reads_because_(reads_because),
      held_bytes_(held_bytes),
      file_(open_job_input(path, multby, discount, chunk_cache_bytes)) {
  const DatasetShape &m = file_.shape(0), &d = file_.shape(1);
  for (std::size_t i = 0; i < 3; ++i)
    if (d.dims[i] == 0)
      throw InputError(path + ": dataset '" + discount + "' is " + dims_text(d.dims) + ", expected no zero-length dimension");
  if (m.dims[0] != d.dims[1] || m.dims[1] != d.dims[2])
    throw InputError(path + ": dataset '" + multby + "' is " + dims_text(m.dims) + ", expected (" + std::to_string(d.dims[1]) +
                     ", " + std::to_string(d.dims[2]) + ") to match '" + discount + "' " + dims_text(d.dims));
  shape_ = {d.dims[0], d.dims[1], d.dims[2], d.precision, m.precision};
  discount_reader_ = std::make_unique<CubeReader>(file_.dataset(1), path, discount, shape_.N, shape_.K, chunk_cache_bytes,
                                                  reads, reads_because, held_bytes, true);
  multby_reader_ = std::make_unique<CubeReader>(file_.dataset(0), path, multby, shape_.N, shape_.K, chunk_cache_bytes, reads,
                                                reads_because);
}

void InputFile::read_multby(Range ids, Precision precision, void* buffer) const {
  if (!kept_multby_.empty() && precision == kept_precision_) {
    const std::size_t row = std::size_t(shape_.K) * element_size(precision);
    std::memcpy(buffer, kept_multby_.data() + std::size_t(ids.begin) * row, std::size_t(ids.size()) * row);
    return;
  }
  if (ids.begin == 0 && ids.end == shape_.N) {  // a resident multBy
    multby_reader_->read_whole(precision, buffer);
    return;
  }
  multby_reader_->read(Block{{0, 1}, ids}, precision, buffer);
}

void InputFile::keep_multby(Precision precision) const {
  std::vector<unsigned char> whole(std::size_t(shape_.N * shape_.K) * element_size(precision));
  kept_decoded_ = multby_reader_->read_whole(precision, whole.data());
  kept_multby_ = std::move(whole);
  kept_precision_ = precision;
}

void InputFile::read_discount(const Block& b, Precision precision, void* buffer) const {
  throw_if_interrupted();
  discount_reader_->read(b, precision, buffer);
}

}  // namespace cvest::io
