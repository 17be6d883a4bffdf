#pragma once
// The HDF5 files of a job: the input (multBy, discount), generated inputs,
// and the output cube, written to a temporary file that is renamed into
// place only after success.
#include "core/Deck.hpp"
#include "core/Plan.hpp"
#include "io/Hdf5.hpp"

#include <map>
#include <mutex>
#include <string>

namespace cvest::io {

struct InputShape {
  Index T = 0, N = 0, K = 0;
  Precision precision = Precision::f64;
};

// The input file of a job, checked: multBy (N, K) and discount (T, N, K) of
// floats, matching N and K, no zero-length dimension.
class InputFile {
 public:
  InputFile(const std::string& path, const std::string& multby, const std::string& discount,
            std::size_t chunk_cache_bytes = 64u << 20);
  const InputShape& shape() const { return shape_; }
  const std::string& path() const { return path_; }
  // C-order reads, converted to `precision`.
  void read_multby(Range ids, Precision precision, void* buffer) const;
  void read_discount(const Block& block, Precision precision, void* buffer) const;

 private:
  std::string path_, multby_name_, discount_name_;
  File file_;
  Dataset multby_, discount_;
  InputShape shape_;
};

// Writes multBy and discount with reproducible values, one block of dates at
// a time (never the whole cube), chunked. Temporary file, then rename.
void generate_input(const std::string& path, const GenerateSpec& spec, bool overwrite);

// The value generate_input writes at flat index `index` of `stream` (0:
// multBy, 1: discount): tests and verifiers recompute it.
double generated_value(std::uint64_t seed, int stream, std::uint64_t index);

struct OutputSpec {
  std::string path, dataset = "cv";
  Index T = 0, N = 0, K = 0;
  Precision precision = Precision::f64;
  std::string compression = "none";
  int gzip_level = 4;
  Index chunk_ids = 0;  // 0: about 1 MiB chunks
  bool overwrite = false;
};

class OutputFile {
 public:
  explicit OutputFile(const OutputSpec& spec);  // creates the temporary file
  ~OutputFile();                                // removes it unless committed
  OutputFile(const OutputFile&) = delete;
  OutputFile& operator=(const OutputFile&) = delete;

  Index chunk_ids() const { return chunk_[1]; }
  void write(const Block& block, const void* buffer);  // C order (dates, ids, K)
  // Attributes and dimension scales, close, rename onto spec.path.
  void commit(const std::map<std::string, std::string>& attributes);

 private:
  OutputSpec spec_;
  std::string temp_path_;
  File file_;
  Dataset ds_;
  std::array<Index, 3> chunk_{};
  bool direct_chunks_ = false;
  bool committed_ = false;
  std::vector<unsigned char> pad_;
};

// Refuses to proceed when `path` exists and overwrite is false, or when its
// directory cannot be written. InputError / IoError naming the path.
void check_output_path(const std::string& path, bool overwrite);

}  // namespace cvest::io
