#include "app/run/JobRun.hpp"

#include "app/run/JobOutput.hpp"
#include "core/Version.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <memory>
#include <utility>
#include <vector>

namespace cvest::app {

JobRunner::JobRunner(const Deck& deck, const RunPlan& plan, const BuildFacts& build, const Ranks& ranks,
                     std::ostream& progress)
    : deck_(deck), plan_(plan), build_(build), ranks_(ranks), progress_(progress) {
  if (!plan.blocks.front().multby_resident) return;  // the same for every layout
  ranks.together([&] {
    resident_multby_ = Kokkos::View<unsigned char*, StagingSpace>(
        Kokkos::view_alloc("cvest::run::multBy", Kokkos::WithoutInitializing),
        std::size_t(plan.shape.N * plan.shape.K) * element_size(plan.precision));
    plan.input->read_multby({0, plan.shape.N}, plan.precision, resident_multby_.data());
  });
}

void JobRunner::free_buffers() {
  buffers_.clear();
  check_buffers_.clear();
}

// Buffers kept from the last job stay only where this job's fit the budget
// beside them: a deck alternating layouts keeps both sets of small blocks,
// blocks as large as the budget allows are made anew.
void JobRunner::keep_buffers_within_budget(const JobPlan& job, const BlockPlan& mine) {
  const double copies = std::max(job.pipeline_threads, 1);
  const double need =
      std::max(double(mine.buffer_bytes), copies * per_thread_buffer_bytes(mine, job.layout, job.read_ahead));
  if (double(buffers_.kept_bytes() + check_buffers_.kept_bytes()) + need > double(deck_.run.memory_budget))
    free_buffers();
}

JobReport planned_job_report(const JobPlan& job, const RunPlan& plan, int repeats) {
  JobReport report;
  report.strategy = job.strategy;
  report.layout = job.layout;
  report.precision = plan.precision;
  report.runs = repeats;
  report.pipeline = job.pipeline;
  report.pipeline_threads = job.pipeline_threads;
  report.read_ahead = job.read_ahead;
  return report;
}

JobReport JobRunner::run(const JobPlan& planned, std::string& output_writes) {
  JobReport job = planned_job_report(planned, plan_, deck_.run.repeats);
  const BlockPlan mine = plan_.share(planned.layout, ranks_.rank());  // all of it in one process
  // What one kernel call computes: a block, or a LayoutLeft tile of one in
  // the per-thread pipeline.
  job.kernel_ids = kernel_ids(mine, planned.layout, planned.pipeline_threads);
  keep_buffers_within_budget(planned, mine);
  std::vector<PipelineStats> runs;
  for (int r = 0; r < deck_.run.repeats; ++r)
    runs.push_back(run_once(planned, mine, job, output_writes, r + 1 == deck_.run.repeats));
  buffers_.end_job();
  summarize_runs(std::move(runs), job);
  if (ranks_.size() > 1) gather_rank_stats(ranks_, mine, job);
  job.peak_rss_bytes = peak_rss_bytes();
  return job;
}

// The job's figures are its median run's (by total time); its roof figures
// are all its runs' pairs together, with the range of each run's own
// median fraction.
void JobRunner::summarize_runs(std::vector<PipelineStats> runs, JobReport& job) {
  std::sort(runs.begin(), runs.end(), [](const auto& a, const auto& b) { return a.total_s < b.total_s; });
  std::vector<double> fractions;
  for (const PipelineStats& s : runs) {
    if (const double f = s.kernel_roof_fraction(); f > 0) fractions.push_back(f);
    job.roof_calls.insert(job.roof_calls.end(), s.roof.begin(), s.roof.end());
  }
  if (!fractions.empty()) {
    job.kernel_roof_min = *std::min_element(fractions.begin(), fractions.end());
    job.kernel_roof_max = *std::max_element(fractions.begin(), fractions.end());
  }
  job.stats = std::move(runs[runs.size() / 2]);
  job.read_ahead = job.stats.read_ahead;  // as it ran (the plan's may not apply: too few blocks)
  job.summarize_roof();
}

// Every BlockIO call may run on several threads at once: input reads
// (pread, decoding, or HDF5's thread-safe build), checks (a buffer per
// thread) and the output's writes.
template <class Scalar>
BlockIO<Scalar> JobRunner::block_io(const std::function<void(const Block&, const void*)>& sink) {
  BlockIO<Scalar> io;
  const io::InputFile& input = *plan_.input;
  const Precision precision = plan_.precision;
  if (resident_multby_.size() > 0) {
    const auto* m = reinterpret_cast<const Scalar*>(resident_multby_.data());
    const Index K = plan_.shape.K;
    io.multby_at = [m, K](Range ids) -> const Scalar* { return m + ids.begin * K; };
  } else {
    io.read_multby = [&input, precision](Range ids, Scalar* buf) { input.read_multby(ids, precision, buf); };
  }
  io.read_discount = [&input, precision](const Block& b, Scalar* buf) { input.read_discount(b, precision, buf); };
  io.write_cv = [sink](const Block& b, const Scalar* buf) { sink(b, buf); };
  io.concurrent = true;
  return io;
}

std::map<std::string, std::string> JobRunner::output_attributes(const JobPlan& job) const {
  return {{"cvest_version", CVEST_VERSION},
          {"strategy", std::string(to_string(job.strategy))},
          {"layout", std::string(to_string(job.layout))},
          {"precision", std::string(to_string(plan_.precision))},
          {"backend", build_.backend},
          {"kokkos_version", build_.kokkos_version},
          {"input_file", deck_.input.file},
          {"multby_dataset", deck_.input.multby},
          {"discount_dataset", deck_.input.discount}};
}

// One run of `job` over this rank's blocks: the first run of the deck writes
// the output, the others are compared with it; `ends_job`: the job's last.
PipelineStats JobRunner::run_once(const JobPlan& job, const BlockPlan& mine, JobReport& report,
                                  std::string& output_writes, bool ends_job) {
  const bool writes = !written_;
  BlockPlan todo = mine;
  std::unique_ptr<JobOutput> out;
  std::unique_ptr<OutputCheck> check;
  std::function<void(const Block&, const void*)> sink;
  io::OutputSpec spec = plan_.output;
  spec.attributes = output_attributes(job);  // what a killed run's sealed output must have been written with
  if (writes) {
    out = std::make_unique<JobOutput>(spec, ranks_);
    todo = out->remaining(mine);
    report.resumed_blocks = int(mine.blocks.size() - todo.blocks.size());
    sink = [&out](const Block& b, const void* buf) { out->write(b, buf); };
  } else {
    ranks_.together([&] {
      check = std::make_unique<OutputCheck>(
          deck_.output.file, deck_.output.dataset, plan_.shape.N, plan_.shape.K, plan_.precision,
          fmt::format("strategy {} with layout {}", to_string(job.strategy), to_string(job.layout)), check_buffers_);
    });
    sink = [&check](const Block& b, const void* buf) { check->check(b, buf); };
  }
  PipelineOptions options;
  options.buffers = &buffers_;
  options.strategy = job.strategy;
  options.label = fmt::format("{}/{}", to_string(job.strategy), to_string(job.layout));
  options.ends_job = ends_job;
  options.threads = job.pipeline_threads;
  options.read_ahead = job.read_ahead;
  plan_.input->begin_pass(plan_.precision, todo.blocks);
  ranks_.barrier();  // the ranks start together: their times compare
  PipelineStats stats;
  ranks_.together([&] {
    stats = with_types(plan_.precision, job.layout, [&](auto scalar, auto layout_tag) {
      using Scalar = decltype(scalar);
      return run_pipeline<Scalar, decltype(layout_tag)>(todo, block_io<Scalar>(sink), options, progress_);
    });
  });
  const auto decodes = plan_.input->chunk_decodes(plan_.precision);
  report.chunks_decoded = decodes[0];
  report.chunks_distinct = decodes[1];
  if (writes) {
    const auto committed = out->commit(spec.attributes, plan_.input->discount_dataset());
    if (committed.parts_stored_s > 0) report.parts_stored_s = committed.parts_stored_s;
    if (ranks_.root()) output_writes = committed.writes;
    written_ = true;
    report.wrote_output = true;
  }
  return stats;
}

}  // namespace cvest::app
