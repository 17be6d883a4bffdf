#include "core/Strategy.hpp"

#include <catch2/catch.hpp>

#include <stdexcept>
#include <string>

using namespace cvest;

TEST_CASE("every strategy in the table round-trips through its name", "[strategy]") {
  for (const auto& entry : strategy_table) {
    CHECK(strategy_from_name(entry.name) == entry.id);
    CHECK(to_string(entry.id) == entry.name);
  }
}

TEST_CASE("an unknown strategy name is an error that lists the valid ones", "[strategy]") {
  try {
    strategy_from_name("per_row");
    FAIL("per_row was accepted");
  } catch (const std::invalid_argument& e) {
    const std::string msg = e.what();
    CHECK(msg.find("unknown strategy 'per_row'") != std::string::npos);
    for (const auto& entry : strategy_table) CHECK(msg.find(std::string(entry.name)) != std::string::npos);
  }
  CHECK_THROWS_AS(strategy_from_name(""), std::invalid_argument);
  CHECK_THROWS_AS(strategy_from_name("Flat"), std::invalid_argument);  // names are exact
}

TEST_CASE("'all' expands to the whole table, in table order", "[strategy]") {
  const auto all = strategies_from_names({"all"});
  REQUIRE(all.size() == strategy_table.size());
  for (std::size_t i = 0; i < all.size(); ++i) CHECK(all[i] == strategy_table[i].id);
  CHECK(strategies_from_names({"flat", "team"}) == std::vector<Strategy>{Strategy::flat, Strategy::team});
  CHECK_THROWS_WITH(strategies_from_names({"flat", "bogus"}), Catch::Contains("unknown strategy 'bogus'"));
}

TEST_CASE("layout and precision names", "[strategy]") {
  CHECK(layout_from_name("right") == LayoutKind::right);
  CHECK(layout_from_name("LayoutLeft") == LayoutKind::left);
  CHECK_THROWS_WITH(layout_from_name("stride"), Catch::Contains("valid: right, left"));
  CHECK(precision_from_name("float") == Precision::f32);
  CHECK_THROWS_WITH(precision_from_name("half"), Catch::Contains("valid: double, float"));
}
