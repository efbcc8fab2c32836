"""loom against PyTorch, op by op, OpInfo-style: every registered op that PyTorch has is called
by torch's name and argument names on the registry's own samples (the inputs the test matrix
draws), in float64 and float32, and on non-contiguous, 0-d, empty and integer inputs where the
op takes them; value, shape, dtype and gradients are compared with torch.testing.assert_close's
tolerances for the dtype, and through the Tensor method where torch has one. A case torch
refuses must be refused by loom too. Every registered op is either here or listed in
NOT_IN_TORCH with the reason."""
import re

import numpy as np
import pytest
import torch

import loom


def functional(m):
    """torch.nn.functional for torch, loom itself for loom."""
    return torch.nn.functional if m is torch else m


def dims(label):
    """The dim a sample's label names ("dim=1", "dim=-1 keepdim"), for ops whose index inputs fit it."""
    return int(re.search(r"dim=(-?\d+)", label).group(1))


class Case:
    def __init__(self, call, attrs=({},), method=None, variants=("non-contiguous",), grad=True, tensors=1):
        self.call, self.method, self.variants, self.grad, self.tensors = call, method, variants, grad, tensors
        self.attrs = attrs if callable(attrs) else (lambda label, a=attrs: a)


def unary(name, variants=("non-contiguous", "0-d", "empty"), **kw):
    return Case(lambda m, xs, **a: getattr(m, name)(xs[0], **a), method=name, variants=variants, **kw)


def binary(name, variants=("non-contiguous", "0-d", "empty"), **kw):
    return Case(lambda m, xs, **a: getattr(m, name)(xs[0], xs[1], **a), method=name, variants=variants, tensors=2,
                **kw)


NUMERIC = ("non-contiguous", "0-d", "empty", "int64", "bool", "mixed")
CASES = {
    "abs": unary("abs", NUMERIC), "neg": unary("neg", NUMERIC), "exp": unary("exp"), "log": unary("log"),
    "tanh": unary("tanh"), "relu": unary("relu"), "sqrt": unary("sqrt"), "rsqrt": unary("rsqrt"),
    "sigmoid": unary("sigmoid"), "sign": unary("sign", NUMERIC), "clone": unary("clone"),
    "softplus": Case(lambda m, xs, **a: functional(m).softplus(xs[0], **a), [{}, {"beta": 2.0, "threshold": 1.0}]),
    "gelu": Case(lambda m, xs, **a: functional(m).gelu(xs[0], **a)),
    "gelu_tanh": Case(lambda m, xs, **a: functional(m).gelu(xs[0], approximate="tanh")),
    "clamp": Case(lambda m, xs, **a: m.clamp(xs[0], **a), [{"min": -0.1, "max": 3.0}, {"min": -0.1}, {"max": 0.1}],
                  method="clamp"),
    "add": binary("add", NUMERIC), "sub": binary("sub", NUMERIC), "mul": binary("mul", NUMERIC),
    "div": binary("div", NUMERIC), "maximum": binary("maximum", NUMERIC), "minimum": binary("minimum", NUMERIC),
    "pow_tensor": Case(lambda m, xs, **a: m.pow(xs[0], xs[1]), method="pow", tensors=2),
    **{name: binary(name, NUMERIC, grad=False) for name in ("eq", "ne", "lt", "le", "gt", "ge")},
    "where": Case(lambda m, xs, **a: m.where(xs[0], xs[1], xs[2])),
    "sum": Case(lambda m, xs, **a: m.sum(xs[0], **a), [{}, {"dim": 1}, {"dim": -1, "keepdim": True}, {"dim": (0, 1)}],
                method="sum", variants=("non-contiguous", "0-d", "int64")),
    "mean": Case(lambda m, xs, **a: m.mean(xs[0], **a), [{}, {"dim": 1}, {"dim": (0, -1), "keepdim": True}],
                 method="mean", variants=("non-contiguous", "0-d")),
    "amax": Case(lambda m, xs, **a: m.amax(xs[0], **a), [{"dim": 1}, {"dim": -1, "keepdim": True}], method="amax",
                 variants=("non-contiguous", "0-d")),
    "logsumexp": Case(lambda m, xs, **a: m.logsumexp(xs[0], **a), [{"dim": 1}, {"dim": (0, 1), "keepdim": True}],
                      method="logsumexp", variants=("non-contiguous", "0-d")),
    "var": Case(lambda m, xs, **a: m.var(xs[0], **a),
                [{}, {"dim": 1}, {"dim": 0, "unbiased": False}, {"dim": -1, "keepdim": True, "correction": 0}],
                method="var", variants=("non-contiguous",)),
    "argmax": Case(lambda m, xs, **a: m.argmax(xs[0], **a), [{}, {"dim": 1}, {"dim": -1, "keepdim": True}],
                   method="argmax", grad=False, variants=("non-contiguous", "0-d", "int64")),
    "max": Case(lambda m, xs, **a: m.max(xs[0], **a), [{}, {"dim": 1}, {"dim": 0, "keepdim": True}], method="max",
                variants=("non-contiguous", "0-d", "int64")),
    "amin": Case(lambda m, xs, **a: m.amin(xs[0], **a), [{"dim": 1}, {"dim": -1, "keepdim": True}], method="amin",
                 variants=("non-contiguous", "0-d")),
    "argmin": Case(lambda m, xs, **a: m.argmin(xs[0], **a), [{}, {"dim": 1}, {"dim": -1, "keepdim": True}],
                   method="argmin", grad=False, variants=("non-contiguous", "0-d", "int64")),
    "min": Case(lambda m, xs, **a: m.min(xs[0], **a), [{}, {"dim": 1}, {"dim": 0, "keepdim": True}], method="min",
                variants=("non-contiguous", "0-d", "int64")),
    "softmax": Case(lambda m, xs, **a: m.softmax(xs[0], **a), [{"dim": -1}, {"dim": 0}], method="softmax"),
    "log_softmax": Case(lambda m, xs, **a: m.log_softmax(xs[0], **a), [{"dim": -1}, {"dim": 1}],
                        method="log_softmax"),
    "matmul": binary("matmul", ("non-contiguous",)),
    "linear": Case(lambda m, xs, **a: functional(m).linear(*xs)),
    "reshape": Case(lambda m, xs, **a: m.reshape(xs[0], (7, 2, -1))),
    "view": Case(lambda m, xs, **a: xs[0].view(2, -1)),
    "expand": Case(lambda m, xs, **a: xs[0].expand(2, 4, 3)),
    "permute": Case(lambda m, xs, **a: m.permute(xs[0], (2, 0, 1))),
    "transpose": Case(lambda m, xs, **a: m.transpose(xs[0], 0, 1), method=None),
    "squeeze": Case(lambda m, xs, **a: m.squeeze(xs[0], **a), [{}, {"dim": 1}, {"dim": 0}], method="squeeze"),
    "unsqueeze": Case(lambda m, xs, **a: m.unsqueeze(xs[0], **a), [{"dim": -1}, {"dim": 0}], method="unsqueeze"),
    "narrow": Case(lambda m, xs, **a: m.narrow(xs[0], **a), [{"dim": 0, "start": 1, "length": 2}], method="narrow"),
    "select": Case(lambda m, xs, **a: m.select(xs[0], **a), [{"dim": 1, "index": -1}], method="select"),
    "cat": Case(lambda m, xs, **a: m.cat(list(xs), **a), lambda label: [{"dim": dims(label)}]),
    "stack": Case(lambda m, xs, **a: m.stack(list(xs), **a), [{"dim": 0}, {"dim": -1}]),
    "split": Case(lambda m, xs, **a: m.split(xs[0], **a), [{"split_size_or_sections": 2, "dim": 1},
                                                           {"split_size_or_sections": [1, 1, 1, 2, 2], "dim": 1}]),
    "chunk": Case(lambda m, xs, **a: m.chunk(xs[0], **a), [{"chunks": 3, "dim": 0}, {"chunks": 4, "dim": -1}],
                  method="chunk"),
    "pad": Case(lambda m, xs, **a: functional(m).pad(xs[0], **a), [{"pad": (1, 2), "value": 0.5},
                                                                   {"pad": (1, 0, -1, 1)}]),
    "triu": Case(lambda m, xs, **a: m.triu(xs[0], **a), [{}, {"diagonal": 1}, {"diagonal": -2}], method="triu"),
    "tril": Case(lambda m, xs, **a: m.tril(xs[0], **a), [{}, {"diagonal": -1}, {"diagonal": 2}], method="tril"),
    "gather": Case(lambda m, xs, **a: m.gather(xs[0], a["dim"], xs[1]), lambda label: [{"dim": dims(label)}]),
    "index_select": Case(lambda m, xs, **a: m.index_select(xs[0], a["dim"], xs[1]),
                         lambda label: [{"dim": dims(label)}]),
    "index_add": Case(lambda m, xs, **a: m.index_add(xs[0], a["dim"], xs[1], xs[2], **a["alpha"]),
                      lambda label: [{"dim": dims(label), "alpha": {}}, {"dim": dims(label), "alpha": {"alpha": 2.0}}]),
    "scatter_add": Case(lambda m, xs, **a: m.scatter_add(xs[0], a["dim"], xs[1], xs[2]),
                        lambda label: [{"dim": dims(label)}]),
    "masked_fill": Case(lambda m, xs, **a: m.masked_fill(xs[0], xs[1], -1e9)),
    "embedding": Case(lambda m, xs, **a: functional(m).embedding(xs[1], xs[0], **a), [{}, {"padding_idx": 1},
                                                                                    {"padding_idx": -1}]),
    "layer_norm": Case(lambda m, xs, **a: functional(m).layer_norm(xs[0], (xs[0].shape[-1],), *xs[1:], **a),
                       [{}, {"eps": 0.1}]),
    "cross_entropy": Case(lambda m, xs, **a: functional(m).cross_entropy(xs[0], xs[1], **a),
                          [{}, {"reduction": "sum"}, {"reduction": "none", "label_smoothing": 0.1},
                           {"ignore_index": 1}]),
    "to_dtype": Case(lambda m, xs, **a: xs[0].to(torch.float32 if m is torch else loom.float32).double()),
    "dropout": Case(lambda m, xs, **a: functional(m).dropout(xs[0], **a), [{"p": 0.0}, {"p": 0.3, "training": False}]),
}

# Registered ops PyTorch has no function for, and why they are not compared here.
NOT_IN_TORCH = {
    "bias_gelu": "fused gelu(x + b); checked against its composition by the test matrix",
    "relu_dropout": "fused dropout(relu(x)); random, and checked against its composition",
    "scaled_dot_product_attention": "torch 1.13 lacks it; test_torch_conventions checks its formula",
    "pow": "the scalar exponent: pow_tensor and Tensor.__pow__ cover torch.pow",
    "slice": "torch has no function (x[a:b:s] is checked in test_tensor)",
    "sum_to": "an internal reduction (broadcast's gradient)",
    "step": "an internal 0/1 step (relu's derivative)",
    "adam_step_": "the fused optimizer update; test_optim checks it against torch.optim.Adam",
    "sgd_step_": "the fused optimizer update; test_optim checks it",
    "label_smoothed_cross_entropy": "the fused loss behind cross_entropy(reduction='mean')",
    **{name: "a backward op, checked as its forward's gradient" for name in (
        "dropout_backward", "embedding_backward", "gelu_backward", "gelu_tanh_backward",
        "label_smoothed_cross_entropy_backward", "layer_norm_backward", "layer_norm_param_grads",
        "log_softmax_backward", "relu_backward", "relu_dropout_backward", "sigmoid_backward", "slice_backward",
        "softmax_backward", "tanh_backward")},
}

# Cases where loom refuses what torch accepts, on purpose (docs/python.md lists them).
REFUSED = {
    ("add", "bool"): "bool + bool: loom's arithmetic kernels are numeric",
    ("mul", "bool"): "bool * bool: likewise",
    ("maximum", "bool"): "maximum of bools: likewise",
    ("minimum", "bool"): "minimum of bools: likewise",
    ("sign", "bool"): "sign of bools: likewise",
}

TOLERANCE = {torch.float64: dict(rtol=1e-7, atol=1e-7), torch.float32: dict(rtol=1.3e-6, atol=1e-5)}


def test_every_registered_op_is_compared_or_says_why_not():
    names = set(loom.op_names())
    assert names == set(CASES) | set(NOT_IN_TORCH), (names - set(CASES) - set(NOT_IN_TORCH),
                                                     (set(CASES) | set(NOT_IN_TORCH)) - names)


def variant_inputs(inputs, variant, dtype):
    """The sample's inputs (numpy arrays) as the variant makes them, floating ones in dtype."""
    arrays = []
    floating = 0
    for a in inputs:
        if a.dtype.kind == "f":
            floating += 1
            a = a.astype(dtype)
            if variant == "mixed" and floating > 1:  # the other float dtype: promotion
                a = a.astype(np.float32 if dtype == np.float64 else np.float64)
            if variant == "bool":
                a = a > 0
            elif variant == "int64":
                a = np.round(a * 3).astype(np.int64)
            elif variant == "0-d":
                a = a.reshape(-1)[0].copy().reshape(())
            elif variant == "empty":
                a = a[..., :0] if a.ndim else a
        arrays.append(a)
    return arrays


def to_libraries(arrays, variant, grad):
    """The arrays as loom and torch tensors (non-contiguous views for that variant), and the
    leaves whose .grad to compare (the floating ones require grad when `grad`; for a view,
    the contiguous tensor it views)."""
    ours, theirs, leaves = [], [], []
    for a in arrays:
        differentiable = grad and a.dtype.kind == "f"
        if variant == "non-contiguous" and a.ndim >= 2:
            flipped = np.ascontiguousarray(np.swapaxes(a, 0, -1))
            leaf_l = loom.tensor(flipped, requires_grad=differentiable)
            leaf_t = torch.tensor(flipped, requires_grad=differentiable)
            lt, tt = leaf_l.transpose(0, -1), leaf_t.transpose(0, -1)
        else:
            leaf_l = lt = loom.tensor(a, requires_grad=differentiable)
            leaf_t = tt = torch.tensor(a, requires_grad=differentiable)
        ours.append(lt)
        theirs.append(tt)
        if differentiable:
            leaves.append((leaf_l, leaf_t))
    return ours, theirs, leaves


def outputs(result):
    return list(result) if isinstance(result, (tuple, list)) else [result]


def compare(ours, theirs, dtype, what):
    """Equal shapes and dtypes, and values within the tolerance of the least precise dtype the
    case involves (a float64 gradient that went through a float32 operand carries its rounding);
    NaN where torch has NaN."""
    ours, theirs = outputs(ours), outputs(theirs)
    assert len(ours) == len(theirs), what
    for o, t in zip(ours, theirs):
        assert tuple(o.shape) == tuple(t.shape), (what, tuple(o.shape), tuple(t.shape))
        assert str(o.dtype).split(".")[-1] == str(t.dtype).split(".")[-1], (what, o.dtype, t.dtype)
        expected = t.detach()
        got = torch.tensor(np.asarray(o.detach().tolist(), dtype=expected.numpy().dtype)).reshape(expected.shape)
        least = torch.float32 if dtype == np.float32 or " mixed " in what else expected.dtype
        tolerance = TOLERANCE[least] if expected.dtype.is_floating_point else dict(rtol=0, atol=0)
        torch.testing.assert_close(got, expected, **tolerance, equal_nan=True, msg=lambda m: f"{what}: {m}")


def backward_both(ours, theirs, seed):
    """Backward from (out * w).sum() over the floating outputs, w the same draws for both."""
    rng = np.random.default_rng(seed)
    lo, to = [], []
    for o, t in zip(outputs(ours), outputs(theirs)):
        if t.dtype.is_floating_point and t.requires_grad:
            w = rng.standard_normal(tuple(t.shape)).astype(t.detach().numpy().dtype)
            lo.append((o * loom.tensor(w)).sum())
            to.append((t * torch.tensor(w)).sum())
    if not to:
        return False
    sum(lo[1:], lo[0]).backward()
    sum(to[1:], to[0]).backward()
    return True


COUNTS = {"cases": 0, "refused by both": 0}


def run_case(name, case, arrays, variant, dtype, attrs, label):
    what = f"{name} [{label}] {variant} {np.dtype(dtype).name} {attrs}"
    grad = case.grad and variant not in ("int64", "bool")
    ours_in, theirs_in, leaves = to_libraries(arrays, variant, grad)
    if (name, variant) in REFUSED:
        with pytest.raises(loom.Error):
            case.call(loom, ours_in, **attrs)
        case.call(torch, theirs_in, **attrs)  # still accepted there, or the entry goes
        COUNTS["cases"] += 1
        return
    try:
        theirs = case.call(torch, theirs_in, **attrs)
    except (RuntimeError, IndexError, ValueError, TypeError):
        with pytest.raises(Exception):
            case.call(loom, ours_in, **attrs)
        COUNTS["cases"] += 1
        COUNTS["refused by both"] += 1
        return
    ours = case.call(loom, ours_in, **attrs)
    compare(ours, theirs, dtype, what)
    if grad and backward_both(ours, theirs, len(what)):
        for lt, tt in leaves:
            assert (lt.grad is None) == (tt.grad is None), (what, "gradient")
            if tt.grad is not None:
                compare(lt.grad, tt.grad, dtype, what + " gradient")
    if case.method:  # the same through the Tensor method: (input, *tensors, **attrs) as torch's
        ours_in, theirs_in, _ = to_libraries(arrays, variant, False)
        expected = case.call(torch, theirs_in, **attrs)
        method = getattr(ours_in[0], case.method)
        compare(method(*ours_in[1:case.tensors], **attrs), expected, dtype, what + " as a method")
    COUNTS["cases"] += 1


@pytest.mark.parametrize("name", sorted(CASES))
def test_op_matches_pytorch(name):
    case = CASES[name]
    samples = [(label, [t.detach().numpy() if t.dtype != loom.bool else t.numpy() for t in inputs])
               for label, inputs in loom._loom._sample_inputs(name)]
    for label, arrays in samples:
        for dtype in (np.float64, np.float32):
            for variant in ("sample",) + case.variants:
                if variant == "0-d" and any(a.ndim == 0 for a in arrays):
                    continue
                for attrs in case.attrs(label):
                    run_case(name, case, variant_inputs(arrays, variant, dtype), variant, dtype, attrs, label)
