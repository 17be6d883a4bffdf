#pragma once
// `cvest tune`: the write and read modes measured in a folder and flat's
// walks measured in memory, each recorded in the user's cache folder for the
// runs that follow (app/tune/WriteModes.hpp, app/tune/WalkRecords.hpp).
#include <iosfwd>
#include <string>

namespace cvest::app {

struct TuneArgs {
  std::string folder = ".";
  std::string size = "1600MB";  // written by each pass
  int repeats = 6;              // passes each way (even: each way follows each equally often)
  std::string walk_size = "800MB";  // discount at each shape of the in-memory walks
  bool walks_only = false;          // flat's walks in memory, no folder
};
// Measures writing past the page cache and through it in `folder`
// (app/tune/WriteModes.hpp), records the result for [output] direct = "auto",
// then flat/left's streams and flat/right's dates at once in memory
// (app/tune/TuneWalks.hpp; `walks_only`: only these), and says it on `out_text`
// (progress on `progress`).
void tune_command(const TuneArgs& args, std::ostream& progress, std::ostream& out_text);

}  // namespace cvest::app
