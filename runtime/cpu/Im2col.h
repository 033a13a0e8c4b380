// Im2col.h - convolution geometry and the im2col (vol2col) transforms of the CPU backend.
//
// Every convolution executor (Conv, ConvTranspose, ConvBwdData, ConvBwdFilter) describes its
// problem as the forward convolution X[N,C,*S] * W[M,C/group,*K] -> Y[N,M,*O] and works on that
// ConvGeometry. 1-D and 2-D problems are 3-D problems with leading spatial dims of size 1, so one
// vol2col serves all ranks. Per image and group, the forward is
//   Y_g[M/g, O] = W_g[M/g, C/g*K] x col[C/g*K, O],
// the data gradient is col2vol(W_g^T x dY_g) and the filter gradient is dY_g x col^T.
#pragma once

#include "runtime/cpu/KernelUtil.h"

namespace hgp::cpu {

struct ConvGeometry {
  int64_t n = 0, group = 1;
  int64_t inC = 0, outC = 0; ///< Channels of the forward convolution's X and Y.
  /// Spatial sizes and window attributes, padded to 3 dims with leading 1s (pads 0).
  int64_t in[3] = {1, 1, 1}, out[3] = {1, 1, 1}, k[3] = {1, 1, 1};
  int64_t stride[3] = {1, 1, 1}, pad[3] = {0, 0, 0}, dilation[3] = {1, 1, 1};

  int64_t inVol() const { return in[0] * in[1] * in[2]; }
  int64_t outVol() const { return out[0] * out[1] * out[2]; }
  int64_t kVol() const { return k[0] * k[1] * k[2]; }
  int64_t inCg() const { return inC / group; }
  int64_t outCg() const { return outC / group; }
  /// Rows of the column matrix: one per (input channel of a group, kernel offset).
  int64_t colRows() const { return inCg() * kVol(); }
  /// A 1x1 kernel with unit stride and no padding: the column matrix is X itself.
  bool isPointwise() const;
  /// One input and one output channel per group (MobileNet's depthwise layers).
  bool isDepthwise() const { return group == inC && group == outC; }
};

/// Reads strides, pads, dilations and group, and checks that x[N,C,*S], w[M,C/group,*K] and
/// y[N,M,*O] describe a forward convolution. With checkOutput false the spatial sizes of y are
/// taken as given (ConvTranspose checks its own output formula); pads may then be asymmetric in
/// a way the forward formula would not reproduce.
Status readConvGeometry(const KernelArgs& a, const Shape& x, const Shape& w, const Shape& y,
                        bool checkOutput, ConvGeometry& g);

/// The spatial output size of a window op (conv or pool) along one dim; PyTorch's ceil rule.
int64_t windowOutputSize(int64_t in, int64_t kernel, int64_t stride, int64_t padBegin,
                         int64_t padEnd, int64_t dilation, bool ceilMode);

/// col[c*kVol + kernel offset, output position] = x[c, input position], zero where the window
/// reads padding. `x` holds `channels` planes of g.in; `col` has channels*kVol rows of outVol.
void vol2col(const float* x, int64_t channels, const ConvGeometry& g, float* col);

/// The adjoint of vol2col: adds every column entry back into the input position it came from.
/// `x` must be initialized (usually zeroed) by the caller.
void col2vol(const float* col, int64_t channels, const ConvGeometry& g, float* x);

/// dX = the gradient of the convolution w.r.t. its input, for all images: dy[N,outC,*out],
/// w[outC,inC/group,*k] -> dx[N,inC,*in]. ConvTranspose's forward is exactly this.
void convBackwardData(const ConvGeometry& g, const float* dy, const float* w, float* dx);

/// Whether the batch loop should be spread over the pool (each image then runs its GEMMs
/// serially) rather than run serially with parallel GEMMs.
bool batchIsParallel(int64_t n);

} // namespace hgp::cpu
