#include "app/ThreadPlacement.hpp"

#include <cstdlib>
#include <unistd.h>

namespace cvest::app {

void place_threads_by_default(int argc, char* argv[]) {
  (void)argc;
#ifdef _OPENMP
  if (std::getenv("OMP_PROC_BIND")) return;  // the user's (or the wrapper's) choice, or already restarted
  ::setenv("OMP_PROC_BIND", "spread", 0);
  ::setenv("OMP_PLACES", "threads", 0);
  ::setenv("OMP_WAIT_POLICY", "passive", 0);
  ::execv("/proc/self/exe", argv);  // returns only on failure: run on, unplaced
#else
  (void)argv;
#endif
}

}  // namespace cvest::app
