#include "io/output/OutputShare.hpp"

#include "core/Errors.hpp"
#include "core/Interrupt.hpp"
#include "io/os/Disk.hpp"
#include "io/output/PartFile.hpp"

#include <cerrno>
#include <climits>
#include <cstring>
#include <filesystem>
#include <stdexcept>
#include <unistd.h>

namespace fs = std::filesystem;

namespace cvest::io {

OutputShare::OutputShare(const OutputSpec& spec, const std::string& output_temp,
                         const std::vector<std::uint64_t>& description)
    : spec_(spec) {
  if (description.size() < 2) throw std::logic_error("cvest: an output share without its description");
  chunk_ = {1, Index(description[0]), spec.K};
  coding_ = chunk_coding(spec.compression, element_size(spec.precision),
                         std::size_t(chunk_[1] * spec.K) * element_size(spec.precision));
  if (description[1] != coding_.codecs.size())
    throw std::logic_error("cvest: a rank's output filters differ from rank 0's");
  if (description.size() > 2) {
    raw_ = RawCube::open_placed(output_temp, spec.path, {description.begin() + 2, description.end()}, true,
                                spec.direct, spec.direct_because, spec.direct_memory);
    if (!spec.fingerprint.empty()) {
      journal_guard_ = std::make_unique<TempFileGuard>(journal_path(output_temp, spec.rank));
      journal_guard_->keep_on_terminate_as_record(LLONG_MAX);  // a record once it holds a block
      journal_ = std::make_unique<Journal>(journal_path(output_temp, spec.rank), output_temp, spec.fingerprint,
                                           std::vector<Block>{}, journal_batch_bytes());
      journal_guard_->keep_on_terminate_as_record(journal_->header_bytes() + Journal::record_bytes - 1);
    }
    return;
  }
  // A fresh name, created exclusively (retried on a clash): never through a
  // link, never another file.
  part_path_ = temp_path_for(spec.path);
  guard_ = std::make_unique<TempFileGuard>(part_path_);
  fd_ = create_exclusive_temp(spec.path, part_path_, *guard_);
  if (fd_ < 0) {
    const int error = errno;
    const std::string tried = part_path_;
    part_path_.clear();  // not ours: the destructor leaves it
    throw IoError(spec.path + ": cannot create " + tried + ": " + std::strerror(error));
  }
}

OutputShare::~OutputShare() {
  raw_.reset();
  if (fd_ >= 0 && !closed_) ::close(fd_);
  if (!part_path_.empty()) {
    std::error_code ec;
    fs::remove(part_path_, ec);
  }
}

void OutputShare::close() {
  if (raw_) {
    if (journal_) journal_->close();  // a sync it saw fail fails this rank
    raw_->close();
    return;
  }
  if (closed_) return;
  closed_ = true;
  if (::close(fd_) != 0) throw IoError(part_path_ + ": write failed: " + std::strerror(errno));
}

void OutputShare::write(const Block& b, const void* buffer) {
  throw_if_interrupted();
  if (raw_) return write_raw_block(*raw_, journal_.get(), spec_, b, buffer);
  const auto append = [&](const PartRecord& r, const void* data) {
    const std::lock_guard lock(append_);
    part_bytes_ = append_part(fd_, part_bytes_, r, data, part_path_);
  };
  const bool aligned = b.ids.begin % chunk_[1] == 0 && (b.ids.end % chunk_[1] == 0 || b.ids.end == spec_.N);
  if (!aligned) {  // rank 0 merges it into its chunks, as OutputFile::write does in one process
    const std::size_t bytes = std::size_t(b.dates.size() * b.ids.size() * spec_.K) * element_size(spec_.precision);
    append({b.dates.begin, b.dates.end, b.ids.begin, b.ids.end, bytes, 0, PartRecord::block}, buffer);
    return;
  }
  store_chunks(coding_, spec_.K, element_size(spec_.precision), chunk_, b, buffer, [&](const StoredChunk& c) {
    if (!c.data)
      throw IoError(spec_.path + ": compressing the chunk at " + origin_text(c) + " failed: " +
                    (c.error.empty() ? "out of memory?" : c.error));
    append({c.t, c.t + 1, c.i, c.i + chunk_[1], c.bytes, c.skipped, PartRecord::chunk}, c.data);
  });
}

}  // namespace cvest::io
