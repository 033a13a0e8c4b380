#include "runtime/runner/ImageAugment.h"

#include <cmath>
#include <cstdio>

namespace hgp {

namespace {

Status usage(const std::string& m) { return Status(ErrorCode::Usage, m); }

Status checkRange(const std::vector<double>& r, const char* flag, bool unitInterval) {
  if (r.size() != 2) return usage(std::string(flag) + " takes LO,HI");
  if (!(r[0] > 0) || !(r[1] >= r[0]) || !std::isfinite(r[1]))
    return usage(std::string(flag) + " needs 0 < LO <= HI");
  if (unitInterval && r[1] > 1) return usage(std::string(flag) + ": HI is a fraction of the area, at most 1");
  return Status::ok();
}

} // namespace

std::string AugmentPlan::describe() const {
  char buf[256];
  switch (trainCrop) {
  case TrainCrop::RandomResized:
    std::snprintf(buf, sizeof buf, "RandomResizedCrop(scale=(%g, %g), ratio=(%.3g, %.3g))", scaleLo,
                  scaleHi, ratioLo, ratioHi);
    break;
  case TrainCrop::RandomPadded: std::snprintf(buf, sizeof buf, "RandomCrop(padding=%d)", padding); break;
  case TrainCrop::CenterResize: std::snprintf(buf, sizeof buf, "Resize + CenterCrop"); break;
  }
  std::string s = buf;
  if (flip > 0) s += " + RandomHorizontalFlip(" + std::to_string(flip).substr(0, 4) + ")";
  return s;
}

Expected<AugmentPlan> resolveAugment(const AugmentFlags& f, int size) {
  AugmentPlan p;
  p.recipe = f.recipe;
  if (f.recipe == "cifar") {
    p.trainCrop = AugmentPlan::TrainCrop::RandomPadded;
    p.flip = 0.5;
  } else if (f.recipe == "imagenet") {
    p.trainCrop = AugmentPlan::TrainCrop::RandomResized;
    p.flip = 0.5;
    p.evalResize = int(std::lround(size * 256.0 / 224.0));
  } else if (f.recipe != "none") {
    return usage("--augment takes imagenet, cifar or none, not '" + f.recipe + "'");
  }
  if (!f.cropScale.empty() || !f.cropRatio.empty()) {
    p.trainCrop = AugmentPlan::TrainCrop::RandomResized;
    if (!f.cropScale.empty()) {
      HGP_TRY(checkRange(f.cropScale, "--crop-scale", /*unitInterval=*/true));
      p.scaleLo = f.cropScale[0], p.scaleHi = f.cropScale[1];
    }
    if (!f.cropRatio.empty()) {
      HGP_TRY(checkRange(f.cropRatio, "--crop-ratio", /*unitInterval=*/false));
      p.ratioLo = f.cropRatio[0], p.ratioHi = f.cropRatio[1];
    }
  }
  if (f.padding) {
    if (p.trainCrop == AugmentPlan::TrainCrop::RandomResized && (!f.cropScale.empty() || !f.cropRatio.empty()))
      return usage("--crop-padding (RandomCrop) and --crop-scale/--crop-ratio (RandomResizedCrop) "
                   "are two different crops; give one");
    if (*f.padding < 0) return usage("--crop-padding must be >= 0");
    p.trainCrop = AugmentPlan::TrainCrop::RandomPadded;
    p.padding = *f.padding;
  }
  if (f.flip) {
    if (!(*f.flip >= 0 && *f.flip <= 1)) return usage("--flip is a probability in [0, 1]");
    p.flip = *f.flip;
  }
  if (f.evalResize) {
    if (*f.evalResize < size)
      return usage("--eval-resize " + std::to_string(*f.evalResize) + " is smaller than the model's "
                   "input (" + std::to_string(size) + "); the centre crop would not fit");
    p.evalResize = *f.evalResize;
  }
  if (p.evalResize == 0) p.evalResize = size;
  if (f.dctScale) p.dctScale = *f.dctScale;
  return p;
}

std::pair<std::vector<float>, std::vector<float>> imagenetNormalization() {
  return {{0.485f, 0.456f, 0.406f}, {0.229f, 0.224f, 0.225f}};
}

} // namespace hgp
