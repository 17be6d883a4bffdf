#include "app/run/RankStats.hpp"

#include "app/run/RunReport.hpp"

#include <algorithm>
#include <fstream>
#include <string>
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
  mine.push_back(job.stats.kernel_after_roof_s);
  mine.push_back(job.stats.kernel_after_roof_bytes);
  const auto all = ranks.gather(mine);
  std::vector<double> my_pairs;
  for (const auto& c : job.roof_calls) my_pairs.insert(my_pairs.end(), {c.bytes, c.kernel_s, c.copy_s});
  const auto pairs = ranks.gather(my_pairs);
  if (!ranks.root()) return;
  job.resumed_blocks = 0;
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
    together.kernel_after_roof_s += r[2 * phase_count + 4];
    together.kernel_after_roof_bytes += r[2 * phase_count + 5];
    for (int p = 0; p < phase_count; ++p) together.seconds[p] += rs.seconds[p], together.bytes[p] += rs.bytes[p];
    together.total_s = std::max(together.total_s, rs.total_s);
    job.per_rank.push_back(rs);
  }
  job.stats = std::move(together);
  job.roof_calls.clear();
  for (const auto& r : pairs)
    for (std::size_t i = 0; i + 2 < r.size(); i += 3) job.roof_calls.push_back({r[i], r[i + 1], r[i + 2]});
  job.summarize_roof();
}

// VmHWM, this program's own high-water mark: getrusage's ru_maxrss keeps
// the largest RSS across execve, so it counted the process cvest was
// started from (a Python test holding 220 MiB read as cvest's peak) and
// cvest's own restart for thread placement.
void reset_peak_rss() { std::ofstream("/proc/self/clear_refs") << "5"; }

double peak_rss_bytes() {
  std::ifstream status("/proc/self/status");
  for (std::string line; std::getline(status, line);)
    if (line.rfind("VmHWM:", 0) == 0) return std::stod(line.substr(6)) * 1024.0;  // "VmHWM:  123456 kB"
  rusage usage{};
  getrusage(RUSAGE_SELF, &usage);
  return double(usage.ru_maxrss) * 1024.0;
}

}  // namespace cvest::app
