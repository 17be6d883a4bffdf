#include "app/run/RunReport.hpp"


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

const BlockPlan& RunReport::plan(LayoutKind layout) const { return plan_for(plans, layout); }

}  // namespace cvest::app
