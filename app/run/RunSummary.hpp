#pragma once
// What `cvest run` prints by default, read in ten seconds in a 120-column
// terminal: a header, how the input was read and the output written (the
// choice, not its reasons), the table of what a user compares, where the
// time goes and the verdict. The reasons, flat's walk and the columns'
// legend are print_run_table's (--explain, app/run/ReportFormats.hpp).
#include "app/run/RunReport.hpp"

#include <cstddef>
#include <iosfwd>
#include <string>

namespace cvest::app {

inline constexpr std::size_t summary_width = 120;  // no line of the summary is wider

void print_run_summary(const RunReport& report, std::ostream& out);

// The choice a text of io/ states before its reasons: the text up to its
// first character of `stops`, at any depth of brackets, those left open
// closed. "past the page cache (O_DIRECT; 99.0% of the bytes): measured ..."
// -> "past the page cache (O_DIRECT)".
std::string choice_of(const std::string& text, const std::string& stops = ":;");

// The run's answer in a line: the fastest job, by how much it beat the
// slowest, its kernel against its copy roof, the output verified or not.
// "" where no job ran.
std::string verdict_text(const RunReport& report);

}  // namespace cvest::app
