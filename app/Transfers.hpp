#pragma once
// Host <-> compute-space transfers, measured in one run:
//  - copy bandwidth each way from pageable and from pinned host memory;
//  - one in-memory run of the whole pipeline (host cube -> h2d -> kernel ->
//    d2h -> host cube, blocks in flight on separate streams) against the pure
//    copies of the same blocks. On a device whose copy engines overlap, the
//    pipeline takes about as long as the larger of its copies; on host spaces
//    the stages run one after another and the ratio says so.
#include "core/pipeline/Pipeline.hpp"
#include "core/Spaces.hpp"
#include "core/Strategy.hpp"
#include "core/Types.hpp"

#include <nlohmann/json.hpp>

#include <cstddef>
#include <iosfwd>

namespace cvest::app::transfers {

struct Config {
  Index dates = 100, ids = 1000000, cols = 5;
  Precision precision = Precision::f64;
  Strategy strategy = Strategy::flat;
  LayoutKind layout = LayoutKind::right;
  std::size_t block_bytes = 0;           // one block's discount; 0: policy::default_block_bytes
  std::size_t copy_bytes = std::size_t(1) << 30;  // array size of the pageable / pinned copy test
  int repeats = 5;                       // timed rounds after one warm-up (medians)
};

struct CopyRates {  // GB/s, medians
  double pageable_h2d = 0, pageable_d2h = 0, pinned_h2d = 0, pinned_d2h = 0;
};

struct Report {
  BuildFacts build;
  Config config;
  bool device = false;  // the compute space is not host memory
  bool pinned = false;  // staging memory is pinned (a Cuda build)
  CopyRates copies;
  std::size_t blocks = 0;
  Index block_dates = 0, block_ids = 0;
  double cube_bytes = 0;                        // one (T, N, K) cube
  double h2d_s = 0, d2h_s = 0, pipeline_s = 0;  // medians: all blocks in, all blocks out, the pipeline
  double overlap_ratio = 0;                     // pipeline_s / max(h2d_s, d2h_s)
  PipelineStats pipeline;                       // phases of the median pipeline run
};

// Throws std::invalid_argument on a bad configuration and std::runtime_error
// when the pipeline's output differs from m * d anywhere.
Report run(const Config& config, std::ostream& progress);

void print(const Report& report, std::ostream& out);
nlohmann::json to_json(const Report& report);

}  // namespace cvest::app::transfers
