#include "runtime/runner/TensorDump.h"

#include <fstream>
#include <vector>

namespace hgp {

Status dumpTensors(const Plan& plan, Backend& backend, const std::string& dir) {
  std::vector<int> writer(plan.tensors.size(), -1);
  for (const PlanProgram& p : plan.programs) {
    if (p.name != "train") continue;
    for (size_t s = 0; s < p.steps.size(); ++s)
      for (int t : p.steps[s].outputs)
        if (t >= 0 && writer[size_t(t)] < 0) writer[size_t(t)] = int(s);
  }
  const PlanProgram* train = nullptr;
  for (const PlanProgram& p : plan.programs)
    if (p.name == "train") train = &p;
  std::ofstream index(dir + "/index.tsv");
  if (!index) return Status(ErrorCode::Io, "--dump-tensors: cannot write " + dir + "/index.tsv");
  index << "id\tname\tdtype\tshape\trole\tstep\top\tinputs\tfile\n";
  std::vector<uint8_t> bytes;
  for (size_t i = 0; i < plan.tensors.size(); ++i) {
    const PlanTensor& t = plan.tensors[i];
    if (t.pitched()) continue;
    bytes.resize(size_t(t.type.bytes()));
    if (Status st = backend.read(int(i), bytes.data()); !st)
      return std::move(st).withContext("--dump-tensors: reading " + t.name);
    std::string file = "t" + std::to_string(i) + ".bin";
    std::ofstream out(dir + "/" + file, std::ios::binary);
    out.write(reinterpret_cast<const char*>(bytes.data()), std::streamsize(bytes.size()));
    if (!out) return Status(ErrorCode::Io, "--dump-tensors: cannot write " + dir + "/" + file);
    std::string shape;
    for (size_t d = 0; d < t.type.shape.size(); ++d)
      shape += (d ? "," : "") + std::to_string(t.type.shape[d]);
    int s = writer[i];
    std::string ins = "-";
    if (s >= 0) {
      ins.clear();
      for (int in : train->steps[size_t(s)].inputs)
        ins += (ins.empty() ? "" : ",") + std::to_string(in);
    }
    index << i << '\t' << t.name << '\t' << dtypeName(t.type.dtype) << '\t' << shape << '\t'
          << roleName(t.role) << '\t' << s << '\t'
          << (s >= 0 ? opName(train->steps[size_t(s)].op) : "-") << '\t' << ins << '\t' << file
          << '\n';
  }
  if (!index) return Status(ErrorCode::Io, "--dump-tensors: cannot write " + dir + "/index.tsv");
  return Status::ok();
}

} // namespace hgp
