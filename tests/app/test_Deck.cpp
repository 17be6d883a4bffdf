#include "app/Deck.hpp"
#include "core/Errors.hpp"

#include "tests/ProcessScratch.hpp"

#include <catch2/catch.hpp>

#include <filesystem>
#include <fstream>

using namespace cvest;
using namespace cvest::app;
namespace fs = std::filesystem;

namespace {
std::string write_deck(const std::string& name, const std::string& text) {
  const fs::path dir = cvest::test::process_scratch() / "decks";
  fs::create_directories(dir);
  const auto path = (dir / name).string();
  std::ofstream(path) << text;
  return path;
}

const char* minimal = R"(
[input]
file = "in.h5"
[output]
file = "out.h5"
)";
}  // namespace

TEST_CASE("a minimal deck gets the documented defaults", "[deck]") {
  const auto deck = load_deck(write_deck("minimal.toml", minimal));
  CHECK(fs::path(deck.input.file).filename() == "in.h5");
  CHECK(fs::path(deck.input.file).parent_path() == fs::path(deck.path).parent_path());  // relative to the deck
  CHECK(deck.input.multby == "multBy");
  CHECK(deck.input.discount == "discount");
  CHECK(deck.output.dataset == "cv");
  CHECK_FALSE(deck.output.overwrite);
  CHECK(deck.output.compression.kind == Compression::none);
  CHECK(deck.run.strategies == std::vector<Strategy>{Strategy::flat});
  CHECK(deck.run.layouts == std::vector<LayoutKind>{LayoutKind::right});
  CHECK_FALSE(deck.run.precision.has_value());
  CHECK(deck.run.memory_budget == std::size_t(1) << 30);
  CHECK(deck.run.measure_first_use);
}

TEST_CASE("[run] measure_first_use = false turns flat's first-use measurement off", "[deck]") {
  CHECK_FALSE(load_deck(write_deck("first_use.toml", std::string(minimal) + "[run]\nmeasure_first_use = false\n"))
                  .run.measure_first_use);
  CHECK_THROWS_WITH(load_deck(write_deck("first_use_bad.toml", std::string(minimal) + "[run]\nmeasure_first_use = 0\n")),
                    Catch::Contains("[run] measure_first_use must be true or false"));
}

TEST_CASE("lists and 'all' make the strategy x layout product", "[deck]") {
  const auto deck = load_deck(write_deck("lists.toml", std::string(minimal) + R"(
[run]
strategy = ["per_date", "flat"]
layout = "all"
precision = "float"
memory_budget = "256MiB"
repeats = 3
verify = true
[input.generate]
dates = 3
ids = 10
cols = 2
)"));
  CHECK(deck.run.strategies == std::vector<Strategy>{Strategy::per_date, Strategy::flat});
  CHECK(deck.run.layouts == std::vector<LayoutKind>{LayoutKind::right, LayoutKind::left});
  CHECK(deck.run.precision == Precision::f32);
  CHECK(deck.run.memory_budget == std::size_t(256) << 20);
  CHECK(deck.run.repeats == 3);
  CHECK(deck.run.verify);
  REQUIRE(deck.input.generate);
  CHECK(deck.input.generate->dates == 3);
}

TEST_CASE("deck overrides from the command line are type-checked", "[deck]") {
  const auto path = write_deck("over.toml", minimal);
  const auto deck = load_deck(path, {"run.strategy=per_id", "run.repeats=4", "output.overwrite=true",
                                     "run.layout=[\"left\"]"});
  CHECK(deck.run.strategies == std::vector<Strategy>{Strategy::per_id});
  CHECK(deck.run.repeats == 4);
  CHECK(deck.output.overwrite);
  CHECK(deck.run.layouts == std::vector<LayoutKind>{LayoutKind::left});
  CHECK_THROWS_WITH(load_deck(path, {"run.repeats=many"}), Catch::Contains("[run] repeats must be an integer, found a string"));
  CHECK_THROWS_WITH(load_deck(path, {"nodot=3"}), Catch::Contains("section.key=value"));
  // Keys in tables below a section: the generate table of inputs/full.toml
  const auto full = write_deck("full.toml", "[input]\nfile = \"in.h5\"\ngenerate = { dates = 200, ids = 10000000, cols = 5 }\n"
                                            "[output]\nfile = \"cv.h5\"\n");
  const auto smaller = load_deck(full, {"input.generate.ids=1000000", "input.generate.seed=7"});
  REQUIRE(smaller.input.generate);
  CHECK(smaller.input.generate->ids == 1000000);
  CHECK(smaller.input.generate->dates == 200);
  CHECK(smaller.input.generate->seed == 7);
  const auto made = load_deck(path, {"input.generate.dates=2", "input.generate.ids=3", "input.generate.cols=4"});
  REQUIRE(made.input.generate);  // the table is made where the deck has none
  CHECK(made.input.generate->cols == 4);
  CHECK_THROWS_WITH(load_deck(full, {"input.file.x=1"}), Catch::Contains("input.file is not a table"));
  CHECK_THROWS_WITH(load_deck(full, {"input..ids=1"}), Catch::Contains("has an empty key"));
  CHECK_THROWS_WITH(load_deck(full, {"input.generate.idz=1"}), Catch::Contains("unknown key [input.generate] idz"));
}

TEST_CASE("deck errors name the deck, the key, expected and found", "[deck]") {
  const auto bad = [](const std::string& name, const std::string& body) {
    return load_deck(write_deck(name, std::string(minimal) + body));
  };
  CHECK_THROWS_WITH(bad("unknown.toml", "[run]\nstratgy = \"flat\"\n"),
                    Catch::Contains("unknown key [run] stratgy") && Catch::Contains("valid: strategy, layout"));
  CHECK_THROWS_WITH(bad("section.toml", "[runn]\n"), Catch::Contains("unknown key runn"));
  CHECK_THROWS_WITH(bad("type.toml", "[run]\nrepeats = \"3\"\n"), Catch::Contains("[run] repeats must be an integer, found a string"));
  CHECK_THROWS_WITH(bad("bool.toml", "[run]\nverify = 1\n"), Catch::Contains("[run] verify must be true or false"));
  CHECK_THROWS_WITH(bad("strategy.toml", "[run]\nstrategy = \"fastest\"\n"), Catch::Contains("unknown strategy 'fastest'"));
  CHECK_THROWS_WITH(bad("budget.toml", "[run]\nmemory_budget = \"-2GiB\"\n"), Catch::Contains("must be positive"));
  CHECK_THROWS_WITH(bad("absurd.toml", "[run]\nmemory_budget = \"900PiB\"\n"), Catch::Contains("[run] memory_budget"));
  CHECK_THROWS_WITH(bad("compression.toml", "[output]\n"), Catch::Contains("TOML syntax error"));  // [output] twice
  CHECK_THROWS_AS(load_deck(write_deck("syntax.toml", "[input\nfile = 1\n")), InputError);
  CHECK_THROWS_WITH(load_deck(write_deck("syntax2.toml", "[input]\nfile = \n")), Catch::Contains("syntax2.toml:2"));
  CHECK_THROWS_WITH(load_deck(write_deck("noinput.toml", "[output]\nfile = \"o.h5\"\n")), Catch::Contains("[input] is missing"));
  CHECK_THROWS_WITH(load_deck(write_deck("same.toml", "[input]\nfile = \"a.h5\"\n[output]\nfile = \"./a.h5\"\n")),
                    Catch::Contains("is the input file"));
  CHECK_THROWS_WITH(load_deck("/nonexistent/deck.toml"), Catch::Contains("no such deck file"));
  CHECK_THROWS_WITH(load_deck(write_deck("zstd.toml", minimal), {"output.compression=zstd"}),
                    Catch::Contains("[output] compression unknown compression 'zstd'; valid: none, gzip, lzf, blosc, bitshuffle-lz4"));
  CHECK(load_deck(write_deck("lzf.toml", minimal), {"output.compression=lzf"}).output.compression.kind == Compression::lzf);
}

TEST_CASE("compression settings: blosc's codec, shuffle and level, gzip's level, and another compression's is an error", "[deck]") {
  const auto blosc = load_deck(write_deck("blosc.toml", minimal),
                               {"output.compression=blosc", "output.codec=zstd", "output.shuffle=bit", "output.level=7"})
                         .output.compression;
  CHECK(blosc.kind == Compression::blosc);
  CHECK(blosc.blosc_codec == BloscCodec::zstd);
  CHECK(blosc.blosc_shuffle == ShuffleKind::bit);
  CHECK(blosc.blosc_level == 7);
  CHECK(to_text(blosc) == "blosc (zstd, bit shuffle, level 7)");
  const auto plain_blosc = load_deck(write_deck("blosc2.toml", minimal), {"output.compression=blosc"}).output.compression;
  CHECK(to_text(plain_blosc) == "blosc (lz4, byte shuffle, level 5)");  // hdf5plugin's defaults
  CHECK(load_deck(write_deck("bs.toml", minimal), {"output.compression=bitshuffle-lz4"}).output.compression.kind ==
        Compression::bitshuffle_lz4);
  CHECK(load_deck(write_deck("gz.toml", minimal), {"output.compression=gzip", "output.level=9"}).output.compression.gzip_level == 9);
  const auto fails = [&](std::vector<std::string> sets, const std::string& message) {
    CHECK_THROWS_WITH(load_deck(write_deck("bad_compression.toml", minimal), sets), Catch::Contains(message));
  };
  fails({"output.codec=zstd"}, "[output] codec applies to compression = \"blosc\", not \"none\"");
  fails({"output.compression=gzip", "output.shuffle=bit"}, "[output] shuffle applies to compression = \"blosc\", not \"gzip\"");
  fails({"output.compression=lzf", "output.level=3"}, "[output] level applies to compression = \"gzip\" or \"blosc\"");
  fails({"output.compression=blosc", "output.codec=snappy"}, "unknown codec 'snappy'; valid: lz4, zstd");
  fails({"output.compression=blosc", "output.shuffle=none"}, "unknown shuffle 'none'; valid: byte, bit");
  fails({"output.compression=blosc", "output.level=10"}, "[output] level must be 1..9, found 10");
  fails({"output.compression=gzip", "output.level=3", "output.gzip_level=5"}, "[output] level and gzip_level differ");
  fails({"input.generate={dates=1,ids=2,cols=3,values=\"wavy\"}"}, "unknown values 'wavy'; valid: uniform, smooth");
  CHECK(load_deck(write_deck("smooth.toml", minimal), {"input.generate={dates=1,ids=2,cols=3,values=\"smooth\"}"})
            .input.generate->values == GeneratedValues::smooth);
}

TEST_CASE("characters beyond ASCII: kept in strings, refused where TOML has none", "[deck]") {
  // In basic, literal and multi-line strings and in comments: as written.
  const auto deck = load_deck(write_deck("unicode.toml", "# données\n[input]\nfile = \"données/été.h5\"\n"
                                                          "discount = 'remise\\\\\"€'\n[output]\nfile = '''sortie/\"ü\".h5'''\n"
                                                          "dataset = \"\"\"cv😀\"\"\"\n"));
  CHECK(fs::path(deck.input.file).filename() == "été.h5");
  CHECK(deck.input.discount == "remise\\\\\"€");
  CHECK(fs::path(deck.output.file).filename() == "\"ü\".h5");
  CHECK(deck.output.dataset == "cv😀");
  // --set values too.
  CHECK(fs::path(load_deck(write_deck("unicode_set.toml", minimal), {"output.file=\"résultat.h5\""}).output.file)
            .filename() == "résultat.h5");
  CHECK(fs::path(load_deck(write_deck("unicode_bare.toml", minimal), {"output.file=résultat.h5"}).output.file)
            .filename() == "résultat.h5");
  // Outside strings (a key, a bare value) and text that is not UTF-8: one
  // line naming the deck, the line and the column.
  CHECK_THROWS_WITH(load_deck(write_deck("unicode_key.toml", "[input]\nfilé = \"in.h5\"\n")),
                    Catch::Contains("unicode_key.toml:2:4: TOML syntax error: a character TOML allows only in strings"));
  CHECK_THROWS_WITH(load_deck(write_deck("backslash.toml", "[\\input]\n")),
                    Catch::Contains("backslash.toml:1:2: TOML syntax error"));
  CHECK_THROWS_WITH(load_deck(write_deck("latin1.toml", "[input]\nfile = \"caf\xe9.h5\"\n")),
                    Catch::Contains("latin1.toml:2:12: TOML syntax error: not UTF-8"));
}
