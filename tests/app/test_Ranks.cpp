// Ranks in one process (a plain command): every collective is the identity,
// together() runs its step and passes its error on as it is, and errors map
// to the exit codes main() gives them. Several ranks: tests/cli/mpi.py.
#include "app/Ranks.hpp"
#include "core/Errors.hpp"

#include <catch2/catch.hpp>

#include <cstdint>
#include <stdexcept>
#include <string>
#include <vector>

using namespace cvest;
using namespace cvest::app;

TEST_CASE("one process: collectives are the identity, together runs its step", "[ranks]") {
  const Ranks one;
  CHECK(one.size() == 1);
  CHECK(one.rank() == 0);
  CHECK(one.root());
  CHECK(one.local_size() == 1);
  int ran = 0;
  one.together([&] { ++ran; });
  CHECK(ran == 1);
  one.barrier();
  std::vector<std::uint64_t> values{3, 1, 4};
  one.broadcast(values);
  CHECK(values == std::vector<std::uint64_t>{3, 1, 4});
  std::string text = "rank 0's";
  one.broadcast(text);
  CHECK(text == "rank 0's");
  const auto gathered = one.gather(std::vector<double>{1.5, 2.5});
  REQUIRE(gathered.size() == 1);
  CHECK(gathered[0] == std::vector<double>{1.5, 2.5});
  const auto names = one.gather(std::string("part"));
  REQUIRE(names.size() == 1);
  CHECK(names[0] == "part");
  CHECK_FALSE(one.agreed_error());
}

TEST_CASE("one process: together's error is the step's own, of its kind and message", "[ranks]") {
  const Ranks one;
  CHECK_THROWS_MATCHES(one.together([] { throw IoError("disk.h5: write failed"); }), IoError,
                       Catch::Message("disk.h5: write failed"));
  CHECK_THROWS_AS(one.together([] { throw InputError("bad deck"); }), InputError);
  CHECK_THROWS_AS(one.together([] { throw VerifyError("differs"); }), VerifyError);
}

TEST_CASE("errors map to the exit codes main() gives them", "[ranks]") {
  const auto code = [](auto error) { return exit_code_of(std::make_exception_ptr(error)); };
  CHECK(code(InputError("x")) == 2);
  CHECK(code(std::invalid_argument("x")) == 2);
  CHECK(code(IoError("x")) == 3);
  CHECK(code(VerifyError("x")) == 4);
  CHECK(code(std::runtime_error("x")) == 1);
}
