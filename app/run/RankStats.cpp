#include "app/run/RankStats.hpp"

#include "app/run/RunReport.hpp"
#include "core/Roof.hpp"

#include <algorithm>
#include <utility>
#include <vector>

#include <sys/resource.h>

namespace cvest::app {

void gather_rank_stats(const Ranks& ranks, const BlockPlan& my_plan, JobReport& job) {
  std::vector<double> mine(job.stats.seconds, job.stats.seconds + phase_count);
  mine.insert(mine.end(), job.stats.bytes, job.stats.bytes + phase_count);
  mine.push_back(job.stats.total_s);
  mine.push_back(double(my_plan.blocks.size()));
  mine.push_back(peak_rss_bytes());
  mine.push_back(job.resumed_blocks);
  mine.push_back(job.kernel_roof_fraction);
  mine.push_back(job.roof_GBps);
  mine.push_back(job.stats.kernel_after_roof_s);
  mine.push_back(job.stats.kernel_after_roof_bytes);
  const auto all = ranks.gather(mine);
  if (!ranks.root()) return;
  job.resumed_blocks = 0;
  std::vector<double> fractions, roofs;  // each rank's: the job's are their medians
  PipelineStats together;
  together.timeline = std::move(job.stats.timeline);  // rank 0's
  for (const auto& r : all) {
    RankStats rs;
    std::copy(r.begin(), r.begin() + phase_count, rs.seconds);
    std::copy(r.begin() + phase_count, r.begin() + 2 * phase_count, rs.bytes);
    rs.total_s = r[2 * phase_count];
    rs.blocks = int(r[2 * phase_count + 1]);
    rs.peak_rss_bytes = r[2 * phase_count + 2];
    job.resumed_blocks += int(r[2 * phase_count + 3]);
    fractions.push_back(r[2 * phase_count + 4]);
    roofs.push_back(r[2 * phase_count + 5]);
    together.kernel_after_roof_s += r[2 * phase_count + 6];
    together.kernel_after_roof_bytes += r[2 * phase_count + 7];
    for (int p = 0; p < phase_count; ++p) together.seconds[p] += rs.seconds[p], together.bytes[p] += rs.bytes[p];
    together.total_s = std::max(together.total_s, rs.total_s);
    job.per_rank.push_back(rs);
  }
  job.stats = std::move(together);
  job.kernel_roof_fraction = roof::median(fractions);
  job.roof_GBps = roof::median(roofs);
}

double peak_rss_bytes() {
  rusage usage{};
  getrusage(RUSAGE_SELF, &usage);
  return double(usage.ru_maxrss) * 1024.0;
}

}  // namespace cvest::app
