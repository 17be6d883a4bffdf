#include "app/run/RunDeck.hpp"

#include "app/FirstUse.hpp"
#include "app/run/JobRun.hpp"
#include "app/run/RankStats.hpp"
#include "app/run/Prepare.hpp"
#include "app/run/RunPlan.hpp"
#include "app/run/Verify.hpp"
#include "io/os/Disk.hpp"
#include "io/hdf5/Hdf5.hpp"

#include <algorithm>
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

  // One process measures (ranks of a node measuring at once would share its
  // bandwidth); before the jobs' buffers are allocated.
  const bool flat = std::find(deck.run.strategies.begin(), deck.run.strategies.end(), Strategy::flat) !=
                    deck.run.strategies.end();
  if (flat && deck.run.measure_first_use && ranks.size() == 1) {
    rep.first_use = measure_on_first_use(plan.precision, progress);
    if (!rep.first_use.empty()) reset_peak_rss();
  }
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
