#pragma once
// A run's job stage: one strategy x layout of the plan run file to file,
// repeat by repeat (the first job's first run writes the output, every
// other run is compared with it), its figures those of its median run
// (its roof's those of all its runs' pairs).
#include "app/Deck.hpp"
#include "app/Ranks.hpp"
#include "app/run/CheckBuffers.hpp"
#include "app/run/RunPlan.hpp"
#include "app/run/RunReport.hpp"
#include "core/Types.hpp"
#include "core/pipeline/Pipeline.hpp"

#include <Kokkos_Core.hpp>

#include <functional>
#include <iosfwd>
#include <map>
#include <string>
#include <vector>

namespace cvest::app {

// A job's report before it runs: what the plan decided for it, no timings.
JobReport planned_job_report(const JobPlan& job, const RunPlan& plan, int repeats);

class JobRunner {
 public:
  // Reads all of multBy once where the plan keeps it resident: every job and
  // repeat uses it in place (they share the precision). Collective.
  JobRunner(const Deck& deck, const RunPlan& plan, const BuildFacts& build, const Ranks& ranks,
            std::ostream& progress);
  // Collective. The report of `job` (at rank 0 with every rank's figures);
  // `output_writes` says how the output reached the disk where it wrote it.
  JobReport run(const JobPlan& planned, std::string& output_writes);
  // Before verification: the check has the whole budget.
  void free_buffers();

 private:
  PipelineStats run_once(const JobPlan& job, const BlockPlan& mine, JobReport& report, std::string& output_writes,
                         bool ends_job);
  template <class Scalar>
  BlockIO<Scalar> block_io(const std::function<void(const Block&, const void*)>& sink);
  void keep_buffers_within_budget(const JobPlan& job, const BlockPlan& mine);
  static void summarize_runs(std::vector<PipelineStats> runs, JobReport& job);
  std::map<std::string, std::string> output_attributes(const JobPlan& job) const;

  const Deck& deck_;
  const RunPlan& plan_;
  const BuildFacts& build_;
  const Ranks& ranks_;
  std::ostream& progress_;
  // Pipeline and check buffers kept from job to job (and repeat to repeat):
  // the next job's are already mapped (BufferCache); what it does not use
  // is freed when it ends.
  BufferCache buffers_;
  CheckBuffers check_buffers_;
  // multBy whole where the plan keeps it resident (pinned in a Cuda build,
  // so its copies are async); empty otherwise.
  Kokkos::View<unsigned char*, StagingSpace> resident_multby_;
  bool written_ = false;  // the output is on disk: later runs are checked against it
};

}  // namespace cvest::app
