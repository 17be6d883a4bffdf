// Resuming an output (OutputFile's members, io/output/OutputFile.hpp): a
// killed run's temporary file, sealed or journaled, taken over by this run.
#include "io/output/OutputFile.hpp"

#include "io/output/Journal.hpp"
#include "io/os/FileIdentity.hpp"
#include "io/os/TempFiles.hpp"

#include <fmt/format.h>

#include <filesystem>

namespace fs = std::filesystem;

namespace cvest::io {

// A killed run's file taken over under this run's own (fresh) name, and
// only the file that was checked (`named`): one swapped in meanwhile is
// left where it now is. False where it could not be.
bool OutputFile::take_over(const std::string& candidate, const FileIdentity& named) {
  if (!rename_without_replacing(candidate, temp_path_)) return false;
  if (FileIdentity::at(temp_path_) != named) {
    fmt::print(stderr, "cvest: not resuming {}: it was replaced while this run took it over; left as {}, starting "
                       "over\n", candidate, temp_path_);
    temp_path_ = temp_path_for(spec_.path);
    temp_guard_.retarget(temp_path_);
    return false;
  }
  made_ = named;
  return true;
}

bool OutputFile::adopt_sealed_run() {
  for (const std::string& candidate : stale_temp_files(spec_.path, false)) {
    std::string why;
    const FileIdentity named = FileIdentity::at(candidate);
    if (!Journal::sealed(seal_path(candidate), candidate, seal_fingerprint(), why)) continue;
    if (!take_over(candidate, named)) continue;
    fmt::print(stderr, "cvest: {}: a run that stopped had finished and synced it ({}) but not yet put it in place; "
                       "putting it in place\n", spec_.path, candidate);
    sealed_ = true;
    seal();  // under this run's name, before the old seal goes: a kill between them leaves one
    std::error_code ec;
    fs::remove(seal_path(candidate), ec);
    return true;
  }
  return false;
}

bool OutputFile::adopt_killed_run() {
  for (const std::string& candidate : stale_temp_files(spec_.path, false)) {
    const std::vector<std::string> journals = journals_of(candidate);
    if (journals.empty()) continue;  // killed before its first journal: nothing to resume
    std::vector<Block> done;
    std::string why;
    bool matches = true;
    for (const std::string& j : journals) {
      const auto blocks = Journal::read(j, candidate, spec_.fingerprint, why);
      if (!blocks) {
        matches = false;
        break;
      }
      done.insert(done.end(), blocks->begin(), blocks->end());
    }
    if (!matches) {
      fmt::print(stderr, "cvest: not resuming {} (left by a run that stopped): {}; starting over\n", candidate, why);
      continue;
    }
    if (done.empty()) {  // stopped before its first block was recorded: nothing to continue from
      fmt::print(stderr, "cvest: not resuming {} (left by a run that stopped): it recorded no finished blocks; "
                         "starting over\n", candidate);
      continue;
    }
    if (!take_over(candidate, FileIdentity::at(candidate))) return false;
    File file(H5Fopen(temp_path_.c_str(), H5F_ACC_RDWR, H5P_DEFAULT));
    Dataset ds(file ? H5Dopen2(file.get(), spec_.dataset.c_str(), H5P_DEFAULT) : H5I_INVALID_HID);
    if (!ds) {
      fmt::print(stderr, "cvest: not resuming {}: its file does not open as HDF5; starting over\n", candidate);
      std::error_code ec;
      fs::remove(temp_path_, ec);
      continue;
    }
    file_ = std::move(file);
    ds_ = std::move(ds);
    resumed_ = std::move(done);
    double bytes = 0;
    for (const Block& b : resumed_) bytes += double(b.dates.size() * b.ids.size() * spec_.K);
    fmt::print(stderr, "cvest: resuming {}: {} blocks ({}) are on disk from a run that stopped ({})\n", spec_.path,
               resumed_.size(), format_bytes(bytes * double(element_size(spec_.precision))), candidate);
    return true;
  }
  return false;
}

}  // namespace cvest::io
