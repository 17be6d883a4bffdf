// The pipelines' entry point and what they share: see Pipeline.hpp.
#include "core/pipeline/Pipeline.hpp"

#include "core/Roof.hpp"

#include <ostream>
#include <utility>
#include <vector>

namespace cvest {

std::string_view to_string(Phase phase) {
  switch (phase) {
    case Phase::read: return "read";
    case Phase::h2d: return "h2d";
    case Phase::kernel: return "kernel";
    case Phase::d2h: return "d2h";
    case Phase::write: return "write";
  }
  return "?";
}

namespace roof_pairs {

std::vector<double> kernel_fractions(const std::vector<PipelineStats::RoofCall>& pairs) {
  std::vector<double> ratios;
  for (const auto& c : pairs)
    if (c.kernel_s > 0 && c.copy_s > 0) ratios.push_back(c.copy_s / c.kernel_s);
  return ratios;
}

double kernel_fraction(const std::vector<PipelineStats::RoofCall>& pairs) {
  return median(kernel_fractions(pairs));
}

MedianInterval kernel_fraction_interval(const std::vector<PipelineStats::RoofCall>& pairs) {
  return median_interval_95(kernel_fractions(pairs));
}

double copy_GBps(const std::vector<PipelineStats::RoofCall>& pairs) {
  std::vector<double> rates;
  for (const auto& c : pairs)
    if (c.copy_s > 0) rates.push_back(c.bytes / c.copy_s / 1e9);
  return median(std::move(rates));
}

}  // namespace roof_pairs

double PipelineStats::kernel_roof_fraction() const { return roof_pairs::kernel_fraction(roof); }

double PipelineStats::kernel_seconds_unwarmed() const {
  const double all_s = seconds[int(Phase::kernel)], all_bytes = bytes[int(Phase::kernel)];
  const double rest_s = all_s - kernel_after_roof_s, rest_bytes = all_bytes - kernel_after_roof_bytes;
  if (kernel_after_roof_bytes <= 0 || rest_bytes <= 0 || rest_s <= 0) return all_s;
  return rest_s / rest_bytes * all_bytes;
}

double PipelineStats::roof_GBps() const { return roof_pairs::copy_GBps(roof); }

namespace pipeline_detail {

// Overlapped.cpp and PerThread.cpp, instantiated there for every pipeline type.
template <class Scalar, class Layout>
PipelineStats run_overlapped(const BlockPlan& plan, const BlockIO<Scalar>& io, const PipelineOptions& options,
                             std::ostream& progress_out);
template <class Scalar, class Layout>
PipelineStats run_per_thread(const BlockPlan& plan, const BlockIO<Scalar>& io, const PipelineOptions& options,
                             std::ostream& progress_out);

}  // namespace pipeline_detail

template <class Scalar, class Layout>
PipelineStats run_pipeline(const BlockPlan& plan, const BlockIO<Scalar>& io, const PipelineOptions& options,
                           std::ostream& progress_out) {
  if (options.threads > 0) return pipeline_detail::run_per_thread<Scalar, Layout>(plan, io, options, progress_out);
  return pipeline_detail::run_overlapped<Scalar, Layout>(plan, io, options, progress_out);
}

#define CVEST_INSTANTIATE(SCALAR, LAYOUT)                                                                   \
  template PipelineStats run_pipeline<SCALAR, LAYOUT>(const BlockPlan&, const BlockIO<SCALAR>&, const PipelineOptions&, \
                                                std::ostream&);
CVEST_FOR_EACH_PIPELINE_TYPE(CVEST_INSTANTIATE)
#undef CVEST_INSTANTIATE

}  // namespace cvest
