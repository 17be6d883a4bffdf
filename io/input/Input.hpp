#pragma once
// A job's input file, opened and checked: multBy (N, K) and discount
// (T, N, K). Needs HDF5 and cvest's readers only (no Kokkos), so the input
// fuzzer (tests/fuzz) builds it with clang.
#include "core/Plan.hpp"
#include "io/cube/CubeFile.hpp"
#include "io/cube/CubeReader.hpp"
#include "io/hdf5/Hdf5.hpp"

#include <array>
#include <cstddef>
#include <memory>
#include <string>
#include <vector>

namespace cvest::io {

struct InputShape {
  Index T = 0, N = 0, K = 0;
  Precision precision = Precision::f64;         // discount's
  Precision multby_precision = Precision::f64;  // multBy's
  // What NumPy's multBy[None] * discount gives: the wider of the two, the
  // run's precision unless [run] precision chooses one.
  Precision promoted() const {
    return precision == Precision::f64 || multby_precision == Precision::f64 ? Precision::f64 : Precision::f32;
  }
};

// The input file of a job, checked: multBy (N, K) and discount (T, N, K) of
// floats, matching N and K, no zero-length dimension.
class InputFile {
 public:
  // `reads`, `reads_because`: the read mode (CubeReader).
  // `held_bytes`: CubeReader's, for discount.
  InputFile(const std::string& path, const std::string& multby, const std::string& discount,
            std::size_t chunk_cache_bytes = 64u << 20, DirectMode reads = DirectMode::off,
            const std::string& reads_because = "", std::size_t held_bytes = SIZE_MAX);
  InputFile(const InputFile&) = delete;  // its reader refers to its dataset
  InputFile& operator=(const InputFile&) = delete;
  const InputShape& shape() const { return shape_; }
  const std::string& path() const { return path_; }
  const std::string& multby_name() const { return multby_name_; }
  const std::string& discount_name() const { return discount_name_; }
  // C-order reads, converted to `precision`.
  void read_multby(Range ids, Precision precision, void* buffer) const;
  // Whether multBy's rows read a few at a time would decode a large chunk
  // whole each time (CubeReader::rereads_chunks): read it once instead
  // (a run's resident multBy, or keep_multby).
  bool multby_rereads(Precision precision) const { return multby_reader_->rereads_chunks(precision); }
  // multBy read whole now, once, at `precision`, and its rows served from
  // memory from then on (N x K of it).
  void keep_multby(Precision precision) const;  // (before any read, from one thread)
  // Whether the kept multBy was decoded by cvest rather than HDF5
  // (CubeReader::read_whole): verification then cross-checks it.
  bool kept_multby_decoded() const { return kept_decoded_; }
  void read_discount(const Block& block, Precision precision, void* buffer) const;
  // discount's chunk extent (dates, ids) when cvest decodes its chunks
  // itself, else {0, 0}: blocks of whole chunks decode each chunk once.
  std::array<Index, 2> decoded_chunk(Precision precision) const { return discount_reader_->decoded_chunk(precision); }
  // discount's chunks held decoded while blocks cut them (CubeReader::held_chunk);
  // how many at once; a pass over `blocks` begun; its chunks decoded.
  HeldChunk held_chunk(Precision precision) const { return discount_reader_->held_chunk(precision); }
  void hold(Precision precision, std::size_t chunks, Index part_ids = 0) const {
    discount_reader_->hold(precision, chunks, part_ids);
  }
  void begin_pass(Precision precision, const std::vector<Block>& blocks) const {
    discount_reader_->begin_pass(precision, blocks);
  }
  std::array<std::uint64_t, 2> chunk_decodes(Precision precision) const { return discount_reader_->decodes(precision); }
  CubeStorage discount_storage(Precision precision) const { return discount_reader_->storage(precision); }
  CubeStorage multby_storage(Precision precision) const { return multby_reader_->storage(precision); }
  // How discount's bytes were read (CubeReader::reads_text).
  std::string reads_text(Precision precision) const { return discount_reader_->reads_text(precision); }
  bool reads_direct(Precision precision) const { return discount_reader_->reads_direct(precision); }
  // The read mode it was opened with, and why (to open it again alike).
  DirectMode reads() const { return reads_; }
  const std::string& reads_because() const { return reads_because_; }
  std::size_t held_bytes() const { return held_bytes_; }
  const Dataset& discount_dataset() const { return file_.dataset(1); }

 private:
  std::string path_, multby_name_, discount_name_;
  DirectMode reads_;
  std::string reads_because_;
  std::size_t held_bytes_;
  CubeFile file_;  // multBy, discount
  mutable std::vector<unsigned char> kept_multby_;
  mutable Precision kept_precision_ = Precision::f64;
  mutable bool kept_decoded_ = false;
  InputShape shape_;
  std::unique_ptr<CubeReader> discount_reader_, multby_reader_;
};

}  // namespace cvest::io
