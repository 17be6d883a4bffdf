#pragma once
// A case, or a part of it, that cannot check here what it names (no
// per-thread space in this build, not root, under a sanitizer): ctest shows
// the whole case as not run, never as passed (the process exits 77, ctest's
// SKIP_RETURN_CODE, tests/CMakeLists.txt). A case that failed an assertion
// does not, so its failure is what ctest shows.
#include <catch2/catch.hpp>

#include <string>

namespace cvest::test {

// Marks the running case as not wholly run, for the listener in tests/main.cpp.
void skip_part(const std::string& why);

}  // namespace cvest::test
