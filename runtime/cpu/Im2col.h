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
#include "runtime/plan/Window.h"

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

/// The output positions o in [lo, hi) whose input position o*stride + offset lies in [0, in).
inline void validRange(int64_t offset, int64_t stride, int64_t in, int64_t out, int64_t& lo,
                       int64_t& hi) {
  lo = offset >= 0 ? 0 : (-offset + stride - 1) / stride;
  hi = in - offset <= 0 ? 0 : (in - offset + stride - 1) / stride;
  hi = hi < out ? hi : out;
  lo = lo < hi ? lo : hi;
}

/// Walks one plane's output rows and, for each, the kernel taps in kernel order whose input row
/// lies inside the plane: fn(inRow, outRow, k, lo, hi, offW), where inRow and outRow are element
/// offsets of the rows within their planes, k indexes the kernel, and output positions ow in
/// [lo, hi) read input column ow * stride[2] + offW. The direct (depthwise) loops use it.
template <typename Fn> void forEachRowTap(const ConvGeometry& g, Fn&& fn) {
  for (int64_t od = 0; od < g.out[0]; ++od)
    for (int64_t oh = 0; oh < g.out[1]; ++oh) {
      int64_t outRow = (od * g.out[1] + oh) * g.out[2], k = 0;
      for (int64_t kd = 0; kd < g.k[0]; ++kd) {
        int64_t id = od * g.stride[0] - g.pad[0] + kd * g.dilation[0];
        for (int64_t kh = 0; kh < g.k[1]; ++kh) {
          int64_t ih = oh * g.stride[1] - g.pad[1] + kh * g.dilation[1];
          bool inside = id >= 0 && id < g.in[0] && ih >= 0 && ih < g.in[1];
          for (int64_t kw = 0; kw < g.k[2]; ++kw, ++k) {
            if (!inside) continue;
            int64_t offW = kw * g.dilation[2] - g.pad[2], lo, hi;
            validRange(offW, g.stride[2], g.in[2], g.out[2], lo, hi);
            fn((id * g.in[1] + ih) * g.in[2], outRow, k, lo, hi, offW);
          }
        }
      }
    }
}

/// Reads strides, pads, dilations and group, and checks that x[N,C,*S], w[M,C/group,*K] and
/// y[N,M,*O] describe a forward convolution. With checkOutput false the spatial sizes of y are
/// taken as given (ConvTranspose checks its own output formula); pads may then be asymmetric in
/// a way the forward formula would not reproduce.
Status readConvGeometry(const KernelArgs& a, const Shape& x, const Shape& w, const Shape& y,
                        bool checkOutput, ConvGeometry& g);


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
