// ImageAugment.h - the augmentation recipe a run uses: --augment and the flags that refine it.
//
// --augment names torchvision's standard recipes, and every piece can be set on its own:
//   none      train and eval: Resize(size) + CenterCrop(size) (the identity on images of the
//             model's size)
//   cifar     train: RandomCrop(size, padding=4) + RandomHorizontalFlip(0.5), on the image
//             resized to the model's size first if it is not already; eval: as none
//   imagenet  train: RandomResizedCrop(size, scale=(0.08, 1), ratio=(3/4, 4/3)) +
//             RandomHorizontalFlip(0.5); eval: Resize(size * 256 / 224) + CenterCrop(size);
//             and, unless --normalize says otherwise, ImageNet's mean and std
// The pieces: --crop-scale LO,HI and --crop-ratio LO,HI (RandomResizedCrop; setting either
// selects it), --crop-padding N (RandomCrop; selects it), --flip P, --eval-resize N, and
// --dct-scale on|off (decode JPEGs at a reduced scale when the crop is at least twice the
// output; on by default for training, never for evaluation, whose pixels then equal PIL's).
#pragma once

#include "runtime/support/Status.h"

#include <optional>
#include <string>
#include <utility>
#include <vector>

namespace hgp {

/// The resolved recipe; sizes in pixels of the model's input.
struct AugmentPlan {
  enum class TrainCrop { CenterResize, RandomResized, RandomPadded };
  std::string recipe = "none";
  TrainCrop trainCrop = TrainCrop::CenterResize;
  double scaleLo = 0.08, scaleHi = 1.0;       ///< RandomResizedCrop's area fraction.
  double ratioLo = 3.0 / 4, ratioHi = 4.0 / 3; ///< RandomResizedCrop's aspect ratio range.
  int padding = 4;                            ///< RandomCrop's zero padding.
  double flip = 0;                            ///< RandomHorizontalFlip's probability.
  int evalResize = 0;                         ///< Resize's shorter side; 0: the model's size.
  bool dctScale = true;                       ///< Reduced-scale JPEG decoding in training.
  /// Whether training images change from epoch to epoch.
  bool random() const { return trainCrop != TrainCrop::CenterResize || flip > 0; }
  /// "RandomResizedCrop(scale=(0.08, 1), ratio=(0.75, 1.33)) + flip 0.5", for the log.
  std::string describe() const;
};

/// The flags as given; unset ones take the recipe's value.
struct AugmentFlags {
  std::string recipe = "none";
  std::vector<double> cropScale, cropRatio;
  std::optional<int> padding, evalResize;
  std::optional<double> flip;
  std::optional<bool> dctScale;
};

/// The recipe with the flags applied, for a model input of `size` pixels (the shorter side).
/// Bad values (a scale outside (0, 1], a reversed range) are ErrorCode::Usage.
Expected<AugmentPlan> resolveAugment(const AugmentFlags& flags, int size);

/// ImageNet's per-channel mean and std, which --augment imagenet normalizes with by default.
std::pair<std::vector<float>, std::vector<float>> imagenetNormalization();

} // namespace hgp
