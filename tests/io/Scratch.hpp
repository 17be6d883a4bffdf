#pragma once
// A fresh path for a test's file, under the system's temporary directory.
#include <filesystem>
#include <string>

inline std::filesystem::path scratch(const std::string& name) {
  const std::filesystem::path dir = std::filesystem::temp_directory_path() / "cvest_test_files";
  std::filesystem::create_directories(dir);
  std::filesystem::remove(dir / name);
  return dir / name;
}
