#pragma once
// cvest tune's records in a fresh folder of this process's own while a case
// runs (CVEST_CACHE_DIR), the variable as it was restored after.
#include "tests/ProcessScratch.hpp"

#include <cstdlib>
#include <filesystem>
#include <string>

namespace cvest::test {

struct CacheDirHere {
  std::filesystem::path dir;
  std::string before;
  bool had = false;
  explicit CacheDirHere(const std::string& name) : dir(process_scratch() / name) {
    if (const char* b = std::getenv("CVEST_CACHE_DIR")) before = b, had = true;
    std::filesystem::remove_all(dir);
    ::setenv("CVEST_CACHE_DIR", dir.c_str(), 1);
  }
  ~CacheDirHere() {
    if (had) ::setenv("CVEST_CACHE_DIR", before.c_str(), 1);
    else ::unsetenv("CVEST_CACHE_DIR");
  }
  CacheDirHere(const CacheDirHere&) = delete;
  CacheDirHere& operator=(const CacheDirHere&) = delete;
};

}  // namespace cvest::test
