#pragma once
// A distributed run's figures by rank: each rank's part of a job, gathered
// at rank 0 into the job's report.
#include "app/Ranks.hpp"
#include "core/Plan.hpp"
#include "core/pipeline/Pipeline.hpp"

namespace cvest::app {

struct JobReport;

// One rank's part of a job in a distributed run (its median run).
struct RankStats {
  double seconds[phase_count] = {};
  double bytes[phase_count] = {};
  double total_s = 0;
  int blocks = 0;
  double peak_rss_bytes = 0;
};

// Every rank's phase seconds and bytes, wall time and blocks of `job`'s
// median run, at rank 0: its per_rank, and its stats as the ranks' together
// (busy seconds and bytes summed, wall time the slowest rank's; resumed
// blocks summed; roof figures from every rank's pairs together). Collective.
void gather_rank_stats(const Ranks& ranks, const BlockPlan& my_plan, JobReport& job);

// Peak resident set size of this process so far, in bytes.
double peak_rss_bytes();
// Starts peak_rss_bytes() afresh from the present RSS (Linux's clear_refs
// "5"; a no-op where not allowed): the run's peak is its own, not that of
// flat's first-use measurement before it (about 100 MiB on a 32 MiB L3, freed).
void reset_peak_rss();

}  // namespace cvest::app
