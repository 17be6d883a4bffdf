#include "app/bench/Server.hpp"

#include "app/bench/RoofStats.hpp"
#include "app/bench/Variants.hpp"
#include "core/Names.hpp"

#include <Kokkos_Core.hpp>
#include <fmt/format.h>
#include <fmt/ostream.h>

#include <algorithm>
#include <istream>
#include <ostream>
#include <sstream>
#include <stdexcept>

namespace cvest::app::bench {

using namespace detail;

struct Server::State {
  Config config;
  Precision precision;
  Space space;
  std::vector<Variant> variants;
  double moved;  // by a kernel pass and by a roof pass alike

  explicit State(const Config& c)
      : config(completed(c)), precision(config.precisions.front()),
        variants(checked_variants(space, config, {precision})),
        moved(bytes_moved(config.dates, config.ids, config.cols, precision)) {}

  // On the first layout's own arrays (its discount copied into its cv, its
  // multBy read: a kernel's bytes), as run()'s rows are judged: separate
  // arrays allocated after the variants got half their pages as huge pages,
  // and cost 2 arrays more memory.
  nlohmann::json roof_pass() const {
    const Variant& v = variants.front();
    const double regular = v.copy_once(roof::Stores::regular);
    const double streaming = v.copy_once(roof::Stores::streaming);
    nlohmann::json j{{"copy_GBps", moved / regular / 1e9}, {"copy_streaming_GBps", moved / streaming / 1e9},
                     {"arrays", fmt::format("discount into cv, multBy read, {}, {}", to_string(v.layout),
                                            to_string(precision))}};
    // The copy in flat's own walk too, where the bench's rows have it.
    if (v.copy_in_runs) j["copy_walk_GBps"] = moved / v.copy_in_runs() / 1e9;
    return j;
  }
};

Server::Server(const Config& config) : state_(std::make_unique<State>(config)) {}
Server::~Server() = default;

std::string Server::describe() const {
  const auto& c = state_->config;
  return fmt::format("{} x {} x {} {}, {} strategies x {} layouts, checked", c.dates, c.ids, c.cols,
                     to_string(state_->precision), c.strategies.size(), state_->variants.size());
}

nlohmann::json Server::handle(const std::string& line) {
  auto& st = *state_;
  std::istringstream words(line);
  std::string command;
  words >> command;
  try {
    if (command == "warm") {
      double seconds = 0;
      words >> seconds;
      Kokkos::Timer timer;
      int passes = 0;
      do {
        for (auto& v : st.variants)
          for (auto s : st.config.strategies) v.time_once(s);
        st.roof_pass();
        ++passes;
      } while (timer.seconds() < seconds);
      return {{"warmed_s", timer.seconds()}, {"passes", passes}};
    }
    if (command == "time") {
      std::string strategy_name, layout_name;
      words >> strategy_name >> layout_name;
      const Strategy s = strategy_from_name(strategy_name);
      const LayoutKind l = layout_from_name(layout_name);
      const auto v = std::find_if(st.variants.begin(), st.variants.end(), [&](const Variant& x) { return x.layout == l; });
      if (v == st.variants.end()) throw std::invalid_argument("layout " + layout_name + " was not set up");
      const double seconds = v->time_once(s);
      return {{"strategy", strategy_name}, {"layout", layout_name}, {"seconds", seconds},
              {"GBps", st.moved / seconds / 1e9}, {"streaming_stores", v->streaming(s)}};
    }
    if (command == "roof") return st.roof_pass();
    if (command == "touch") {  // every array once, after this process sat idle
      Kokkos::Timer timer;
      st.roof_pass();
      for (auto& v : st.variants) v.time_once(Strategy::flat);
      return {{"touched_s", timer.seconds()}};
    }
    return {{"error", "unknown command '" + command + "'; valid: warm SECONDS, touch, time STRATEGY LAYOUT, roof, quit"}};
  } catch (const std::exception& e) {
    return {{"error", e.what()}};
  }
}

void serve(const Config& config, std::istream& in, std::ostream& out, std::ostream& progress) {
  Server server(config);
  fmt::print(progress, "cvest bench --serve: {}\n", server.describe());
  out << "ready" << std::endl;
  std::string line;
  while (std::getline(in, line)) {
    std::string command;
    std::istringstream(line) >> command;
    if (command == "quit") break;
    out << server.handle(line).dump() << std::endl;
  }
}

}  // namespace cvest::app::bench
