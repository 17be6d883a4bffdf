#include "core/Strategy.hpp"

#include <stdexcept>

namespace cvest {

const StrategyInfo& info(Strategy strategy) {
  for (const auto& entry : strategy_table)
    if (entry.id == strategy) return entry;
  throw std::logic_error("strategy missing from strategy_table");
}

std::string_view to_string(Strategy strategy) { return info(strategy).name; }

std::string strategy_names() {
  std::string names;
  for (const auto& entry : strategy_table) {
    if (!names.empty()) names += ", ";
    names += entry.name;
  }
  return names;
}

Strategy strategy_from_name(std::string_view name) {
  for (const auto& entry : strategy_table)
    if (entry.name == name) return entry.id;
  throw std::invalid_argument("unknown strategy '" + std::string(name) +
                              "'; valid: " + strategy_names() + " (or all)");
}

std::vector<Strategy> strategies_from_names(const std::vector<std::string>& names) {
  std::vector<Strategy> chosen;
  for (const auto& name : names) {
    if (name == "all") {
      for (const auto& entry : strategy_table) chosen.push_back(entry.id);
    } else {
      chosen.push_back(strategy_from_name(name));
    }
  }
  return chosen;
}

}  // namespace cvest
