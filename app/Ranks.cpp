#include "app/Ranks.hpp"

#include "core/Errors.hpp"

// MPI's C API only: OpenMPI's and MPICH's headers would otherwise pull in the
// deprecated C++ bindings, which need a library cvest does not link.
#define OMPI_SKIP_MPICXX 1
#define MPICH_SKIP_MPICXX 1
#include <mpi.h>

#include <chrono>
#include <cstdlib>
#include <exception>
#include <stdexcept>
#include <thread>

namespace cvest::app {

namespace {

bool launched_by_mpi() {
  for (const char* name : {"OMPI_COMM_WORLD_SIZE", "PMIX_RANK", "PMI_RANK", "PMI_SIZE"})
    if (const char* value = std::getenv(name); value && *value) return true;
  return false;
}

// The error `code` (exit_code_of) carries, rethrown with `message`.
[[noreturn]] void throw_as(int code, const std::string& message) {
  switch (code) {
    case 2: throw InputError(message);
    case 3: throw IoError(message);
    case 4: throw VerifyError(message);
    case 5: throw std::invalid_argument(message);
    default: throw std::runtime_error(message);
  }
}

}  // namespace

int exit_code_of(const std::exception_ptr& error) {
  try {
    std::rethrow_exception(error);
  } catch (const VerifyError&) {
    return 4;
  } catch (const InputError&) {
    return 2;
  } catch (const std::invalid_argument&) {
    return 2;
  } catch (const IoError&) {
    return 3;
  } catch (...) {
    return 1;
  }
}

std::unique_ptr<Ranks> Ranks::from_launcher(int& argc, char**& argv) {
  auto ranks = std::make_unique<Ranks>();
  if (!launched_by_mpi()) return ranks;
  // Ranks call MPI from one thread at a time, always the main thread.
  int provided = 0;
  MPI_Init_thread(&argc, &argv, MPI_THREAD_FUNNELED, &provided);
  ranks->mpi_ = true;
  // Errors come back as codes (checked below), not as MPI's own abort.
  MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_RETURN);
  MPI_Comm_rank(MPI_COMM_WORLD, &ranks->rank_);
  MPI_Comm_size(MPI_COMM_WORLD, &ranks->size_);
  MPI_Comm node;
  MPI_Comm_split_type(MPI_COMM_WORLD, MPI_COMM_TYPE_SHARED, ranks->rank_, MPI_INFO_NULL, &node);
  MPI_Comm_rank(node, &ranks->local_rank_);
  MPI_Comm_size(node, &ranks->local_size_);
  MPI_Comm_free(&node);
  return ranks;
}

Ranks::~Ranks() {
  if (mpi_) MPI_Finalize();
}

void Ranks::together(const std::function<void()>& step) const {
  if (size_ == 1) return step();
  int code = 0;
  std::string message;
  try {
    step();
  } catch (const std::invalid_argument& e) {
    code = 5, message = e.what();
  } catch (const std::exception& e) {
    code = exit_code_of(std::current_exception()), message = e.what();
  } catch (...) {
    code = 1, message = "unknown error";
  }
  int first = code != 0 ? rank_ : size_;
  MPI_Allreduce(MPI_IN_PLACE, &first, 1, MPI_INT, MPI_MIN, MPI_COMM_WORLD);
  if (first == size_) return;
  int codes[1] = {code};
  MPI_Bcast(codes, 1, MPI_INT, first, MPI_COMM_WORLD);
  int length = int(message.size());
  MPI_Bcast(&length, 1, MPI_INT, first, MPI_COMM_WORLD);
  message.resize(std::size_t(length));
  MPI_Bcast(message.data(), length, MPI_CHAR, first, MPI_COMM_WORLD);
  agreed_error_ = true;
  throw_as(codes[0], "rank " + std::to_string(first) + " of " + std::to_string(size_) + ": " + message);
}

void Ranks::barrier() const {
  if (mpi_) MPI_Barrier(MPI_COMM_WORLD);
}

void Ranks::idle_barrier() const {
  if (!mpi_) return;
  MPI_Request request;
  if (MPI_Ibarrier(MPI_COMM_WORLD, &request) != MPI_SUCCESS) throw std::runtime_error("MPI_Ibarrier failed");
  for (int done = 0; !done;) {
    if (MPI_Test(&request, &done, MPI_STATUS_IGNORE) != MPI_SUCCESS) throw std::runtime_error("MPI_Test failed");
    if (!done) std::this_thread::sleep_for(std::chrono::milliseconds(1));
  }
}

void Ranks::broadcast(std::vector<std::uint64_t>& values) const {
  if (size_ == 1) return;
  unsigned long long n = values.size();
  MPI_Bcast(&n, 1, MPI_UNSIGNED_LONG_LONG, 0, MPI_COMM_WORLD);
  values.resize(std::size_t(n));
  static_assert(sizeof(std::uint64_t) == sizeof(unsigned long long));
  for (std::size_t at = 0; at < values.size();) {  // MPI counts are ints
    const int count = int(std::min<std::size_t>(values.size() - at, std::size_t(1) << 28));
    MPI_Bcast(values.data() + at, count, MPI_UNSIGNED_LONG_LONG, 0, MPI_COMM_WORLD);
    at += std::size_t(count);
  }
}

void Ranks::broadcast(std::string& text) const {
  if (size_ == 1) return;
  int length = int(text.size());
  MPI_Bcast(&length, 1, MPI_INT, 0, MPI_COMM_WORLD);
  text.resize(std::size_t(length));
  MPI_Bcast(text.data(), length, MPI_CHAR, 0, MPI_COMM_WORLD);
}

std::vector<std::vector<double>> Ranks::gather(const std::vector<double>& mine) const {
  if (size_ == 1) return {mine};
  int n = int(mine.size());
  std::vector<int> counts(static_cast<std::size_t>(size_)), offsets(static_cast<std::size_t>(size_));
  MPI_Gather(&n, 1, MPI_INT, counts.data(), 1, MPI_INT, 0, MPI_COMM_WORLD);
  int total = 0;
  for (int r = 0; r < size_; ++r) offsets[std::size_t(r)] = total, total += counts[std::size_t(r)];
  std::vector<double> all(std::size_t(root() ? total : 0));
  MPI_Gatherv(mine.data(), n, MPI_DOUBLE, all.data(), counts.data(), offsets.data(), MPI_DOUBLE, 0, MPI_COMM_WORLD);
  std::vector<std::vector<double>> by_rank;
  if (root())
    for (int r = 0; r < size_; ++r)
      by_rank.emplace_back(all.begin() + offsets[std::size_t(r)],
                           all.begin() + offsets[std::size_t(r)] + counts[std::size_t(r)]);
  return by_rank;
}

std::vector<std::string> Ranks::gather(const std::string& mine) const {
  if (size_ == 1) return {mine};
  const auto as_numbers = gather(std::vector<double>(mine.begin(), mine.end()));
  std::vector<std::string> texts;
  for (const auto& numbers : as_numbers) {
    std::string text;
    for (const double c : numbers) text.push_back(char(int(c)));
    texts.push_back(text);
  }
  return texts;
}

void Ranks::abort(int code) const {
  if (mpi_) MPI_Abort(MPI_COMM_WORLD, code);
  std::exit(code);
}

}  // namespace cvest::app
