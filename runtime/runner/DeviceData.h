// DeviceData.h - --data-on-device: a small 8-bit data set held whole on the GPU.
//
// Fashion-MNIST (47 MB) and CIFAR-10/100 (150 MB) fit in a GPU's memory many times over. With
// --data-on-device the runner uploads the training set once, as the 8-bit [D,H,W,C] pixels a
// --pixels u8 plan reads, and adds one DeviceBatch step (runtime/plan/OpList.def) at the start
// of the train program: it gathers the step's rows from the resident set, applies the random
// crop with padding and draws the flip on the device, and writes the pixels and flip flags that
// the plan's ImageInput node reads, inside the captured graph. Per step the host writes only
// the batch's sample indices, its labels and four numbers (seed, epoch, padding, flip
// probability): 17 bytes a sample instead of H x W x C, and no decoding or cropping.
//
// Why per-step indices rather than an order derived on the device: the epoch's order, the split
// over data-parallel ranks and a resumed run's position then stay where they are already
// computed and tested (BatchLoader, epochOrder), the indices ride the backend's prefetch of
// the next step's inputs like the labels do, and nothing about shuffling is duplicated in a
// kernel. The crop and flip are drawn on the device by the same SampleDraws rule the host
// decoders use (runtime/support/SampleDraws.h), so both paths give the same images bit for bit.
//
// What can be resident: 8-bit data already in memory (idx, CIFAR) whose images are the model's
// size, with --augment none or cifar (RandomCrop with padding, flip). Resampling crops
// (RandomResizedCrop) stay on the host. Anything else, and a data set that does not fit beside
// the plan, is ErrorCode::DataNotOnDevice (exit code 10): drop the flag and the run works as
// before. Evaluation data is still fed from the host (it runs once an epoch).
#pragma once

#include "runtime/plan/Plan.h"
#include "runtime/runner/Dataset.h"

#include <array>

namespace hgp {

/// The plan tensors DeviceBatch reads: the resident set, the step's sample indices, the draws.
struct DeviceBatchTensors {
  int data = -1, rows = -1, draw = -1;
};

/// Adds the resident set [samples, H, W, C] (appended to the persistent region), the "input.rows"
/// [N] and "input.draw" [4] inputs, and the DeviceBatch step that writes "input" and
/// "input.flip" at the start of the train program (other streams wait for it). The two become
/// ordinary persistent tensors written by that step (evaluation still writes them from the host).
Expected<DeviceBatchTensors> addDeviceBatch(Plan& plan, int64_t samples);

/// The "input.draw" value of `epoch`: {seed, epoch, padding (-1 for none), the flip probability's
/// bits as a double}.
std::array<int64_t, 4> deviceDraws(uint64_t seed, int64_t epoch, const ResidentData& data);

} // namespace hgp
