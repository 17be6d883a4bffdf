#pragma once
// Bytes no two tests share by accident: a seeded Mersenne Twister's.
#include <random>
#include <vector>

inline std::vector<unsigned char> random_bytes(std::size_t n, unsigned seed) {
  std::mt19937 rng(seed);
  std::vector<unsigned char> v(n);
  for (auto& b : v) b = static_cast<unsigned char>(rng());
  return v;
}
