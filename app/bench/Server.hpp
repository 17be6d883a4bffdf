#pragma once
// `cvest bench --serve` and import cvest's BenchServer: the benchmark's
// arrays kept, one command at a time.
#include "app/bench/Report.hpp"

#include <nlohmann/json.hpp>

#include <iosfwd>
#include <memory>
#include <string>

namespace cvest::app::bench {

// The benchmark as a server, for bench/compare to interleave cvest with
// programs in other processes repeat by repeat: allocates and checks every
// strategy x layout (the config's first precision), then answers one line
// per command read from `in`, as JSON on `out`:
//   warm SECONDS          every variant and the roof in turn until SECONDS
//                         have passed (memory a process has just touched
//                         stays slow for seconds on a VM)
//                         -> {"warmed_s", "passes"}
//   time STRATEGY LAYOUT  one fenced pass -> {"strategy", "layout", "seconds", "GBps", "streaming_stores"}
//   roof                  one copy with regular and one with streaming stores
//                         of the first layout's kernel bytes (its discount
//                         into its cv, its multBy read; the kernels' own
//                         arrays; GB/s of those bytes, as `time` counts)
//                         -> {"copy_GBps", "copy_streaming_GBps", "arrays"}
//   touch                 every array once (untimed use: after the process
//                         sat idle while another ran) -> {"touched_s"}
//   quit (or end of input)
// A bad command gets {"error": "..."}. `ready` is printed first, after the check.
void serve(const Config& config, std::istream& in, std::ostream& out, std::ostream& progress);

// What serve() answers, as an object (import cvest's BenchServer): the
// arrays allocated and every strategy checked at construction; handle()
// takes one command line (warm, time, roof, touch) and returns the reply.
class Server {
 public:
  explicit Server(const Config& config);
  ~Server();
  Server(const Server&) = delete;
  Server& operator=(const Server&) = delete;
  std::string describe() const;  // "100 x 400000 x 5 f64, 7 strategies x 2 layouts, checked"
  nlohmann::json handle(const std::string& command);

 private:
  struct State;
  std::unique_ptr<State> state_;
};

}  // namespace cvest::app::bench
