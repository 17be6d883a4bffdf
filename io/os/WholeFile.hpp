#pragma once
// Small files (reports, records) written whole, or not at all.
#include <string>

namespace cvest::io {

// Writes `text` to `path` whole: to a fresh temporary file beside it
// (created exclusively, io/os/TempFiles.hpp), put in place by io::publish
// (synced, renamed over what is there in one step: a link there is
// replaced, not followed; the folder synced). IoError naming the path and
// `what` ("report") on failure, the temporary file removed.
void write_whole_file(const std::string& path, const std::string& text, const std::string& what);

}  // namespace cvest::io
