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

double PipelineStats::kernel_roof_fraction() const {
  std::vector<double> ratios;  // the same bytes both ways: GB/s over GB/s is copy seconds over kernel seconds
  for (const RoofCall& c : roof)
    if (c.kernel_s > 0 && c.copy_s > 0) ratios.push_back(c.copy_s / c.kernel_s);
  return roof::median(std::move(ratios));
}

double PipelineStats::kernel_seconds_unwarmed() const {
  const double all_s = seconds[int(Phase::kernel)], all_bytes = bytes[int(Phase::kernel)];
  const double rest_s = all_s - kernel_after_roof_s, rest_bytes = all_bytes - kernel_after_roof_bytes;
  if (kernel_after_roof_bytes <= 0 || rest_bytes <= 0 || rest_s <= 0) return all_s;
  return rest_s / rest_bytes * all_bytes;
}

double PipelineStats::roof_GBps() const {
  std::vector<double> rates;
  for (const RoofCall& c : roof)
    if (c.copy_s > 0) rates.push_back(c.bytes / c.copy_s / 1e9);
  return roof::median(std::move(rates));
}

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
