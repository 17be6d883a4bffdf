#pragma once
// Moved to io/os/Disk.hpp, FileIdentity.hpp and WholeFile.hpp (issue 60).
// Kept only for the files issue 59 edits in the same weeks (io/WriteModes,
// io/RecordFile, app/TuneReads): once both are merged, their includes name
// those and this file goes.
#include "io/os/Disk.hpp"
#include "io/os/FileIdentity.hpp"
#include "io/os/WholeFile.hpp"
