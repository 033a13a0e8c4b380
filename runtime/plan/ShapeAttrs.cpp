#include "runtime/plan/ShapeAttrs.h"

#include <algorithm>
#include <variant>

namespace hgp {

namespace {

Status bad(const std::string& m) {
  return Status(ErrorCode::Internal, m);
}

} // namespace

std::vector<int64_t> stridesOf(const Shape& s) {
  std::vector<int64_t> st(s.size(), 1);
  for (int64_t i = int64_t(s.size()) - 2; i >= 0; --i)
    st[size_t(i)] = st[size_t(i) + 1] * s[size_t(i) + 1];
  return st;
}

std::vector<int64_t> broadcastStrides(const Shape& s, const Shape& out) {
  std::vector<int64_t> st(out.size(), 0);
  std::vector<int64_t> own = stridesOf(s);
  size_t off = out.size() - s.size();
  for (size_t i = 0; i < s.size(); ++i) st[off + i] = s[i] == 1 ? 0 : own[i];
  return st;
}

void coalesceDims(Shape& shape, std::vector<std::vector<int64_t>*> strides) {
  Shape s;
  std::vector<std::vector<int64_t>> st(strides.size());
  for (size_t d = 0; d < shape.size(); ++d) {
    if (shape[d] == 1) continue;
    bool merge = !s.empty();
    for (size_t k = 0; k < strides.size() && merge; ++k)
      merge = st[k].back() == (*strides[k])[d] * shape[d];
    if (merge) {
      s.back() *= shape[d];
      for (size_t k = 0; k < strides.size(); ++k) st[k].back() = (*strides[k])[d];
    } else {
      s.push_back(shape[d]);
      for (size_t k = 0; k < strides.size(); ++k) st[k].push_back((*strides[k])[d]);
    }
  }
  if (s.empty()) {
    s.push_back(1);
    for (auto& v : st) v.push_back(0);
  }
  shape = s;
  for (size_t k = 0; k < strides.size(); ++k) *strides[k] = st[k];
}

Status readIntList(const AttrMap& attrs, const char* name, size_t n, std::vector<int64_t>& out) {
  const AttrValue* v = attrs.find(name);
  if (!v || !std::holds_alternative<std::vector<int64_t>>(*v))
    return bad(std::string("attribute '") + name + "' is missing or not an integer list");
  out = std::get<std::vector<int64_t>>(*v);
  if (out.size() != n)
    return bad(std::string("attribute '") + name + "' has " + std::to_string(out.size()) +
               " entries, expected " + std::to_string(n));
  return Status::ok();
}

Status checkStacking(const std::vector<const Shape*>& parts, const Shape& whole, int64_t axis) {
  int64_t rank = int64_t(whole.size());
  if (axis < 0 || axis >= rank) return bad("axis out of range");
  int64_t total = 0;
  for (const Shape* p : parts) {
    if (int64_t(p->size()) != rank) return bad("operands must have the same rank");
    for (int64_t d = 0; d < rank; ++d)
      if (d != axis && (*p)[size_t(d)] != whole[size_t(d)])
        return bad(shapeToString(*p) + " differs from " + shapeToString(whole) + " off the axis");
    total += (*p)[size_t(axis)];
  }
  if (total != whole[size_t(axis)]) return bad("the parts do not add up along the axis");
  return Status::ok();
}

Expected<SourceView> readSliceView(const AttrMap& attrs, const Shape& x, const Shape& y) {
  size_t r = x.size();
  if (y.size() != r) return bad("Slice result rank differs from the input rank");
  std::vector<int64_t> starts, ends, steps;
  HGP_TRY(readIntList(attrs, "starts", r, starts));
  HGP_TRY(readIntList(attrs, "ends", r, ends));
  HGP_TRY(readIntList(attrs, "steps", r, steps));
  std::vector<int64_t> xs = stridesOf(x);
  SourceView v;
  v.strides.assign(r, 0);
  for (size_t i = 0; i < r; ++i) {
    int64_t st = starts[i], en = ends[i], sp = steps[i], count;
    if (sp > 0 && st >= 0 && st <= x[i] && en >= st && en <= x[i])
      count = (en - st + sp - 1) / sp;
    else if (sp < 0 && st >= 0 && st < x[i] && en >= -1 && en <= st)
      count = (st - en - sp - 1) / -sp;
    else
      return bad("slice bounds are not normalized along dim " + std::to_string(i));
    if (count != y[i]) return bad("Slice result " + shapeToString(y) + " does not match the bounds");
    v.strides[i] = sp * xs[i];
    v.base += st * xs[i];
  }
  return v;
}

Expected<SourceView> readTransposeView(const AttrMap& attrs, const Shape& x, const Shape& y) {
  std::vector<int64_t> perm;
  HGP_TRY(readIntList(attrs, "perm", x.size(), perm));
  if (y.size() != x.size()) return bad("Transpose result rank differs");
  std::vector<int64_t> xs = stridesOf(x);
  SourceView v;
  v.strides.assign(x.size(), 0);
  std::vector<bool> seen(x.size());
  for (size_t d = 0; d < perm.size(); ++d) {
    int64_t p = perm[d];
    if (p < 0 || p >= int64_t(x.size()) || seen[size_t(p)]) return bad("perm is not a permutation");
    seen[size_t(p)] = true;
    if (y[d] != x[size_t(p)]) return bad("Transpose result " + shapeToString(y) + " does not match");
    v.strides[d] = xs[size_t(p)];
  }
  return v;
}

Status checkReshape(const AttrMap& attrs, const Shape& x, const Shape& y) {
  std::vector<int64_t> shape;
  HGP_TRY(readIntList(attrs, "shape", y.size(), shape));
  if (y != shape)
    return bad("result has shape " + shapeToString(y) + ", expected " + shapeToString(shape));
  if (numElements(x) != numElements(y))
    return bad("cannot reshape " + shapeToString(x) + " to " + shapeToString(y));
  return Status::ok();
}

Expected<Shape> readExpandShape(const AttrMap& attrs, const Shape& x) {
  std::vector<int64_t> target;
  HGP_TRY(readIntList(attrs, "shape", attrs.getInts("shape").size(), target));
  size_t r = std::max(x.size(), target.size());
  Shape want(r);
  for (size_t i = 0; i < r; ++i) {
    int64_t dx = i + x.size() >= r ? x[i + x.size() - r] : 1;
    int64_t dt = i + target.size() >= r ? target[i + target.size() - r] : 1;
    if (dx != dt && dx != 1 && dt != 1)
      return bad(shapeToString(x) + " does not broadcast to " + shapeToString(target));
    want[i] = dx == 1 ? dt : dx;
  }
  return want;
}

Expected<PadSpec> readPad(const AttrMap& attrs, const Shape& x, const Shape& y) {
  size_t r = x.size();
  std::vector<int64_t> pads;
  HGP_TRY(readIntList(attrs, "pads", 2 * r, pads));
  std::string mode = attrs.getString("mode", "constant");
  if (mode != "constant" && mode != "reflect" && mode != "edge")
    return bad("Pad mode '" + mode + "' is not supported");
  if (y.size() != r) return bad("Pad result rank differs from the input rank");
  PadSpec p;
  p.mode = mode == "constant" ? PadMode::Constant
           : mode == "reflect" ? PadMode::Reflect
                               : PadMode::Edge;
  p.value = float(attrs.getFloat("value", 0.0));
  for (size_t d = 0; d < r; ++d) {
    int64_t before = pads[d], after = pads[r + d], n = x[d];
    if (y[d] != n + before + after) return bad("Pad result " + shapeToString(y) + " does not match");
    if (p.mode != PadMode::Constant && (before < 0 || after < 0))
      return bad("negative pads are only supported in constant mode");
    if (p.mode == PadMode::Reflect && (before >= n || after >= n))
      return bad("reflect padding must be smaller than the dim it pads");
    p.before.push_back(before);
    p.after.push_back(after);
  }
  return p;
}

Expected<ReduceAxes> readReduceAxes(const AttrMap& attrs, const Shape& x) {
  const AttrValue* v = attrs.find("axes");
  if (!v || !std::holds_alternative<std::vector<int64_t>>(*v))
    return bad("attribute 'axes' is missing or not an integer list");
  const auto& axes = std::get<std::vector<int64_t>>(*v);
  bool keep = attrs.getInt("keepdims", 1) != 0;
  ReduceAxes r;
  r.reduced.assign(x.size(), false);
  r.none = axes.empty();
  int64_t prev = -1;
  for (int64_t ax : axes) {
    if (ax <= prev || ax >= int64_t(x.size())) return bad("axes must be sorted, unique and in range");
    r.reduced[size_t(ax)] = true;
    prev = ax;
  }
  for (size_t i = 0; i < x.size(); ++i) {
    if (!r.reduced[i])
      r.result.push_back(x[i]);
    else if (keep)
      r.result.push_back(1);
  }
  return r;
}

} // namespace hgp
