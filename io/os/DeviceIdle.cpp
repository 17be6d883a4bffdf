#include "io/os/DeviceIdle.hpp"

#include <fmt/format.h>

#include <chrono>
#include <fstream>
#include <sstream>
#include <thread>

namespace cvest::io {

long busy_ms(const std::string& number, const std::string& diskstats) {
  std::ifstream in(diskstats);
  unsigned maj = 0, min = 0;
  for (std::string line; std::getline(in, line);) {
    std::istringstream words(line);
    std::string name;
    long counters[10] = {};
    if (!(words >> maj >> min >> name)) continue;
    for (long& c : counters) words >> c;
    if (fmt::format("{}:{}", maj, min) == number) return words ? counters[9] : -1;
  }
  return -1;
}

void wait_until_steady(const std::function<long()>& busy) {
  const auto until = std::chrono::steady_clock::now() + std::chrono::seconds(30);
  long last = busy();
  if (last < 0) {  // not a block device: a pause instead
    std::this_thread::sleep_for(std::chrono::milliseconds(500));
    return;
  }
  while (std::chrono::steady_clock::now() < until) {
    std::this_thread::sleep_for(std::chrono::milliseconds(500));
    const long now = busy();
    if (now == last) return;
    last = now;
  }
}

}  // namespace cvest::io
