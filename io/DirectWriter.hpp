#pragma once
// Moved to io/os/DirectWriter.hpp (issue 60). Kept only for the files issue 59 edits in
// the same weeks (io/WriteModes, io/RecordFile, app/TuneReads): once both are
// merged, their includes name io/os/DirectWriter.hpp and this file goes.
#include "io/os/DirectWriter.hpp"
