#include "compiler/codegen/GenerateKernels.h"

#include "compiler/codegen/FusedKernelSource.h"
#include "compiler/codegen/Nvrtc.h"

#include <map>

namespace hgp {

Status generateFusedKernels(Plan& plan, int arch, bool required) {
  std::vector<PlanStep*> fused;
  for (PlanProgram& p : plan.programs)
    for (PlanStep& s : p.steps)
      if (s.op == OpKind::FusedElementwise) fused.push_back(&s);
  if (fused.empty()) return Status::ok();
  if (arch <= 0)
    return Status(ErrorCode::Usage, "the target has no known SM architecture to compile the fused "
                                    "kernels for; pass --target or --no-fuse");
  if (Status st = loadNvrtc(); !st) {
    if (!required) return Status::ok();
    return Status(ErrorCode::Io, "the plan has " + std::to_string(fused.size()) +
                                     " fused elementwise steps, whose CUDA kernels hgpc compiles "
                                     "with NVRTC: " + st.message() +
                                     ". Install the CUDA toolkit or compile with --no-fuse");
  }
  std::map<std::string, std::string> bySource; // source -> kernel name
  for (PlanStep* s : fused) {
    HGP_ASSIGN_OR_RETURN(FusedProgram p, parseFusedProgram(s->attrs, int(s->inputs.size())));
    std::vector<DType> in;
    std::vector<FusedOperandMap> maps;
    const Shape& out = plan.tensors[size_t(s->outputs.at(0))].type.shape;
    for (int t : s->inputs) {
      const TensorType& type = plan.tensors[size_t(t)].type;
      in.push_back(type.dtype);
      maps.emplace_back();
      if (type.dtype == DType::I64) continue; // a dropout's counter
      HGP_ASSIGN_OR_RETURN(maps.back(), fusedOperandMap(type.shape, out));
    }
    HGP_ASSIGN_OR_RETURN(std::string source, fusedKernelSource(p, in, arch, maps));
    auto it = bySource.find(source);
    if (it == bySource.end()) {
      PlanKernel k;
      k.name = "fe" + std::to_string(plan.kernels.size());
      k.arch = arch;
      k.entry = kFusedEntry;
      k.source = source;
      HGP_ASSIGN_OR_RETURN(k.cubin, compileCubin(source, k.name, arch));
      it = bySource.emplace(source, k.name).first;
      plan.kernels.push_back(std::move(k));
    }
    s->attrs.setString("kernel", it->second);
  }
  return Status::ok();
}

} // namespace hgp
