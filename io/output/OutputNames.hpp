#pragma once
// What a cvest output records of its making: the attributes
// io::OutputFile::commit writes on its cv dataset (cvest_version, the
// input's multby_dataset and discount_dataset, ...), read back where a
// check has no deck.
#include <optional>
#include <string>

namespace cvest::io {

struct RecordedNames {
  std::string dataset;            // the cv dataset carrying cvest's attributes
  std::string multby, discount;   // the input's datasets it names; "" where it names none
};

// `preferred` where it carries cvest's attributes, else the one dataset in
// the file that does (e.g. one written into a group); nullopt where none or
// several do. InputError where `path` is not an HDF5 file.
std::optional<RecordedNames> recorded_names(const std::string& path, const std::string& preferred);

}  // namespace cvest::io
