#include "app/run/JobOutput.hpp"

#include "app/run/Verify.hpp"
#include "app/run/WriteMode.hpp"
#include "core/Errors.hpp"

#include <Kokkos_Core.hpp>
#include <fmt/format.h>

#include <algorithm>
#include <utility>
#include <vector>

namespace cvest::app {

namespace {

std::array<std::uint64_t, 4> key(const Block& b) {
  return {std::uint64_t(b.dates.begin), std::uint64_t(b.dates.end), std::uint64_t(b.ids.begin),
          std::uint64_t(b.ids.end)};
}

}  // namespace

JobOutput::JobOutput(const io::OutputSpec& spec, const Ranks& ranks) : ranks_(ranks) {
  std::vector<std::uint64_t> description, resumed, sealed{0};
  std::string temp;
  ranks.together([&] {
    if (!ranks.root()) return;
    out_ = std::make_unique<io::OutputFile>(settled_output(spec));
    sealed[0] = out_->sealed() ? 1 : 0;
    for (const Block& b : out_->resumed()) {
      const auto k = key(b);
      resumed.insert(resumed.end(), k.begin(), k.end());
    }
    if (ranks.size() > 1 && !out_->sealed()) description = out_->share(), temp = out_->temp_path();
  });
  ranks.broadcast(sealed);
  sealed_ = sealed[0] != 0;
  if (sealed_) return;  // a killed run's finished output: nothing to write
  ranks.broadcast(resumed);
  for (std::size_t k = 0; k + 3 < resumed.size(); k += 4)
    on_disk_.insert({resumed[k], resumed[k + 1], resumed[k + 2], resumed[k + 3]});
  if (ranks.size() > 1) {
    ranks.broadcast(description);
    ranks.broadcast(temp);
    ranks.together([&] {
      // A share written at its offsets (the raw path: more than the chunk's
      // description) takes the write mode settled on its own rank.
      if (!ranks.root())
        share_ = std::make_unique<io::OutputShare>(description.size() > 2 ? with_write_mode(spec) : spec, temp,
                                                   description);
    });
  }
}

JobOutput::~JobOutput() = default;

BlockPlan JobOutput::remaining(const BlockPlan& mine) const {
  BlockPlan todo = mine;
  if (sealed_) todo.blocks.clear();
  if (on_disk_.empty()) return todo;
  const auto done = [&](const Block& b) { return on_disk_.count(key(b)) > 0; };
  todo.blocks.erase(std::remove_if(todo.blocks.begin(), todo.blocks.end(), done), todo.blocks.end());
  return todo;
}

void JobOutput::write(const Block& block, const void* buffer) {
  if (share_) share_->write(block, buffer);
  else out_->write(block, buffer);
}

JobOutput::Committed JobOutput::commit(const std::map<std::string, std::string>& attributes,
                                       const io::Dataset& scales_like) {
  ranks_.together([&] {
    if (share_) share_->close();
  });
  const std::vector<std::string> parts = ranks_.gather(share_ ? share_->part_path() : std::string());
  Committed done;
  ranks_.together([&] {
    if (!ranks_.root()) return;
    Kokkos::Timer storing;
    bool stored = false;
    for (const std::string& part : parts)
      if (!part.empty()) out_->store_part(part), stored = true;
    if (stored) done.parts_stored_s = storing.seconds();
    out_->commit(attributes, scales_like.get());
    done.writes = out_->writes_text();
  });
  share_.reset();
  return done;
}

OutputCheck::OutputCheck(const std::string& path, const std::string& dataset, Index N, Index K, Precision precision,
                         std::string job, CheckBuffers& buffers)
    : path_(path), K_(K), precision_(precision), job_(std::move(job)), buffers_(buffers) {
  io::DatasetShape shape;
  file_ = io::open_input_file(path);
  cv_ = io::open_dataset(file_, path, dataset, 3, shape);
  reader_ = std::make_unique<io::CubeReader>(cv_, path, dataset, N, K);
}

void OutputCheck::check(const Block& b, const void* computed) const {
  CheckBuffers::Lease written(buffers_, std::size_t(b.dates.size() * b.ids.size() * K_) * element_size(precision_));
  reader_->read(b, precision_, written.data());
  const auto diff = first_difference(written.data(), computed, b, K_, precision_);
  if (!diff.empty())
    throw VerifyError(fmt::format("{}: {} differs from the written output at {}", path_, job_, diff));
}

}  // namespace cvest::app
