// cvest: the command-line driver. Parses arguments and calls the commands
// (app/Commands.hpp); all logic lives in the libraries. Exit codes: 0
// success, 2 bad input, deck or usage, 3 I/O failure, 4 verification
// mismatch, 1 anything else.
#include "app/CommandLine.hpp"
#include "app/tune/TuneWalks.hpp"
#include "app/Ranks.hpp"
#include "app/ThreadPlacement.hpp"
#include "core/Errors.hpp"
#include "core/Plan.hpp"
#include "core/Spaces.hpp"
#include "io/hdf5/Hdf5.hpp"
#include "io/os/TempFiles.hpp"

#include <Kokkos_Core.hpp>

#include <algorithm>
#include <cstdlib>
#include <iostream>
#include <stdexcept>
#include <string>
#include <string_view>
#include <vector>
#include <unistd.h>
#ifdef __linux__
#include <sched.h>
#endif
#ifdef _OPENMP
#include <omp.h>
#endif

namespace {

// Under a launcher with several ranks on a node, each rank's share of it:
// where the launcher bound the rank to some cores (mpiexec's default binding,
// srun's), those; otherwise the node's cores divided among its ranks.
// Kokkos' own --kokkos-threads / --kokkos-num-threads and OMP_NUM_THREADS
// win. Returns the threads set, 0 where nothing was set.
int share_the_node(const cvest::app::Ranks& ranks, const std::vector<char*>& kokkos_args) {
  if (ranks.local_size() < 2 || std::getenv("OMP_NUM_THREADS")) return 0;
  for (const char* arg : kokkos_args)
    if (std::string_view(arg).rfind("--kokkos-threads", 0) == 0 || std::string_view(arg).rfind("--kokkos-num-threads", 0) == 0)
      return 0;
  const int node = int(std::max(1L, sysconf(_SC_NPROCESSORS_ONLN)));
  int mine = node;
#ifdef __linux__
  cpu_set_t set;
  if (sched_getaffinity(0, sizeof set, &set) == 0) mine = CPU_COUNT(&set);
#endif
  const int threads = mine < node ? mine : std::max(1, node / ranks.local_size());
#ifdef _OPENMP
  omp_set_num_threads(threads);  // Kokkos' OpenMP space takes omp_get_max_threads()
#endif
  return threads;
}

// In a Cuda build with several ranks on a node: rank `local_rank` takes GPU
// local_rank % devices, unless Kokkos' own device flags say otherwise.
void pick_device(const cvest::app::Ranks& ranks, std::vector<char*>& kokkos_args) {
#ifdef KOKKOS_ENABLE_CUDA
  static std::string device_arg;
  for (const char* arg : kokkos_args)
    if (std::string_view(arg).rfind("--kokkos-device", 0) == 0 || std::string_view(arg).rfind("--kokkos-num-devices", 0) == 0 ||
        std::string_view(arg).rfind("--kokkos-map-device", 0) == 0)
      return;
  int devices = 0;
  if (ranks.local_size() < 2 || cudaGetDeviceCount(&devices) != cudaSuccess || devices < 1) return;
  device_arg = "--kokkos-device-id=" + std::to_string(ranks.local_rank() % devices);
  kokkos_args.push_back(device_arg.data());
#else
  (void)ranks;
  (void)kokkos_args;
#endif
}

// An error reaches the user once: from rank 0 where every rank agreed on it
// (Ranks::together), else from the rank it happened on, naming it, and then
// every rank ends (others may wait for this one in MPI).
int report(const cvest::app::Ranks& ranks, const char* kind, const std::exception& e, int code) {
  if (ranks.agreed_error() || ranks.size() == 1) {
    if (ranks.root()) std::cerr << "cvest: " << kind << e.what() << '\n';
    return code;
  }
  std::cerr << "cvest: " << kind << "rank " << ranks.rank() << " of " << ranks.size() << ": " << e.what() << '\n';
  ranks.abort(code);
}

}  // namespace

int main(int argc, char* argv[]) {
  cvest::app::place_threads_by_default(argc, argv);
  // Under mpiexec or srun, MPI first (before any thread starts).
  const auto ranks = cvest::app::Ranks::from_launcher(argc, argv);
  cvest::return_freed_buffers_to_the_system();  // memory_budget holds job after job
  // Kokkos' own --kokkos-* flags (threads, device, tools) go to Kokkos, the
  // rest to the command line parser. Kokkos is initialised only after a
  // successful parse, so --help and --version work even where a Cuda build
  // finds no GPU.
  std::vector<char*> ours{argv[0]}, kokkos_args{argv[0]};
  for (int i = 1; i < argc; ++i) (std::string_view(argv[i]).rfind("--kokkos-", 0) == 0 ? kokkos_args : ours).push_back(argv[i]);
  cvest::io::quiet_hdf5_errors();
  cvest::io::remove_temp_files_on_signals();

  cvest::app::CommandLine command_line;
  if (const std::string unknown = command_line.unknown_command(ours); !unknown.empty()) {
    std::cerr << unknown;
    return 2;
  }
  if (const int done = command_line.parse(ours); done >= 0) return done;
  if (ranks->size() > 1 && !command_line.runs_over_ranks()) {
    if (ranks->root())
      std::cerr << "cvest: error: only 'cvest run' runs over several ranks; start '" << ours[1]
                << "' as one process (without mpiexec or srun), not " << ranks->size() << "\n";
    return 2;
  }
  share_the_node(*ranks, kokkos_args);
  pick_device(*ranks, kokkos_args);
  int kokkos_argc = int(kokkos_args.size());
  Kokkos::ScopeGuard kokkos(kokkos_argc, kokkos_args.data());
  try {
    cvest::check_host_vectors_setting();
    cvest::app::apply_walk_records(ranks->root());
    command_line.call(*ranks);
  } catch (const cvest::VerifyError& e) {
    return report(*ranks, "mismatch: ", e, 4);
  } catch (const cvest::InputError& e) {
    return report(*ranks, "error: ", e, 2);
  } catch (const std::invalid_argument& e) {
    return report(*ranks, "error: ", e, 2);
  } catch (const cvest::IoError& e) {
    return report(*ranks, "I/O error: ", e, 3);
  } catch (const std::exception& e) {
    return report(*ranks, "error: ", e, 1);
  }
  return 0;
}
