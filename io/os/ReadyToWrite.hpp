#pragma once
// The files a step is about to write, made ready together before any work:
// each path usable (io/os/Disk.hpp's check_output_path), what killed runs
// left at its temporary names removed where asked (their files, as large as
// the output, count against the disk), and all of them fitting their file
// systems together (check_free_space). In that order: nothing is removed
// for a path that is refused, and the space is measured after the removal.
#include <string>
#include <vector>

namespace cvest::io {

struct FileToWrite {
  std::string path;
  double bytes = 0;          // what it will take on disk (0: not known yet, not counted)
  bool overwrite = false;    // as check_output_path's arguments
  bool create_dir = true;
  bool clean_up = false;     // clean_up_after_killed_runs(path) first
  std::string to_replace = "set [output] overwrite = true";
};

// InputError / IoError naming the path, as those calls throw them.
void ready_to_write(const std::vector<FileToWrite>& files);

}  // namespace cvest::io
