// libFuzzer harness for the deck loader: toml++ parsing plus cvest's own
// checks of every section and key, and `--set section.key=value` overrides.
// An input is "OVERRIDE\n...\n--\nDECK" (no "--" line: all deck). A bad deck
// must end in InputError (or std::invalid_argument), as `cvest run` reports
// it; anything else escaping, a crash, a sanitizer report or a hang fails.
#include "app/Deck.hpp"
#include "core/Errors.hpp"

#include <cstddef>
#include <cstdint>
#include <filesystem>
#include <fstream>
#include <stdexcept>
#include <string>
#include <unistd.h>
#include <vector>

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  std::string text(reinterpret_cast<const char*>(data), size);
  std::vector<std::string> overrides;
  if (const std::size_t split = text.find("\n--\n"); split != std::string::npos) {
    const std::string head = text.substr(0, split);
    text = text.substr(split + 4);
    for (std::size_t at = 0; at <= head.size();) {
      const std::size_t end = std::min(head.find('\n', at), head.size());
      overrides.push_back(head.substr(at, end - at));
      at = end + 1;
    }
  }
  // In the run's own folder (run.sh sets TMPDIR to it and removes it after).
  static const std::string path =
      (std::filesystem::temp_directory_path() / ("cvest-fuzz-deck-" + std::to_string(::getpid()) + ".toml")).string();
  std::ofstream(path, std::ios::binary | std::ios::trunc) << text;
  try {
    (void)cvest::app::load_deck(path, overrides);
  } catch (const cvest::InputError&) {
  } catch (const std::invalid_argument&) {
  }
  return 0;
}
