#pragma once
// The folder this test process writes its files under: its own (the process
// id in its name), so cases that ctest -j runs at once in other processes
// never share a file; removed when the process ends (tests/main.cpp).
#include <filesystem>
#include <string>
#include <unistd.h>

namespace cvest::test {

inline const std::filesystem::path& process_scratch() {
  static const std::filesystem::path dir = [] {
    const auto d = std::filesystem::temp_directory_path() / ("cvest_tests-" + std::to_string(::getpid()));
    std::filesystem::remove_all(d);  // a process of the same id long gone left it
    std::filesystem::create_directories(d);
    return d;
  }();
  return dir;
}

}  // namespace cvest::test
