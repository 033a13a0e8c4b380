// ForwardDump.cpp - hgp_forward_dump: one forward pass of a model on the CPU backend (or on CUDA),
// every graph output written as raw float32, for comparing hgpc's activations with another
// framework's.
//
//   hgp_forward_dump [--device cuda] MODEL.onnx INPUT.f32 OUT_DIR
//
// INPUT.f32 holds the first graph input's values (float32, the input's shape, no header). Each
// graph output k is written to OUT_DIR/output_k.f32 in the same form; a parity investigation adds
// the activations it wants to see as graph outputs of a copy of the model (tests/parity/judge.py
// explains why a forward value can matter: a kink). The model runs as hgpc imports it: training-
// mode BatchNormalization normalizes with the batch statistics, as in the train program. With
// --device cuda the plan runs on the CUDA backend in fp32 (no TF32), deterministic, so that the
// kinks of a CUDA training run can be found as the CPU backend's are (tests/parity/kinks.py).
#include "compiler/plan/PlanEmitter.h"
#include "frontends/onnx/OnnxImporter.h"
#include "passes/Pass.h"
#include "passes/Pipeline.h"
#include "runtime/Backend.h"

#include <cstdio>
#include <fstream>
#include <iterator>

namespace hgp {
namespace {

int fail(const Status& st) {
  std::fprintf(stderr, "hgp_forward_dump: %s\n", st.toString().c_str());
  return exitCodeFor(st.code());
}

int run(const std::string& model, const std::string& inputPath, const std::string& outDir,
        bool cuda) {
  auto imported = importOnnxFile(model, OnnxImportOptions{});
  if (!imported) return fail(imported.status());
  Graph& g = *imported->graph;
  PassContext ctx;
  if (Status st = runPipeline(g, forwardPipeline(), ctx); !st) return fail(st);
  ProgramSource prog{"forward", &g, {}};
  for (size_t i = 0; i < g.outputs().size(); ++i)
    prog.bindings["output." + std::to_string(i)] = g.outputs()[i]->name();
  const Value* input = nullptr;
  for (const Value* v : g.graphValues())
    if (v->role() == TensorRole::Input && !input) input = v;
  if (!input) return fail(Status(ErrorCode::InvalidModel, "the model has no runtime input"));
  prog.bindings["in"] = input->name();
  EmitOptions eo;
  eo.meta.setString("precision", "fp32");
  auto emitted = emitPlan({prog}, eo);
  if (!emitted) return fail(emitted.status());
  const Plan& plan = emitted->plan;
  std::unique_ptr<Backend> backend;
  if (cuda) {
    BackendOptions bo;
    bo.deterministic = true;
    auto made = createCudaBackend(bo);
    if (!made) return fail(made.status());
    backend = std::move(*made);
  } else {
    backend = createCpuBackend();
  }
  if (Status st = backend->load(plan, InitData{emitted->data, {}}); !st) return fail(st);
  std::ifstream in(inputPath, std::ios::binary);
  std::vector<uint8_t> bytes((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  int ti = plan.binding("in");
  if (int64_t(bytes.size()) != plan.tensors[size_t(ti)].bytes())
    return fail(Status(ErrorCode::BadData, "'" + inputPath + "' has " + std::to_string(bytes.size()) +
                                               " bytes, the input needs " +
                                               std::to_string(plan.tensors[size_t(ti)].bytes())));
  if (Status st = backend->write(ti, bytes.data()); !st) return fail(st);
  if (Status st = backend->run("forward"); !st) return fail(st);
  for (size_t i = 0; i < g.outputs().size(); ++i) {
    int oi = plan.binding("output." + std::to_string(i));
    std::vector<uint8_t> out(size_t(plan.tensors[size_t(oi)].bytes()));
    if (Status st = backend->read(oi, out.data()); !st) return fail(st);
    std::string path = outDir + "/output_" + std::to_string(i) + ".f32";
    std::ofstream f(path, std::ios::binary);
    f.write(reinterpret_cast<const char*>(out.data()), std::streamsize(out.size()));
    if (!f) return fail(Status(ErrorCode::Io, "cannot write '" + path + "'"));
  }
  return 0;
}

} // namespace
} // namespace hgp

int main(int argc, char** argv) {
  bool cuda = argc == 6 && std::string(argv[1]) == "--device" && std::string(argv[2]) == "cuda";
  if (argc != 4 && !cuda) {
    std::fprintf(stderr, "usage: hgp_forward_dump [--device cuda] MODEL.onnx INPUT.f32 OUT_DIR\n");
    return 2;
  }
  int a = cuda ? 3 : 1;
  return hgp::run(argv[a], argv[a + 1], argv[a + 2], cuda);
}
