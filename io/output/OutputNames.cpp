#include "io/output/OutputNames.hpp"

#include "io/hdf5/Hdf5.hpp"

#include <vector>

namespace cvest::io {

std::optional<RecordedNames> recorded_names(const std::string& path, const std::string& preferred) {
  const File file = open_input_file(path);
  const auto written_by_cvest = [&](const std::string& name) {
    return H5Lexists(file.get(), name.c_str(), H5P_DEFAULT) > 0 &&
           H5Aexists_by_name(file.get(), name.c_str(), "cvest_version", H5P_DEFAULT) > 0;
  };
  std::string dataset = preferred;
  if (!written_by_cvest(dataset)) {
    std::vector<std::string> found;  // every object with cvest's attributes
    const auto visit = [](hid_t group, const char* name, const H5L_info_t*, void* data) -> herr_t {
      if (H5Aexists_by_name(group, name, "cvest_version", H5P_DEFAULT) > 0)
        static_cast<std::vector<std::string>*>(data)->push_back(name);
      return 0;
    };
    // A failed visit finds what it found: nothing, or too little to choose.
    if (H5Lvisit(file.get(), H5_INDEX_NAME, H5_ITER_NATIVE, visit, &found) < 0 || found.size() != 1)
      return std::nullopt;
    dataset = found.front();
  }
  const Dataset ds(H5Dopen2(file.get(), dataset.c_str(), H5P_DEFAULT));
  if (!ds) return std::nullopt;
  return RecordedNames{dataset, read_string_attribute(ds.get(), "multby_dataset"),
                       read_string_attribute(ds.get(), "discount_dataset")};
}

}  // namespace cvest::io
