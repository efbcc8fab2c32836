// cross_entropy(logits, target, {reduction, label_smoothing, ignore_index}): PyTorch's
// F.cross_entropy. With log p = log_softmax(logits) and eps the smoothing,
//   loss_i = (1 - eps)·(-log p[t_i]) + eps·mean_v(-log p_v),   0 where t_i = ignore_index
// mean is the fused label_smoothed_cross_entropy (cross_entropy.cpp); sum and none
// are composed of log_softmax, gather, mean and masked_fill, so their derivative is
// theirs: d loss_i / d logits_i = softmax_i - (1 - eps)·onehot(t_i) - eps/V.
#include "elementwise.h"

namespace loom {

namespace {

// Every target is a class in [0, V) or ignore_index: read on the host, so the
// error names this op and the id (gather's own error would name gather).
void check_targets(const Tensor& logits, const Tensor& target, int64_t ignore_index) {
  LOOM_CHECK(is_floating(logits.dtype()), "cross_entropy: logits must be float32 or float64, got {}",
             dtype_name(logits.dtype()));
  LOOM_CHECK(target.dtype() == DType::i64,
             "cross_entropy: target must be int64 class ids, got {} (class probabilities are not supported)",
             dtype_name(target.dtype()));
  LOOM_CHECK(logits.dim() >= 1, "cross_entropy: logits need a class dim, got a 0-d tensor");
  const Shape rows(logits.shape().begin(), logits.shape().end() - 1);
  LOOM_CHECK(target.shape() == rows, "cross_entropy: target has shape {} but logits {} need target shape {}",
             target.shape(), logits.shape(), rows);
  const int64_t classes = logits.shape().back();
  const std::vector<int64_t> ids = target.to(kCPU).contiguous().to_vector<int64_t>();
  for (size_t i = 0; i < ids.size(); ++i)
    LOOM_CHECK(ids[i] == ignore_index || (ids[i] >= 0 && ids[i] < classes),
               "cross_entropy: target id {} (at flat position {}) is out of range for V = {} classes: ids must be "
               "in [0, {}) or equal ignore_index ({})",
               ids[i], i, classes, classes, ignore_index);
}

// Targets with rows 1 and 3 ignored (ids drawn by the matrix are all in range).
Tensor with_ignored(const Tensor& t) { return masked_fill(t, tensor({0, 1, 0, 1, 0}, DType::b8).to(t.device()), -100); }

OpCall reduced(Reduction reduction, double eps, bool ignore = false) {
  return [=](const OpArgs& x) {
    return cross_entropy(x[0], ignore ? with_ignored(x[1]) : x[1], {.reduction = reduction, .label_smoothing = eps});
  };
}

}  // namespace

Tensor cross_entropy(const Tensor& logits, const Tensor& target, const CrossEntropyOptions& o, Where where) {
  CallSite site(where);
  if (o.reduction == Reduction::mean)
    return label_smoothed_cross_entropy(logits, target, o.label_smoothing, o.ignore_index, where);
  check_targets(logits, target, o.ignore_index);
  LOOM_CHECK(o.label_smoothing >= 0.0 && o.label_smoothing <= 1.0,
             "cross_entropy: label_smoothing must be in [0, 1], got {}", o.label_smoothing);
  const Tensor ignored = eq(target, scalar_tensor(static_cast<double>(o.ignore_index), {DType::i64, target.device()}));
  const Tensor classes = masked_fill(target, ignored, 0);  // any class: the row is zeroed below
  const Tensor log_p = log_softmax(logits, -1);
  const Tensor picked = squeeze(gather(log_p, -1, unsqueeze(classes, -1)), -1);
  const double eps = o.label_smoothing;
  Tensor loss = neg(add(mul(picked, detail::constant_like(picked, 1.0 - eps)),
                        mul(mean(log_p, {-1}), detail::constant_like(picked, eps))));
  loss = masked_fill(loss, ignored, 0.0);
  return o.reduction == Reduction::sum ? sum(loss) : loss;
}

namespace {
// torch.nn.functional.cross_entropy's call: classes on dim 1 of (C), (N, C) or
// (N, C, d1, ...), target class ids or class probabilities (input's shape).
Tensor cross_entropy_as_torch(const Arguments& a) {
  LOOM_CHECK(a.is_none("weight") && a.is_none("size_average") && a.is_none("reduce"),
             "cross_entropy: class weights and the deprecated size_average and reduce are not supported");
  const std::string& how = a.text("reduction");
  LOOM_CHECK(how == "mean" || how == "sum" || how == "none",
             "cross_entropy: reduction must be 'mean', 'sum' or 'none', got '{}'", how);
  const Reduction reduction = how == "mean" ? Reduction::mean : how == "sum" ? Reduction::sum : Reduction::none;
  Tensor input = a.tensor("input"), target = a.tensor("target");
  const double eps = a.number("label_smoothing");
  LOOM_CHECK(input.dim() >= 1, "cross_entropy: input needs a class dim, got a 0-d tensor");
  if (is_floating(target.dtype())) {  // class probabilities
    LOOM_CHECK(target.shape() == input.shape(),
               "cross_entropy: probability targets must have the input's shape {}, got {}", input.shape(),
               target.shape());
    const int64_t class_dim = input.dim() == 1 ? 0 : 1;
    const double classes = static_cast<double>(input.shape()[class_dim]);
    if (eps != 0)
      target = add(mul(target, detail::constant_like(target, 1 - eps)), detail::constant_like(target, eps / classes));
    const Tensor loss = neg(sum(mul(target, log_softmax(input, class_dim)), {class_dim}));
    return reduction == Reduction::mean ? mean(loss) : reduction == Reduction::sum ? sum(loss) : loss;
  }
  const CrossEntropyOptions options{
      .reduction = reduction, .label_smoothing = eps, .ignore_index = a.integer("ignore_index")};
  if (input.dim() == 1) {  // one sample
    const Tensor loss = cross_entropy(unsqueeze(input, 0), unsqueeze(target, 0), options);
    return reduction == Reduction::none ? squeeze(loss, 0) : loss;
  }
  Shape classes_last{0};  // loom's op takes the classes on the last dim
  for (int64_t d = 2; d < input.dim(); ++d) classes_last.push_back(d);
  classes_last.push_back(1);
  return cross_entropy(input.dim() > 2 ? permute(input, classes_last) : input, target, options);
}
}  // namespace

LOOM_OP(cross_entropy){
    .name = "cross_entropy",
    .formula = "loss_i = (1-ε)·(-log p[t_i]) + ε·mean_v(-log p_v),  p = softmax(x);  0 where t_i = ignore_index",
    .derivative = "dx_i = g_i·(p_i - (1-ε)·onehot(t_i) - ε/V)   (composite; mean: the fused op's)",
    .shape_rule = "x [.., V], t [..] int64 → t's shape (none), a scalar (sum, mean)",
    .call = reduced(Reduction::none, 0.1),
    .samples = {{{{{5, 7}}, {{5}, Domain::any, DType::i64, 7}}, reduced(Reduction::none, 0.1), "none eps=0.1"},
                {{{{5, 4}}, {{5}, Domain::any, DType::i64, 4}},
                 reduced(Reduction::none, 0.2, true),
                 "none eps=0.2, rows 1,3 ignored"},
                {{{{2, 3, 6}}, {{2, 3}, Domain::any, DType::i64, 6}},
                 reduced(Reduction::sum, 0.0),
                 "sum [2,3,6]",
                 [](const OpArgs& x) { return label_smoothed_cross_entropy(x[0], x[1], 0.0) * 6.0; }},
                {{{{5, 4}}, {{5}, Domain::any, DType::i64, 4}},
                 reduced(Reduction::mean, 0.1, true),
                 "mean eps=0.1, rows 1,3 ignored",
                 [](const OpArgs& x) {
                   return cross_entropy(x[0], with_ignored(x[1]),
                                        {.reduction = Reduction::sum, .label_smoothing = 0.1}) /
                          3.0;
                 }},
                {.inputs = {{{3, 4, 2}}, {{3, 2}, Domain::any, DType::i64, 4}},
                 .label = "classes on dim 1 (torch's), none",
                 .attributes = {{"reduction", std::string("none")}}},
                {.inputs = {{{5}}, {{}, Domain::any, DType::i64, 5}},
                 .label = "one sample, eps=0.1",
                 .attributes = {{"label_smoothing", 0.1}}},
                {.inputs = {{{4, 3}}, {{4, 3}, Domain::positive, DType::f64, 0, false}},
                 .label = "class probabilities, sum",
                 .attributes = {{"reduction", std::string("sum")}}},
                {.inputs = {{{6, 4}}, {{6}, Domain::any, DType::i64, 4}},
                 .label = "ignore_index=0, mean eps=0.2",
                 .attributes = {{"ignore_index", int64_t{0}}, {"label_smoothing", 0.2}}}},
    .schema =
        "cross_entropy(Tensor input, Tensor target, Tensor? weight=None, bool? size_average=None, "
        "int ignore_index=-100, bool? reduce=None, str reduction='mean', float label_smoothing=0) -> Tensor",
    .invoke = [](const Arguments& a) { return cross_entropy_as_torch(a); },
};

}  // namespace loom
