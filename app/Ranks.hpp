#pragma once
// The processes one deck runs on. Under a launcher (mpiexec, srun) these are
// MPI's ranks: every rank runs its share of each job's block plan and the
// ranks together write one output (app/run/). Started as a plain command,
// this process alone, without MPI. MPI stays in Ranks.cpp: nothing else
// includes mpi.h.
//
// Every step that may fail on some ranks runs through together(): the ranks
// then agree, so either every rank goes on or every rank throws the first
// failing rank's error, and every collective call is reached by every rank
// (no rank waits for one that has left).
#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

namespace cvest::app {

class Ranks {
 public:
  // This process alone.
  Ranks() = default;
  // MPI's world where a launcher's environment says one started this process
  // (OpenMPI's OMPI_COMM_WORLD_SIZE, PMIx's PMIX_RANK, PMI's PMI_RANK); this
  // process alone otherwise. Call before Kokkos is initialised.
  static std::unique_ptr<Ranks> from_launcher(int& argc, char**& argv);
  ~Ranks();
  Ranks(const Ranks&) = delete;
  Ranks& operator=(const Ranks&) = delete;

  int rank() const { return rank_; }
  int size() const { return size_; }
  bool root() const { return rank_ == 0; }
  // This rank among those on its node (MPI_COMM_TYPE_SHARED): which GPU it
  // takes, how many cores it has.
  int local_rank() const { return local_rank_; }
  int local_size() const { return local_size_; }

  // Runs `step` here; then, where it threw on any rank, throws on every rank
  // the error of the lowest failing rank, as the same kind (InputError,
  // IoError, VerifyError, std::invalid_argument, other) with its message
  // after "rank R of S: ". One process: `step` as it is.
  void together(const std::function<void()>& step) const;
  void barrier() const;
  // A barrier whose waiting ranks sleep (MPI_Barrier polls, a core each):
  // beside a rank that measures the machine.
  void idle_barrier() const;
  // Rank 0's value on every rank.
  void broadcast(std::vector<std::uint64_t>& values) const;
  void broadcast(std::string& text) const;
  // Every rank's values, rank by rank, at rank 0 (empty elsewhere).
  std::vector<std::vector<double>> gather(const std::vector<double>& mine) const;
  std::vector<std::string> gather(const std::string& mine) const;
  // Ends every rank now with `code` (MPI_Abort): for an error outside
  // together(), where other ranks may wait in a collective call.
  [[noreturn]] void abort(int code) const;
  // Whether together() has thrown an error every rank agreed on (then rank 0
  // alone reports it).
  bool agreed_error() const { return agreed_error_; }

 private:
  int rank_ = 0, size_ = 1, local_rank_ = 0, local_size_ = 1;
  bool mpi_ = false;
  mutable bool agreed_error_ = false;
};

// Exit codes by kind of error, as main() maps them (core/Errors.hpp).
int exit_code_of(const std::exception_ptr& error);

}  // namespace cvest::app
