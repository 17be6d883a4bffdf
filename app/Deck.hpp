#pragma once
// Input decks (TOML): what a batch job reads, computes and writes. Parsing is
// strict: unknown sections and keys are errors listing the valid ones, and
// every value is type-checked. Relative paths are relative to the deck.
#include "core/Strategy.hpp"
#include "core/Names.hpp"
#include "io/input/Generate.hpp"

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

namespace cvest::app {

struct Deck {
  std::string path;  // the deck file, for messages
  struct Input {
    std::string file;
    std::string multby = "multBy";
    std::string discount = "discount";
    std::optional<GenerateSpec> generate;  // create `file` when it is missing
    // Input bytes the page cache does not hold read past it (io/os/DirectReader.hpp).
    DirectMode direct = DirectMode::automatic;
  } input;
  struct Output {
    std::string file;
    std::string dataset = "cv";
    bool overwrite = false;
    // Plain, or compressed by cvest's threads (io/codecs/): compression,
    // gzip_level, and for blosc codec, shuffle and level.
    CompressionSpec compression;
    Index chunk_ids = 0;  // ids per (1, ids, K) chunk; 0: about 1 MiB
    // Uncompressed output: journal the blocks on disk so the next run after
    // a kill continues (io/output/Journal.hpp); resume = false starts over instead.
    bool journal = true;
    bool resume = true;
    // Uncompressed output's data past the page cache (io/os/DirectWriter.hpp).
    DirectMode direct = DirectMode::automatic;
  } output;
  struct Run {
    std::vector<Strategy> strategies{Strategy::flat};
    std::vector<LayoutKind> layouts{LayoutKind::right};
    std::optional<Precision> precision;  // default: NumPy's promotion of the inputs (the wider)
    std::size_t memory_budget = std::size_t(1) << 30;
    // Cap on one block's discount buffer; unset: policy::default_block_bytes
    // (2 MiB on host spaces, 64 MiB on devices).
    std::optional<std::size_t> max_block;
    PipelineKind pipeline = PipelineKind::automatic;
    int repeats = 1;
    bool verify = false;
    // flat's choices measured on first use where unrecorded (app/FirstUse.hpp);
    // false: the records and stated defaults as they are (reproducible timing).
    bool measure_first_use = true;
  } run;
  struct Report {
    std::string json, csv;
  } report;
};

// Reads and checks a deck; `overrides` are "section.key=value" with a TOML
// value (bare words are taken as strings). Throws InputError naming the deck,
// the key, and what was expected versus found.
Deck load_deck(const std::string& path, const std::vector<std::string>& overrides = {});

}  // namespace cvest::app
