#pragma once
// A run's report as people and programs read it: the full text `cvest run
// --explain` prints (the short default: app/run/RunSummary.hpp), what a
// --plan says a run would do, JSON and CSV.
#include "app/run/RunReport.hpp"

#include <nlohmann/json.hpp>

#include <iosfwd>
#include <string>

namespace cvest::app {

// Every choice with its reasons, flat's walk, the table with every phase
// and column and the columns' legend, where the time goes, the verdict.
void print_run_table(const RunReport& report, std::ostream& out);
// What a plan_only report says a run would do: input and how it is read,
// blocks and memory, output size against free disk, each job's pipeline.
void print_plan(const RunReport& report, std::ostream& out);
nlohmann::json to_json(const RunReport& report);
std::string to_csv(const RunReport& report);

// Writes a report's `text` to `path` through a temporary file, so a failed
// write leaves nothing half-written (IoError naming the path).
void write_report_file(const std::string& path, const std::string& text);

}  // namespace cvest::app
