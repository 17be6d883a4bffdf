#include "app/bench/Formats.hpp"

#include "app/bench/RoofStats.hpp"
#include "core/FlatRun.hpp"
#include "core/Policies.hpp"
#include "core/Topology.hpp"

namespace cvest::app::bench {

nlohmann::json to_json(const Report& report) {
  nlohmann::json j;
  j["backend"] = report.build.backend;
  j["kokkos_version"] = report.build.kokkos_version;
  j["execution_spaces"] = report.build.spaces;
  j["threads"] = report.build.threads;
  j["host_vectors"] = report.build.host_vectors;
  j["machine"] = machine_json(report.build);
  j["shape"] = {{"dates", report.config.dates}, {"ids", report.config.ids}, {"cols", report.config.cols}};
  j["repeats"] = report.config.repeats;
  j["warm_seconds"] = report.config.warm_seconds;
  j["first_use"] = report.first_use;
  if (policy::on_host<Kokkos::DefaultExecutionSpace>) {
    j["flat_run_bytes"] = policy::flat_run().bytes;
    j["flat_dates"] = report.flat_dates;
    j["flat_streams"] = report.flat_streams;
    j["flat_tile_bytes"] = policy::flat_tile_bytes(std::size_t(report.config.ids * report.config.cols) * 8, 8,
                                                   policy::flat_dates_most(8, report.config.dates));
    j["caches"] = policy::topology_text(policy::machine_topology());
  }
  j["roof"] = {{"copy_GBps", report.roof.copy_GBps},
               {"copy_streaming_GBps", report.roof.copy_streaming_GBps},
               {"triad_GBps", report.roof.triad_GBps},
               {"copy_min_GBps", report.roof.copy_min_GBps},
               {"copy_max_GBps", report.roof.copy_max_GBps},
               {"copy_streaming_min_GBps", report.roof.copy_streaming_min_GBps},
               {"copy_streaming_max_GBps", report.roof.copy_streaming_max_GBps}};
  j["results"] = nlohmann::json::array();
  for (const auto& res : report.results)
    j["results"].push_back({{"strategy", to_string(res.strategy)},
                            {"layout", to_string(res.layout)},
                            {"precision", to_string(res.precision)},
                            {"streaming_stores", res.streaming},
                            {"median_s", res.median_s},
                            {"min_s", res.min_s},
                            {"max_s", res.max_s},
                            {"GBps", res.GBps},
                            {"roof_GBps", res.roof_GBps},
                            {"roof_copy_GBps", res.roof_copy_GBps},
                            {"roof_copy_streaming_GBps", res.roof_copy_streaming_GBps},
                            {"roof_fraction", res.roof_fraction},
                            {"roof_fraction_quartiles", {res.roof_fraction_q1, res.roof_fraction_q3}},
                            {"roof_fraction_best", res.roof_fraction_best},
                            {"measurement_fault", above_roof(res)},
                            {"pairs_unsteady", pairs_unsteady(res)},
                            {"seconds", res.kernel_s},
                            {"roof_regular_seconds", res.roof_regular_s},
                            {"roof_streaming_seconds", res.roof_streaming_s},
                            {"roof_streaming_runs_seconds", res.roof_runs_s}});
  return j;
}

}  // namespace cvest::app::bench
