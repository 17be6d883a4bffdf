#pragma once
// Moved to io/input/Generator.hpp (issue 60). Kept only for the files issue 59 edits in
// the same weeks (io/WriteModes, io/RecordFile, app/TuneReads): once both are
// merged, their includes name io/input/Generator.hpp and this file goes.
#include "io/input/Generator.hpp"
