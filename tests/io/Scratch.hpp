#pragma once
// A fresh path for a test's file, in the test process's own folder.
#include "tests/ProcessScratch.hpp"

#include <filesystem>
#include <string>

inline std::filesystem::path scratch(const std::string& name) {
  const std::filesystem::path dir = cvest::test::process_scratch() / "files";
  std::filesystem::create_directories(dir);
  std::filesystem::remove(dir / name);
  return dir / name;
}
