#include "runtime/runner/DataSetup.h"

#include <cmath>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <tuple>

namespace hgp {

Status imageRequirements(const RunOptions& opt, const Plan& plan, bool pixels, int rank, int ranks,
                         DatasetRequirements& req) {
  const Shape& s = req.sampleShape;
  int size = s.size() == 3 ? int(std::min(s[1], s[2])) : 1;
  HGP_ASSIGN_OR_RETURN(req.augment, resolveAugment(opt.augment, size));
  if (pixels) {
    std::vector<double> m = plan.meta.getFloats("pixel_mean"), sd = plan.meta.getFloats("pixel_std");
    auto same = [](const std::vector<float>& a, const std::vector<double>& b) {
      if (a.size() != b.size()) return false;
      for (size_t i = 0; i < a.size(); ++i)
        if (std::fabs(double(a[i]) - b[i]) > 1e-6) return false;
      return true;
    };
    if (!req.mean.empty() && !(same(req.mean, m) && same(req.stddev, sd)))
      return Status(ErrorCode::Usage, "this executable takes 8-bit pixels (hgpc compile --pixels u8) "
                                      "and normalizes them as compiled; give --normalize to hgpc "
                                      "compile instead");
    req.mean.clear(), req.stddev.clear();
  } else if (req.augment.recipe == "imagenet" && req.mean.empty() && s.size() == 3 && s[0] == 3) {
    std::tie(req.mean, req.stddev) = imagenetNormalization();
  }
  req.skipBadImages = opt.skipBadImages;
  req.shuffleBuffer = opt.shuffleBuffer;
  req.rank = rank;
  req.ranks = ranks;
  return Status::ok();
}

Status saveClassNames(const Dataset& train, const std::string& model) {
  const std::vector<std::string>* names = train.classNames();
  if (!names) return Status::ok();
  std::filesystem::path p(model);
  p.replace_extension(".classes.txt");
  std::ofstream out(p);
  for (const std::string& n : *names) out << n << "\n";
  out.close();
  if (!out) return Status(ErrorCode::Io, "cannot write the class list '" + p.string() + "'");
  std::fprintf(stderr, "wrote the %zu class names to %s\n", names->size(), p.c_str());
  return Status::ok();
}

} // namespace hgp
