#include "app/run/RunReport.hpp"

#include <fmt/format.h>

#include <algorithm>

namespace cvest::app {

int JobReport::slowest_rank() const {
  int slowest = 0;
  for (std::size_t r = 0; r < per_rank.size(); ++r)
    if (per_rank[r].total_s > per_rank[std::size_t(slowest)].total_s) slowest = int(r);
  return slowest;
}

double JobReport::load_balance() const {
  if (per_rank.empty()) return 1;
  double sum = 0;
  for (const auto& r : per_rank) sum += r.total_s;
  return sum > 0 ? per_rank[std::size_t(slowest_rank())].total_s / (sum / double(per_rank.size())) : 1;
}

void JobReport::summarize_roof() {
  roof_GBps = roof_pairs::copy_GBps(roof_calls);
  kernel_roof_fraction = roof_pairs::kernel_fraction(roof_calls);
  kernel_roof_interval = roof_pairs::kernel_fraction_interval(roof_calls);
}

std::string JobReport::roof_interval_text() const {
  const MedianInterval& in = kernel_roof_interval;
  return in.exists ? fmt::format("{:.2f}-{:.2f}", in.low, in.high) : std::string("-");
}

double RunReport::input_GBps(const JobReport& job) const {
  const double in_bytes = double(T * N * K) * double(element_size(job.precision));
  return job.stats.total_s > 0 ? in_bytes / job.stats.total_s / 1e9 : 0.0;
}

const BlockPlan& RunReport::plan(LayoutKind layout) const { return plan_for(plans, layout); }

namespace {

bool less_total(const JobReport& a, const JobReport& b) { return a.stats.total_s < b.stats.total_s; }

}  // namespace

const JobReport* RunReport::fastest() const {
  return jobs.empty() ? nullptr : &*std::min_element(jobs.begin(), jobs.end(), less_total);
}

const JobReport* RunReport::slowest() const {
  return jobs.empty() ? nullptr : &*std::max_element(jobs.begin(), jobs.end(), less_total);
}

TimeShares RunReport::time_shares() const {
  TimeShares shares;
  const JobReport* best = fastest();
  if (!best) return shares;
  for (int p = 0; p < phase_count; ++p) shares.seconds[p] = best->stats.seconds[p];
  shares.kernel_as_run = best->stats.seconds[int(Phase::kernel)];
  shares.seconds[int(Phase::kernel)] = best->stats.kernel_seconds_unwarmed();
  for (const double s : shares.seconds) shares.busy += s;
  if (shares.busy > 0) shares.job = best;
  return shares;
}

}  // namespace cvest::app
