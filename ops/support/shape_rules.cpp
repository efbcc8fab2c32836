#include <algorithm>

#include "loom/ops/shape_rules.h"

namespace loom {

namespace kernels {

Shape broadcast_shapes(const Shape& a, const Shape& b, std::string_view op) {
  size_t n = std::max(a.size(), b.size());
  Shape out(n);
  for (size_t i = 0; i < n; ++i) {
    int64_t da = i < n - a.size() ? 1 : a[i - (n - a.size())];
    int64_t db = i < n - b.size() ? 1 : b[i - (n - b.size())];
    LOOM_CHECK(da == db || da == 1 || db == 1, "{}: shapes {} and {} cannot be broadcast (dim {} is {} vs {})", op, a,
               b, i, da, db);
    out[i] = da == 1 ? db : da;
  }
  return out;
}

Shape broadcast_strides(const Tensor& t, const Shape& shape) {
  Shape strides(shape.size(), 0);
  size_t lead = shape.size() - t.shape().size();
  for (size_t i = 0; i < t.shape().size(); ++i)
    strides[lead + i] = t.shape()[i] == 1 && shape[lead + i] != 1 ? 0 : t.strides()[i];
  return strides;
}

Shape normalize_dims(const Shape& dims, int64_t ndim, std::string_view op) {
  Shape out;
  if (ndim == 0) {  // a 0-d tensor: 0 and -1 name its one element, and there is no dim to reduce over
    for (int64_t d : dims) wrap_dim_or_scalar(d, ndim, op);
    LOOM_CHECK(dims.size() <= 1, "{}: dim listed twice in {} (0 and -1 are the same dim of a 0-d tensor)", op, dims);
    return out;
  }
  if (dims.empty()) {
    for (int64_t d = 0; d < ndim; ++d) out.push_back(d);
    return out;
  }
  for (int64_t d : dims) out.push_back(wrap_dim(d, ndim, op));
  std::sort(out.begin(), out.end());
  LOOM_CHECK(std::adjacent_find(out.begin(), out.end()) == out.end(), "{}: dim listed twice in {}", op, dims);
  return out;
}

Shape reduced_shape(const Shape& shape, const Shape& dims, bool keepdim) {
  Shape out;
  for (int64_t d = 0; d < static_cast<int64_t>(shape.size()); ++d) {
    bool reduced = std::find(dims.begin(), dims.end(), d) != dims.end();
    if (!reduced)
      out.push_back(shape[d]);
    else if (keepdim)
      out.push_back(1);
  }
  return out;
}

}  // namespace kernels
}  // namespace loom
