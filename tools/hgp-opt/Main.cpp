// Main.cpp - hgp-opt: runs IR passes over a printed graph and prints the result.
//
//   hgp-opt INPUT.ir --passes=canonicalize,add-loss [--precision bf16] [training options]
//
// The pass tests in tests/passes/ pipe its output into LLVM's FileCheck, as LLVM's `opt` tests
// do: one small input graph, the passes, and the expected lines of the printed IR in one file.
// INPUT "-" reads the standard input. Exit codes are hgpc's (docs/exit-codes.md).
#include "ir/Printer.h"
#include "passes/Pass.h"
#include "tools/hgpc/TrainFlags.h"

#include <fstream>
#include <iostream>
#include <sstream>

namespace hgp {
namespace {

int fail(const Status& st) {
  std::cerr << "hgp-opt: " << st.toString() << "\n";
  return exitCodeFor(st.code());
}

Expected<std::string> readInput(const std::string& path) {
  std::stringstream ss;
  if (path == "-") {
    ss << std::cin.rdbuf();
    return ss.str();
  }
  std::ifstream in(path);
  if (!in) return Status(ErrorCode::Io, "cannot read " + path);
  ss << in.rdbuf();
  return ss.str();
}

int main(int argc, char** argv) {
  CLI::App app{"hgp-opt: run hgpc's IR passes over a printed graph and print the result"};
  std::string input, passes;
  PassContext ctx;
  bool stats = false;
  app.add_option("input", input, "the printed IR (- for the standard input)")->required();
  app.add_option("--passes", passes, "comma-separated passes to run, in order")->required();
  addPrecisionOption(&app, ctx.precision,
                     "the precision the passes see (mixed-precision and loss-scaling read it)");
  app.add_flag("--print-after-all", ctx.printAfterAll, "print the IR after every pass");
  app.add_flag("--stats", stats, "print pass statistics to the standard error");
  addTrainingOptions(&app, ctx.train);
  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    int code = app.exit(e);
    return code == 0 ? 0 : exitCodeFor(ErrorCode::Usage);
  }
  if (Status st = ctx.train.validate(); !st) return fail(st);

  Expected<std::string> text = readInput(input);
  if (!text) return fail(text.status());
  Expected<std::unique_ptr<Graph>> g = parseGraph(*text, input);
  if (!g) return fail(g.status());
  if (Status st = verifyGraph(**g); !st)
    return fail(Status(ErrorCode::InvalidModel, "the input IR is invalid: " + st.message()));
  std::vector<std::string> names;
  for (size_t b = 0, e; b < passes.size(); b = e + 1) {
    e = passes.find(',', b);
    if (e == std::string::npos) e = passes.size();
    if (e > b) names.push_back(passes.substr(b, e - b));
  }
  ctx.log = &std::cout;
  if (Status st = runPipeline(**g, names, ctx); !st) return fail(st);
  std::cout << printGraph(**g);
  if (stats)
    for (const auto& [k, v] : ctx.stats) std::cerr << "stat " << k << " = " << v << "\n";
  return 0;
}

} // namespace
} // namespace hgp

int main(int argc, char** argv) { return hgp::main(argc, argv); }
