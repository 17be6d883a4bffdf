#pragma once
// Where a job's cv blocks go. The deck's first job writes the output: rank 0
// creates it (resuming what a killed run's journal recorded), the other ranks
// write their shares of it, and the ranks commit it together. Later jobs are
// compared with it block by block.
#include "app/Ranks.hpp"
#include "app/run/CheckBuffers.hpp"
#include "core/Plan.hpp"
#include "io/cube/CubeReader.hpp"
#include "io/hdf5/Hdf5.hpp"
#include "io/output/OutputFile.hpp"
#include "io/output/OutputShare.hpp"

#include <array>
#include <cstdint>
#include <map>
#include <memory>
#include <set>
#include <string>

namespace cvest::app {

class JobOutput {
 public:
  JobOutput(const io::OutputSpec& spec, const Ranks& ranks);  // collective
  ~JobOutput();
  JobOutput(const JobOutput&) = delete;
  JobOutput& operator=(const JobOutput&) = delete;

  // `mine` without the blocks a killed run left on disk: they are not
  // written again (nor timed: this run's figures are its own work).
  BlockPlan remaining(const BlockPlan& mine) const;
  // C order (dates, ids, K), from several threads at once.
  void write(const Block& block, const void* buffer);

  struct Committed {
    double parts_stored_s = 0;  // rank 0 storing the other ranks' compressed chunks
    std::string writes;         // how the data reached the disk (io::OutputFile::writes_text)
  };
  // Collective: every share on disk (closed: what NFS's close-to-open
  // needs) before rank 0 stores the compressed ones, writes `attributes` and
  // the dimension scales of `scales_like`, and renames the file into place.
  // Figures are rank 0's; other ranks return none.
  Committed commit(const std::map<std::string, std::string>& attributes, const io::Dataset& scales_like);

 private:
  const Ranks& ranks_;
  std::unique_ptr<io::OutputFile> out_;   // rank 0
  std::unique_ptr<io::OutputShare> share_;  // the other ranks
  std::set<std::array<std::uint64_t, 4>> on_disk_;  // resumed blocks: dates and ids, begin and end
  bool sealed_ = false;  // the whole output is on disk (io::OutputFile::sealed)
};

// A later job's blocks against the written output: VerifyError at the first
// that differs, naming the job.
class OutputCheck {
 public:
  OutputCheck(const std::string& path, const std::string& dataset, Index N, Index K, Precision precision,
              std::string job, CheckBuffers& buffers);
  // From several threads at once, a buffer each (the job's own: freed when
  // it ends, not kept by threads into the next job, which would break the
  // budget).
  void check(const Block& block, const void* computed) const;

 private:
  std::string path_;
  io::File file_;
  io::Dataset cv_;
  std::unique_ptr<io::CubeReader> reader_;
  Index K_;
  Precision precision_;
  std::string job_;
  CheckBuffers& buffers_;
};

}  // namespace cvest::app
