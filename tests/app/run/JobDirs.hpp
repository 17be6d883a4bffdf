#pragma once
// A fresh folder for a test's deck, input and output.
#include "tests/ProcessScratch.hpp"

#include <filesystem>
#include <string>

namespace cvest::test {

inline std::filesystem::path fresh_dir(const std::string& name) {
  const std::filesystem::path dir = process_scratch() / "jobs" / name;
  std::filesystem::remove_all(dir);
  std::filesystem::create_directories(dir);
  return dir;
}

}  // namespace cvest::test
