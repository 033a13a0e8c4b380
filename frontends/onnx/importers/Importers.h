// Importers.h - the ONNX op importers, their registry, and helpers shared between families.
//
// Each ONNX op in OnnxOps.def has `Status import<OpType>(OnnxNode&)`, defined in
// importers/<Family>Importers.cpp. An importer reads its node's attributes and operands, fills in
// every default ONNX leaves implicit, and emits IR nodes (or binds its results to known tensors
// or aliases). The registry checks operand counts before the importer runs.
#pragma once

#include "frontends/onnx/ImportContext.h"

namespace hgp {

using OnnxImportFn = Status (*)(OnnxNode&);

/// One row of OnnxOps.def.
struct OnnxOpEntry {
  const char* opType;
  OnnxImportFn import;
  int minInputs, maxInputs, minOutputs, maxOutputs;
  uint32_t staticInputs;
};

/// The entry for a default-domain op type, or null when the frontend does not support it.
const OnnxOpEntry* findOnnxOp(const std::string& opType);

#define ONNX_OP(OpType, ...) Status import##OpType(OnnxNode& n);
#include "frontends/onnx/importers/OnnxOps.def"

// ---- Shared helpers ---------------------------------------------------------------------------

/// The window geometry of a convolution or pooling node, with every ONNX default filled in and
/// auto_pad resolved into explicit pads (all begins, then all ends).
struct WindowAttrs {
  std::vector<int64_t> kernel, strides, pads, dilations;
};

/// Reads kernel_shape (or takes `kernel` when the weight gives it), strides, dilations, pads and
/// auto_pad for `spatial` (the input's spatial dims). Values are bounded so that no output size
/// computation can overflow.
Expected<WindowAttrs> readWindowAttrs(OnnxNode& n, const Shape& spatial,
                                      std::vector<int64_t> kernel, bool hasDilations);

/// Less (less=true) or Greater of a RandomUniformLike draw against a constant: stochastic depth's
/// Bernoulli mask (RandomImporters.cpp). Sets `handled` to false, emitting nothing, when neither
/// operand is a draw.
Status compareDrawIfAny(OnnxNode& n, bool less, bool& handled);

/// The dtype a node of float math computes in: that of its first operand among `operands` that is
/// a float computed at run time, else f32 (CompareImporters.cpp).
DType workDType(OnnxNode& n, std::vector<size_t> operands);

/// Input i as an operand of dtype `to`: a constant converted at import, a bool graph input Cast
/// to a 0/1 mask, a float of another dtype Cast; an integer tensor at run time is an error.
Expected<Value*> floatOperand(OnnxNode& n, size_t i, DType to);

/// Binds result 0 of `n` to the mask X != 0 (a Cast of the float X to bool; CompareImporters.cpp).
Status castToMask(OnnxNode& n, Value* x);

/// Applies a binary elementwise op to two known tensors with numpy broadcasting.
Expected<TensorDataPtr> foldBinary(const OnnxNode& n, char op, const TensorData& a,
                                   const TensorData& b);

} // namespace hgp
