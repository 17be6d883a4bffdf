#pragma once
// What `cvest bench` reports: text (app/bench/Table.cpp) and JSON
// (app/bench/Json.cpp).
#include "app/bench/Report.hpp"

#include <nlohmann/json.hpp>

#include <iosfwd>

namespace cvest::app::bench {

// What `cvest bench` prints (app/bench/Table.cpp): by default a summary
// within 120 columns (the roofs' medians, each row's time, GB/s and fraction
// of its roof, the best); print_table is the full text (--explain): flat's
// walk on these arrays, every column and the legend.
void print_summary(const Report& report, std::ostream& out);
void print_table(const Report& report, std::ostream& out);
nlohmann::json to_json(const Report& report);

}  // namespace cvest::app::bench
