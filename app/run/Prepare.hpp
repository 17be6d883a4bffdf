#pragma once
// A run's first stage: the paths it will write usable, the input generated
// where the deck says how and it is not there yet (input and output fitting
// their disk together first), and the output locked against a second run.
// A --plan checks the same and generates or locks nothing.
#include "app/Deck.hpp"
#include "app/Ranks.hpp"
#include "io/output/OutputLock.hpp"

#include <iosfwd>
#include <memory>

namespace cvest::app {

struct Preparation {
  bool input_to_generate = false;     // the deck's input was not there: generated now (a --plan: would be)
  double generated_input_bytes = 0;   // its size, else 0
  std::unique_ptr<io::OutputLock> output_lock;  // held until the deck's last job is done (rank 0)
};

// Collective: an error on any rank is thrown on every rank.
Preparation prepare_run(const Deck& deck, const Ranks& ranks, bool plan_only, std::ostream& progress);

}  // namespace cvest::app
