#include "io/os/ReadyToWrite.hpp"

#include "io/os/Disk.hpp"
#include "io/os/TempFiles.hpp"

#include <utility>

namespace cvest::io {

void ready_to_write(const std::vector<FileToWrite>& files) {
  for (const FileToWrite& f : files) check_output_path(f.path, f.overwrite, f.create_dir, f.to_replace);
  for (const FileToWrite& f : files)
    if (f.clean_up) clean_up_after_killed_runs(f.path);
  std::vector<std::pair<std::string, double>> sizes;
  for (const FileToWrite& f : files) sizes.emplace_back(f.path, f.bytes);
  check_free_space(sizes);
}

}  // namespace cvest::io
