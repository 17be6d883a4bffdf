#include "core/Interrupt.hpp"

namespace cvest {

namespace {
std::atomic<const std::atomic<bool>*> live_flag{nullptr};
}  // namespace

InterruptScope::InterruptScope(const std::atomic<bool>& flag) { live_flag.store(&flag); }

InterruptScope::~InterruptScope() { live_flag.store(nullptr); }

void throw_if_interrupted() {
  const std::atomic<bool>* flag = live_flag.load(std::memory_order_relaxed);
  if (flag && flag->load(std::memory_order_relaxed)) throw Interrupted("cvest: interrupted");
}

}  // namespace cvest
