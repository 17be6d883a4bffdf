#pragma once
// The table of slicing strategies: how the multiply is cut into work items.
// Selected by name at run time; the kernels live in core/Multiply*.hpp.
#include "core/Names.hpp"

#include <array>
#include <string>
#include <string_view>
#include <vector>

namespace cvest {

enum class Strategy { one_worker, per_date, per_id, elementwise, flat, team, kokkos_kernels };

struct StrategyInfo {
  Strategy id;
  std::string_view name;
  std::string_view work_items;  // what one work item is, for tables and --help
  // Whether the host kernel writes cv with streaming stores, per layout:
  // only where the stores of one work item form contiguous runs.
  bool streams_right;
  bool streams_left;
};

inline constexpr std::array<StrategyInfo, 7> strategy_table{{
    {Strategy::one_worker, "one_worker", "1 (the whole cube)", false, false},
    {Strategy::per_date, "per_date", "T (a date's N x K slice)", true, false},
    {Strategy::per_id, "per_id", "N (an id's T x K columns)", false, true},
    {Strategy::elementwise, "elementwise", "T*N*K (MDRange, one element)", false, false},
    {Strategy::flat, "flat", "T*N*K (Range, 64-bit index)", true, true},
    {Strategy::team, "team", "teams per date (right) / per id (left)", false, false},
    {Strategy::kokkos_kernels, "kokkos_kernels", "KokkosBlas::mult per date", false, false},
}};

const StrategyInfo& info(Strategy strategy);
std::string_view to_string(Strategy strategy);

// Throws std::invalid_argument naming the bad name and listing the valid ones.
Strategy strategy_from_name(std::string_view name);

// "all" expands to every strategy; otherwise each name must be valid.
std::vector<Strategy> strategies_from_names(const std::vector<std::string>& names);

// Comma-separated list of the valid names, for messages.
std::string strategy_names();

}  // namespace cvest
