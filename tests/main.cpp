// One Catch2 main for every test: Kokkos is initialised once, for all of them.
#define CATCH_CONFIG_RUNNER
#include <catch2/catch.hpp>

#include "core/Plan.hpp"
#include "tests/ProcessScratch.hpp"
#include "tests/Skip.hpp"

#include <Kokkos_Core.hpp>

#include <cstring>
#include <filesystem>
#include <optional>

#include <iostream>
#include <string>

namespace {
bool failed_in_case = false;
bool skipped_any = false;  // a case that passed but skipped a part: exit 77 (ctest: not run)
std::string skipped_in_case;

// A case that skipped a part (cvest::test::skip_part) and failed nothing
// says so and makes the process exit 77, which ctest reads as "not run"
// (tests/CMakeLists.txt).
struct SkippedParts : Catch::TestEventListenerBase {
  using TestEventListenerBase::TestEventListenerBase;
  void testCaseStarting(Catch::TestCaseInfo const& info) override {
    failed_in_case = false;
    skipped_in_case.clear();
    TestEventListenerBase::testCaseStarting(info);
  }
  bool assertionEnded(Catch::AssertionStats const& stats) override {
    if (!stats.assertionResult.isOk()) failed_in_case = true;
    return TestEventListenerBase::assertionEnded(stats);
  }
  void testCaseEnded(Catch::TestCaseStats const& stats) override {
    if (!skipped_in_case.empty() && !failed_in_case && stats.totals.assertions.failed == 0) {
      std::cout << "cvest-test-skipped: " << skipped_in_case << std::endl;
      skipped_any = true;
    }
    TestEventListenerBase::testCaseEnded(stats);
  }
};
}  // namespace
CATCH_REGISTER_LISTENER(SkippedParts)

void cvest::test::skip_part(const std::string& why) {
  WARN("not checked here: " << why);
  skipped_in_case += (skipped_in_case.empty() ? "" : "; ") + why;
}

int main(int argc, char* argv[]) {
  cvest::return_freed_buffers_to_the_system();  // as cvest does
  // Listing tests (catch_discover_tests does, at build time) needs no Kokkos,
  // and Kokkos' start-up warnings would otherwise be read as test names.
  bool listing = false;
  for (int i = 1; i < argc; ++i) listing |= std::strncmp(argv[i], "--list", 6) == 0;
  // No case sees the write modes measured for the user running the tests.
  ::setenv("CVEST_CACHE_DIR", (cvest::test::process_scratch() / "no-write-modes").c_str(), 1);
  // Nor does flat measure on first use but in the cases that turn it on.
  ::setenv("CVEST_FIRST_USE", "off", 0);
  std::optional<Kokkos::ScopeGuard> kokkos;
  if (!listing) kokkos.emplace(argc, argv);
  int status = Catch::Session().run(argc, argv);
  // Catch2 returns its count of failed assertions (at most 255), and 77 of
  // them would read as ctest's "not run": any failure is 1, and 77 only a
  // skip with none (a leak report or a crash at exit still sets its own
  // status over it). A listing's status stays Catch2's (its test count).
  if (!listing) status = status != 0 ? 1 : skipped_any ? 77 : 0;
  // The cases' files: none outlives the process (listing too: the folder was
  // made for CVEST_CACHE_DIR above, and each build's listing left one).
  std::error_code ec;
  std::filesystem::remove_all(cvest::test::process_scratch(), ec);
  return status;
}
