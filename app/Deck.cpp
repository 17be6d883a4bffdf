#include "app/Deck.hpp"

#include "app/AsciiToml.hpp"
#include "core/Errors.hpp"
#include "core/Plan.hpp"

#include <toml++/toml.h>

#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <initializer_list>
#include <iterator>
#include <fstream>
#include <map>
#include <sstream>

namespace cvest::app {

namespace {

std::string type_name(const toml::node& node) {
  switch (node.type()) {
    case toml::node_type::string: return "a string";
    case toml::node_type::integer: return "an integer";
    case toml::node_type::floating_point: return "a float";
    case toml::node_type::boolean: return "a boolean";
    case toml::node_type::array: return "an array";
    case toml::node_type::table: return "a table";
    default: return "a date/time";
  }
}

std::string join(const std::vector<std::string>& v) {
  std::string s;
  for (const auto& x : v) s += (s.empty() ? "" : ", ") + x;
  return s;
}

class Reader {
 public:
  Reader(std::string deck, std::filesystem::path dir) : deck_(std::move(deck)), dir_(std::move(dir)) {}

  [[noreturn]] void fail(const std::string& where, const std::string& what) const {
    throw InputError(deck_ + ": " + where + " " + what);
  }

  // Every key of `table` must be in `valid`.
  void known_keys(const toml::table& table, const std::string& where, const std::vector<std::string>& valid) const {
    for (auto&& [key, node] : table) {
      (void)node;
      if (std::find(valid.begin(), valid.end(), std::string(key.str())) == valid.end())
        fail("unknown key " + where + (where.empty() ? "" : " ") + std::string(key.str()) + ";", "valid: " + join(valid));
    }
  }

  std::string string(const toml::node& node, const std::string& where) const {
    if (!node.is_string()) fail(where, "must be a string, found " + type_name(node));
    return *node.value<std::string>();
  }
  Index integer(const toml::node& node, const std::string& where, Index min) const {
    if (!node.is_integer()) fail(where, "must be an integer, found " + type_name(node));
    const Index v = *node.value<std::int64_t>();
    if (v < min) fail(where, "must be at least " + std::to_string(min) + ", found " + std::to_string(v));
    return v;
  }
  bool boolean(const toml::node& node, const std::string& where) const {
    if (!node.is_boolean()) fail(where, "must be true or false, found " + type_name(node));
    return *node.value<bool>();
  }
  std::string path(const toml::node& node, const std::string& where) const {
    const std::string p = string(node, where);
    if (p.empty()) fail(where, "must not be empty");
    const std::filesystem::path fp(p);
    return (fp.is_absolute() ? fp : dir_ / fp).lexically_normal().string();
  }
  // A name, or a list of names.
  std::vector<std::string> names(const toml::node& node, const std::string& where) const {
    std::vector<std::string> out;
    if (node.is_string()) {
      out.push_back(*node.value<std::string>());
    } else if (const auto* arr = node.as_array()) {
      for (const auto& item : *arr) out.push_back(string(item, where + " entries"));
      if (out.empty()) fail(where, "must not be an empty list");
    } else {
      fail(where, "must be a name or a list of names, found " + type_name(node));
    }
    return out;
  }
  template <class F>
  auto checked(const std::string& where, F&& f) const {
    try {
      return f();
    } catch (const std::invalid_argument& e) {
      fail(where, e.what());
    } catch (const InputError& e) {
      fail(where, e.what());
    }
  }

 private:
  std::string deck_;
  std::filesystem::path dir_;
};

void apply_override(toml::table& root, const std::string& deck, const std::string& text) {
  const auto eq = text.find('=');
  const auto dot = text.find('.');
  if (eq == std::string::npos || dot == std::string::npos || dot > eq)
    throw InputError(deck + ": --set '" + text + "' must look like section.key=value");
  // "input.generate.ids": tables down the path (made where missing), then the key.
  std::vector<std::string> path;
  for (std::size_t begin = 0, end = 0; begin <= eq; begin = end + 1) {
    end = std::min(text.find('.', begin), eq);
    path.push_back(text.substr(begin, end - begin));
    if (path.back().empty()) throw InputError(deck + ": --set '" + text + "' has an empty key");
  }
  const std::string value = text.substr(eq + 1);
  toml::table parsed;
  try {
    parsed = toml::parse(ascii_toml("v = " + value, deck));
  } catch (const std::exception&) {  // toml::parse_error, or not TOML at all
    parsed = toml::table{{"v", value}};  // a bare word: a string
  }
  toml::table* table = &root;
  std::string where;
  for (std::size_t level = 0; level + 1 < path.size(); ++level) {
    where += (where.empty() ? "" : ".") + path[level];
    if (!table->contains(path[level])) table->insert(path[level], toml::table{});
    table = (*table)[path[level]].as_table();
    if (!table) throw InputError(deck + ": --set '" + text + "': " + where + " is not a table");
  }
  table->insert_or_assign(path.back(), *parsed["v"].node());
}


// The deck's TOML with the --set overrides applied; InputError for a
// missing file or bad syntax, naming the line and column.
toml::table parse_deck(const std::string& path, const std::vector<std::string>& overrides) {
  std::error_code ec;
  if (!std::filesystem::is_regular_file(path, ec)) throw InputError(path + ": no such deck file");
  toml::table root;
  std::ifstream in(path, std::ios::binary);
  const std::string text((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  try {
    root = toml::parse(ascii_toml(text, path), path);
  } catch (const toml::parse_error& e) {
    std::ostringstream where;
    where << path << ":" << e.source().begin.line << ":" << e.source().begin.column;
    throw InputError(where.str() + ": TOML syntax error: " + std::string(e.description()));
  }
  for (const auto& o : overrides) apply_override(root, path, o);
  return root;
}

GenerateSpec read_generate(const Reader& r, const toml::node& n) {
  const auto* g = n.as_table();
  if (!g) r.fail("[input] generate", "must be a table {dates, ids, cols}, found " + type_name(n));
  r.known_keys(*g, "[input.generate]", {"dates", "ids", "cols", "seed", "precision", "values"});
  GenerateSpec spec;
  for (const char* key : {"dates", "ids", "cols"})
    if (!g->get(key)) r.fail(std::string("[input.generate] ") + key, "is missing");
  spec.dates = r.integer(*g->get("dates"), "[input.generate] dates", 1);
  spec.ids = r.integer(*g->get("ids"), "[input.generate] ids", 1);
  spec.cols = r.integer(*g->get("cols"), "[input.generate] cols", 1);
  if (const auto* s = g->get("seed")) spec.seed = std::uint64_t(r.integer(*s, "[input.generate] seed", 0));
  if (const auto* p = g->get("precision"))
    spec.precision = r.checked("[input.generate] precision", [&] { return precision_from_name(r.string(*p, "[input.generate] precision")); });
  if (const auto* v = g->get("values"))
    spec.values = r.checked("[input.generate] values", [&] { return generated_values_from_name(r.string(*v, "[input.generate] values")); });
  return spec;
}

// true, false, or "auto".
DirectMode read_direct(const Reader& r, const toml::node& n, const std::string& key) {
  if (n.is_boolean()) return r.boolean(n, key) ? DirectMode::on : DirectMode::off;
  return r.checked(key, [&] { return direct_mode_from_name(r.string(n, key)); });
}

void read_input(const Reader& r, const toml::table* input, Deck::Input& deck) {
  if (!input) r.fail("[input]", "is missing (it names the input file)");
  r.known_keys(*input, "[input]", {"file", "multby", "discount", "generate", "direct"});
  if (const auto* n = input->get("file")) deck.file = r.path(*n, "[input] file");
  else r.fail("[input] file", "is missing");
  if (const auto* n = input->get("multby")) deck.multby = r.string(*n, "[input] multby");
  if (const auto* n = input->get("discount")) deck.discount = r.string(*n, "[input] discount");
  if (const auto* n = input->get("generate")) deck.generate = read_generate(r, *n);
  if (const auto* n = input->get("direct")) deck.direct = read_direct(r, *n, "[input] direct");
}

// [output] compression and its settings: gzip_level (gzip), codec, shuffle
// (blosc), level (gzip or blosc). codec, shuffle and level with another
// compression are errors, not ignored; gzip_level stays accepted with any
// (decks written before, README's among them, carry it beside "none").
void read_compression(const Reader& r, const toml::table& output, CompressionSpec& spec) {
  if (const auto* n = output.get("compression"))
    spec.kind =
        r.checked("[output] compression", [&] { return compression_from_name(r.string(*n, "[output] compression")); });
  const auto only_for = [&](const char* key, std::initializer_list<Compression> kinds) {
    for (Compression k : kinds)
      if (spec.kind == k) return;
    std::string names;
    for (Compression k : kinds) names += (names.empty() ? "\"" : " or \"") + std::string(to_string(k)) + "\"";
    r.fail(std::string("[output] ") + key, "applies to compression = " + names + ", not \"" +
                                               std::string(to_string(spec.kind)) + "\"");
  };
  const auto level = [&](const toml::node& n, const std::string& where) {
    const int v = int(r.integer(n, where, 1));
    if (v > 9) r.fail(where, "must be 1..9, found " + std::to_string(v));
    return v;
  };
  if (const auto* n = output.get("gzip_level")) spec.gzip_level = level(*n, "[output] gzip_level");
  if (const auto* n = output.get("level")) {
    only_for("level", {Compression::gzip, Compression::blosc});
    (spec.kind == Compression::gzip ? spec.gzip_level : spec.blosc_level) = level(*n, "[output] level");
    if (spec.kind == Compression::gzip && output.get("gzip_level") &&
        level(*output.get("gzip_level"), "[output] gzip_level") != spec.gzip_level)
      r.fail("[output] level", "and gzip_level differ; give one");
  }
  if (const auto* n = output.get("codec")) {
    only_for("codec", {Compression::blosc});
    spec.blosc_codec = r.checked("[output] codec", [&] { return blosc_codec_from_name(r.string(*n, "[output] codec")); });
  }
  if (const auto* n = output.get("shuffle")) {
    only_for("shuffle", {Compression::blosc});
    spec.blosc_shuffle = r.checked("[output] shuffle", [&] { return shuffle_from_name(r.string(*n, "[output] shuffle")); });
  }
}

void read_output(const Reader& r, const toml::table* output, Deck::Output& deck) {
  if (!output) r.fail("[output]", "is missing (it names the output file)");
  r.known_keys(*output, "[output]", {"file", "dataset", "overwrite", "compression", "gzip_level", "level", "codec",
                                        "shuffle", "chunk", "journal", "resume", "direct"});
  if (const auto* n = output->get("file")) deck.file = r.path(*n, "[output] file");
  else r.fail("[output] file", "is missing");
  if (const auto* n = output->get("dataset")) deck.dataset = r.string(*n, "[output] dataset");
  if (const auto* n = output->get("overwrite")) deck.overwrite = r.boolean(*n, "[output] overwrite");
  if (const auto* n = output->get("journal")) deck.journal = r.boolean(*n, "[output] journal");
  if (const auto* n = output->get("resume")) deck.resume = r.boolean(*n, "[output] resume");
  read_compression(r, *output, deck.compression);
  if (const auto* n = output->get("chunk")) deck.chunk_ids = r.integer(*n, "[output] chunk", 1);
  if (const auto* n = output->get("direct")) deck.direct = read_direct(r, *n, "[output] direct");
}

// Bytes as an integer or a size ("2GiB").
std::size_t read_bytes(const Reader& r, const toml::node& n, const std::string& where, Index min) {
  if (n.is_integer()) return std::size_t(r.integer(n, where, min));
  return r.checked(where, [&] { return parse_bytes(r.string(n, where)); });
}

void read_run(const Reader& r, const toml::table& run, Deck::Run& deck) {
  r.known_keys(run, "[run]", {"strategy", "layout", "precision", "memory_budget", "max_block", "pipeline", "repeats",
                              "verify", "measure_first_use"});
  if (const auto* n = run.get("strategy"))
    deck.strategies = r.checked("[run] strategy", [&] { return strategies_from_names(r.names(*n, "[run] strategy")); });
  if (const auto* n = run.get("layout")) {
    deck.layouts.clear();
    for (const auto& name : r.names(*n, "[run] layout")) {
      if (name == "all") {
        deck.layouts.push_back(LayoutKind::right);
        deck.layouts.push_back(LayoutKind::left);
      } else {
        deck.layouts.push_back(r.checked("[run] layout", [&] { return layout_from_name(name); }));
      }
    }
  }
  if (const auto* n = run.get("precision"))
    deck.precision = r.checked("[run] precision", [&] { return precision_from_name(r.string(*n, "[run] precision")); });
  if (const auto* n = run.get("memory_budget")) deck.memory_budget = read_bytes(r, *n, "[run] memory_budget", 1);
  if (const auto* n = run.get("max_block")) deck.max_block = read_bytes(r, *n, "[run] max_block", 0);
  if (const auto* n = run.get("pipeline"))
    deck.pipeline = r.checked("[run] pipeline", [&] { return pipeline_from_name(r.string(*n, "[run] pipeline")); });
  if (const auto* n = run.get("repeats")) deck.repeats = int(r.integer(*n, "[run] repeats", 1));
  if (const auto* n = run.get("verify")) deck.verify = r.boolean(*n, "[run] verify");
  if (const auto* n = run.get("measure_first_use")) deck.measure_first_use = r.boolean(*n, "[run] measure_first_use");
}

}  // namespace

Deck load_deck(const std::string& path, const std::vector<std::string>& overrides) {
  const toml::table root = parse_deck(path, overrides);
  Deck deck;
  deck.path = path;
  const Reader r(path, std::filesystem::path(path).parent_path());
  r.known_keys(root, "", {"input", "output", "run", "report"});
  const auto section = [&](const char* name) -> const toml::table* {
    const auto* node = root.get(name);
    if (!node) return nullptr;
    if (!node->is_table()) r.fail(std::string("[") + name + "]", "must be a table, found " + type_name(*node));
    return node->as_table();
  };
  read_input(r, section("input"), deck.input);
  read_output(r, section("output"), deck.output);
  if (const auto* run = section("run")) read_run(r, *run, deck.run);
  if (const auto* report = section("report")) {
    r.known_keys(*report, "[report]", {"json", "csv"});
    if (const auto* n = report->get("json")) deck.report.json = r.path(*n, "[report] json");
    if (const auto* n = report->get("csv")) deck.report.csv = r.path(*n, "[report] csv");
  }
  std::error_code ec;
  if (std::filesystem::weakly_canonical(deck.input.file, ec) == std::filesystem::weakly_canonical(deck.output.file, ec))
    r.fail("[output] file", "is the input file (" + deck.input.file + "); cvest never overwrites its input");
  return deck;
}

}  // namespace cvest::app
