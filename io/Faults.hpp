#pragma once
// Moved to io/os/Faults.hpp (issue 60). Kept only for the files issue 59 edits in
// the same weeks (io/WriteModes, io/RecordFile, app/TuneReads): once both are
// merged, their includes name io/os/Faults.hpp and this file goes.
#include "io/os/Faults.hpp"
