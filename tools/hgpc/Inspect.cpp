#include "tools/hgpc/Inspect.h"

#include "frontends/onnx/OnnxImporter.h"
#include "compiler/analysis/StepWork.h"

#include <cstdio>
#include <map>

namespace hgp {

namespace {
std::string fmt(const char* f, double a, const char* b = "") {
  char buf[128];
  std::snprintf(buf, sizeof buf, f, a, b);
  return buf;
}
std::string human(double v) {
  const char* units[] = {"", "K", "M", "G", "T", "P"};
  int u = 0;
  while (v >= 1000 && u < 5) v /= 1000, ++u;
  return fmt("%.2f%s", v, units[u]);
}
} // namespace

Status inspectModel(const std::string& path, int64_t batch, std::ostream& os) {
  OnnxImportOptions io;
  io.batch = batch;
  auto imported = importOnnxFile(path, io);
  if (!imported && batch == 0 && imported.status().message().find("--batch") != std::string::npos) {
    io.batch = 1; // A symbolic batch: summarize at batch 1.
    imported = importOnnxFile(path, io);
  }
  if (!imported) return imported.status();
  const Graph& g = *imported->graph;
  const OnnxModelInfo& info = imported->info;
  os << "model: " << path << "\n";
  os << "producer: " << info.producerName << " " << info.producerVersion << ", IR version "
     << info.irVersion << ", opset " << info.opsetVersion << ", batch " << info.batch << "\n";
  int64_t params = 0, paramBytes = 0, states = 0;
  os << "inputs:\n";
  for (const Value* v : g.graphValues()) {
    if (v->role() == TensorRole::Input) os << "  " << v->name() << ": " << typeToString(v->type()) << "\n";
    if (v->role() == TensorRole::Param) {
      params += v->type().numElements();
      paramBytes += v->type().bytes();
    }
    if (v->role() == TensorRole::State) states += v->type().numElements();
  }
  os << "outputs:\n";
  for (const Value* v : g.outputs()) os << "  " << v->name() << ": " << typeToString(v->type()) << "\n";
  os << "parameters: " << params << " (" << fmt("%.2f MiB", double(paramBytes) / (1 << 20))
     << "), state elements: " << states << "\n";
  std::map<std::string, int> histogram;
  for (const Node* n : g.nodes()) ++histogram[n->opName()];
  os << "ops:";
  for (const auto& [op, count] : histogram) os << " " << op << "=" << count;
  os << "\nlayers:\n";
  char line[512];
  std::snprintf(line, sizeof line, "  %-4s %-18s %-40s %-22s %s\n", "#", "op", "name", "output",
                "FLOPs");
  os << line;
  int64_t total = 0;
  int idx = 0;
  for (const Node* n : g.nodes()) {
    int64_t f = int64_t(nodeWork(*n).flops);
    total += f;
    std::string name = n->name().size() > 40 ? "..." + n->name().substr(n->name().size() - 37) : n->name();
    std::snprintf(line, sizeof line, "  %-4d %-18s %-40s %-22s %s\n", idx++, n->opName(), name.c_str(),
                  shapeToString(n->output(0)->shape()).c_str(), human(double(f)).c_str());
    os << line;
  }
  os << "total forward FLOPs: " << human(double(total)) << " (" << total << ")\n";
  return Status::ok();
}

} // namespace hgp
