#pragma once
// `cvest run`: a deck's strategy x layout product run file to file, as
// stages with values between them: prepare (paths, generation, lock), plan
// (app/run/RunPlan.hpp), each job (app/run/JobRun.hpp), verify
// (app/run/Verify.hpp); the report's formats are app/run/ReportFormats.hpp.
#include "app/Deck.hpp"
#include "app/Ranks.hpp"
#include "app/run/RunReport.hpp"

#include <iosfwd>

namespace cvest::app {

// Runs every job of the deck. With plan_only, checks everything that can be
// checked before a job starts (deck, input, output path, disk space, which
// pipeline each job takes) and returns the plan without writing anything:
// jobs carry no timings then.
RunReport run_deck(const Deck& deck, std::ostream& progress, bool plan_only = false);
// The same over `ranks`: every rank runs its share of each job's blocks and
// the ranks write one output, the same bytes as one process writes. Every
// rank returns; rank 0's report holds every rank's figures. An error on any
// rank is thrown on every rank (Ranks::together).
RunReport run_deck(const Deck& deck, std::ostream& progress, const Ranks& ranks, bool plan_only = false);

}  // namespace cvest::app
