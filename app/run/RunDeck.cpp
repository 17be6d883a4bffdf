#include "app/run/RunDeck.hpp"

#include "app/FirstUse.hpp"
#include "app/run/JobRun.hpp"
#include "app/run/RankStats.hpp"
#include "app/run/Prepare.hpp"
#include "app/run/RunPlan.hpp"
#include "app/run/Verify.hpp"
#include "io/os/Disk.hpp"
#include "io/hdf5/Hdf5.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <cstdint>
#include <ostream>
#include <sstream>

namespace cvest::app {

namespace {

// The report of a run that has not started: what the plan decided.
RunReport planned_report(const Deck& deck, const RunPlan& plan, const Preparation& prep, const Ranks& ranks) {
  RunReport rep;
  rep.build = build_facts();
  rep.deck = deck.path;
  rep.input = deck.input.file;
  rep.output = deck.output.file;
  rep.memory_budget = deck.run.memory_budget;
  rep.ranks = ranks.size();
  rep.ranks_on_node = ranks.local_size();
  rep.generated_input_bytes = prep.generated_input_bytes;
  rep.T = plan.shape.T, rep.N = plan.shape.N, rep.K = plan.shape.K;
  rep.input_storage = plan.input_storage;
  rep.plans = plan.blocks;
  rep.rank_blocks = plan.rank_blocks;
  rep.output_compression = plan.output.compression;
  rep.output_chunk_ids = plan.output.chunk_ids;
  return rep;
}

// flat's choices measured on first use (app/FirstUse.hpp) under several
// ranks: a node's ranks take turns (at once they would share its bandwidth
// and choose on passes spread by each other's), so its first rank measures
// and the others, with its CPU and threads, find its records and take them.
// Nodes measure side by side. Rank 0 says the first measurement made.
std::string first_use_in_turns(Precision precision, const Ranks& ranks, std::ostream& progress) {
  if (ranks.size() == 1) {
    std::string said = measure_on_first_use(precision, progress);
    if (!said.empty()) reset_peak_rss();  // the measurement's arrays are not the run's
    return said;
  }
  bool allowed = true;
  ranks.together([&] { allowed = first_use_allowed(); });  // a bad CVEST_FIRST_USE: every rank's one error
  // Every rank takes the same turns: the most ranks on a node, 0 where any
  // rank has first use off (ranks' environments may differ).
  std::vector<std::uint64_t> turns{0};
  const auto asked = ranks.gather(std::vector<double>{allowed ? double(ranks.local_size()) : -1.0});
  bool all = true;
  for (const auto& a : asked) {
    all = all && a.at(0) >= 0;
    turns[0] = std::max(turns[0], std::uint64_t(std::max(a.at(0), 0.0)));
  }
  if (!all) turns[0] = 0;
  ranks.broadcast(turns);
  std::string mine;
  for (std::uint64_t turn = 0; turn < turns[0]; ++turn) {
    if (turn == std::uint64_t(ranks.local_rank())) mine = measure_on_first_use(precision, progress);
    ranks.idle_barrier();
  }
  if (!mine.empty()) reset_peak_rss();
  // Rank 0 says the first measurement, and how many ranks measured where
  // more than one did (each node's first; a rank with other threads).
  const std::vector<std::string> said = ranks.gather(mine);
  std::string first;
  std::size_t measured = 0;
  for (std::size_t r = 0; r < said.size(); ++r) {
    if (said[r].empty()) continue;
    if (measured++ == 0) first = r == 0 ? said[r] : fmt::format("rank {}: {}", r, said[r]);
  }
  return measured > 1 ? fmt::format("{} ({} ranks measured)", first, measured) : first;
}

}  // namespace

RunReport run_deck(const Deck& deck, std::ostream& progress, bool plan_only) {
  return run_deck(deck, progress, Ranks(), plan_only);
}

RunReport run_deck(const Deck& deck, std::ostream& progress_to, const Ranks& ranks, bool plan_only) {
  io::quiet_hdf5_errors();
  io::require_threadsafe_hdf5();
  // Rank 0 speaks for all: the others' notes and progress lines would repeat it.
  std::ostringstream unheard;
  std::ostream& progress = ranks.root() ? progress_to : unheard;

  const Preparation prep = prepare_run(deck, ranks, plan_only, progress);
  const RunPlan plan = plan_run(deck, ranks, !(plan_only && prep.input_to_generate), progress);
  RunReport rep = planned_report(deck, plan, prep, ranks);
  if (plan_only) {
    for (const JobPlan& job : plan.jobs) rep.jobs.push_back(planned_job_report(job, plan, deck.run.repeats));
    ranks.together([&] {
      if (const double bytes = io::output_bytes(plan.output); bytes > 0) io::check_free_space(deck.output.file, bytes);
    });
    return rep;
  }

  // Before the jobs' buffers are allocated.
  const bool flat = std::find(deck.run.strategies.begin(), deck.run.strategies.end(), Strategy::flat) !=
                    deck.run.strategies.end();
  if (flat && deck.run.measure_first_use) rep.first_use = first_use_in_turns(plan.precision, ranks, progress);
  JobRunner jobs(deck, plan, rep.build, ranks, progress);
  for (const JobPlan& job : plan.jobs) rep.jobs.push_back(jobs.run(job, rep.output_writes));
  if (plan.input) rep.input_reads = plan.input->reads_text(plan.precision);

  if (deck.run.verify) {
    jobs.free_buffers();
    ranks.together([&] {  // by rank 0, over the whole output
      if (ranks.root())
        verify_output({deck.output.file, deck.input.file, deck.output.dataset, deck.input.multby, deck.input.discount,
                       deck.run.memory_budget},
                      progress);
    });
    rep.verified = true;
  }
  return rep;
}

}  // namespace cvest::app
