#include "app/run/WriteMode.hpp"

#include "app/tune/WriteModes.hpp"
#include "core/Median.hpp"
#include "io/os/Disk.hpp"

#include <algorithm>
#include <utility>

namespace cvest::app {

io::OutputSpec with_write_mode(io::OutputSpec spec) {
  std::string because;
  spec.direct = choose_direct(spec.direct, io::output_bytes(spec), because, io::output_dir(spec.path).string());
  spec.direct_because = std::move(because);
  return spec;
}

io::OutputSpec with_plain_rate(io::OutputSpec spec) {
  std::string problem;  // a record not read: not measured, as with none
  const auto record = write_mode_record_for(io::output_dir(spec.path).string(), problem);
  if (!record || record->bytes <= 0 || record->direct_s.empty() || record->buffered_s.empty()) return spec;
  spec.disk_bytes_per_s = record->bytes / std::min(median(record->direct_s), median(record->buffered_s));
  spec.disk_measured_on = record->date;
  return spec;
}

io::OutputSpec settled_output(io::OutputSpec spec) {
  if (spec.compression.kind == Compression::none) return with_write_mode(std::move(spec));
  return with_plain_rate(std::move(spec));
}

}  // namespace cvest::app
