"""loom against PyTorch, op by op, OpInfo-style, generated from the op registry: every op with a
schema (torch's signature, loom/op_schema.h) is called as loom.<op> and as torch's function of the
same name on the registry's own samples, with each sample's attributes by the schema's names
(the leading arguments by position, then by keyword; and again all by keyword), in float64 and
float32, and on non-contiguous, 0-d, empty and integer/bool inputs where the op takes them; value,
shape, dtype and gradients are compared with torch.testing.assert_close's tolerances for the
dtype, and through the Tensor method where torch has one. A case torch refuses must be refused
by loom too. The few ops without a schema that torch has are called by hand (HAND); every other
registered op is listed in NOT_IN_TORCH with the reason."""
import numpy as np
import pytest
import torch

import loom


class Case:
    """A hand-written case: call(lib, tensors, **attrs) on each sample, for each attrs."""

    def __init__(self, call, attrs=({},), method=None, variants=("non-contiguous",), grad=True, tensors=1):
        self.call, self.method, self.variants, self.grad, self.tensors = call, method, variants, grad, tensors
        self.attrs = attrs


NUMERIC = ("non-contiguous", "0-d", "empty", "int64", "bool", "mixed")
FLOATING = ("non-contiguous", "0-d", "empty")
# The input variants each schema op also runs on (besides the sample as drawn).
VARIANTS = {
    **{name: NUMERIC for name in ("abs", "neg", "sign", "add", "sub", "mul", "div", "maximum", "minimum", "eq", "ne",
                                  "lt", "le", "gt", "ge")},
    **{name: FLOATING for name in ("exp", "log", "tanh", "relu", "sqrt", "rsqrt", "sigmoid", "clone", "softplus",
                                   "gelu")},
    "sum": ("non-contiguous", "0-d", "int64"), "mean": ("non-contiguous", "0-d"), "amax": ("non-contiguous", "0-d"),
    "amin": ("non-contiguous", "0-d"), "logsumexp": ("non-contiguous", "0-d"),
    "argmax": ("non-contiguous", "0-d", "int64"), "argmin": ("non-contiguous", "0-d", "int64"),
}
# Ops torch has no free function for: its Tensor method is the peer.
METHOD_ONLY = {"view", "expand"}
# Ops whose peer is torch.nn.functional's (torch.<name> of the same name takes other arguments).
FUNCTIONAL = {"softplus", "gelu", "layer_norm", "embedding", "dropout", "cross_entropy", "pad", "linear"}
NO_GRADIENT = {"eq", "ne", "lt", "le", "gt", "ge", "argmax", "argmin"}
# Schema parameters torch's function lacks: samples that give them are loom's own (checked by gradcheck).
LOOM_ONLY = {"softmax": {"mask"}, "log_softmax": {"mask"}}
# Methods whose first argument is not the tensor torch puts first.
NOT_AS_METHOD = {"where": "torch's x.where(condition, y) is where(condition, x, y) (test_torch_conventions)"}

# Ops torch has but loom binds without a schema (several results or overloads): by hand.
HAND = {
    "pow_tensor": Case(lambda m, xs, **a: m.pow(xs[0], xs[1]), method="pow", tensors=2),
    "gelu_tanh": Case(lambda m, xs, **a: (torch.nn.functional if m is torch else m).gelu(xs[0], approximate="tanh")),
    "max": Case(lambda m, xs, **a: m.max(xs[0], **a), [{}, {"dim": 1}, {"dim": 0, "keepdim": True}], method="max",
                variants=("non-contiguous", "0-d", "int64")),
    "min": Case(lambda m, xs, **a: m.min(xs[0], **a), [{}, {"dim": 1}, {"dim": 0, "keepdim": True}], method="min",
                variants=("non-contiguous", "0-d", "int64")),
    "split": Case(lambda m, xs, **a: m.split(xs[0], **a), [{"split_size_or_sections": 2, "dim": 1},
                                                           {"split_size_or_sections": [1, 1, 1, 2, 2], "dim": 1}]),
    "to_dtype": Case(lambda m, xs, **a: xs[0].to(torch.float32 if m is torch else loom.float32).double()),
}
SCHEMA_OPS = sorted(name for name in loom.op_names() if loom._loom._signature(name) is not None)

# Registered ops PyTorch has no function for, and why they are not compared here.
NOT_IN_TORCH = {
    "bias_gelu": "fused gelu(x + b); checked against its composition by the test matrix",
    "relu_dropout": "fused dropout(relu(x)); random, and checked against its composition",
    "dropout_add_layer_norm": "fused layer_norm(x + dropout(s)) (the post-norm residual); random, and checked "
    "against its composition",
    "scaled_dot_product_attention": "torch 1.13 lacks it; test_torch_conventions checks its formula",
    "flash_attention": "scaled_dot_product_attention's value computed FlashAttention-2's way (what it calls); the "
                       "test matrix checks it against the composite",
    "pow": "the scalar exponent: pow_tensor and Tensor.__pow__ cover torch.pow",
    "slice": "torch has no function (x[a:b:s] is checked in test_tensor)",
    "sum_to": "an internal reduction (broadcast's gradient)",
    "step": "an internal 0/1 step (relu's derivative)",
    "adam_step_": "the fused optimizer update; test_optim checks it against torch.optim.Adam",
    "sgd_step_": "the fused optimizer update; test_optim checks it",
    "adam_steps_": "adam_step_ over every parameter in one kernel; test_optim checks it gives adam_step_'s bits",
    "label_smoothed_cross_entropy": "the fused loss behind cross_entropy(reduction='mean')",
    **{name: "a backward op, checked as its forward's gradient" for name in (
        "dropout_backward", "embedding_backward", "gelu_backward", "gelu_tanh_backward",
        "label_smoothed_cross_entropy_backward", "layer_norm_backward", "layer_norm_param_grads", "linear_param_grads",
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
    compared = (set(SCHEMA_OPS) - set(NOT_IN_TORCH)) | set(HAND)
    assert names == compared | set(NOT_IN_TORCH), (names - compared - set(NOT_IN_TORCH),
                                                    (compared | set(NOT_IN_TORCH)) - names)
    assert not set(HAND) & set(SCHEMA_OPS), "an op with a schema is generated, not written by hand"


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


COUNTS = {"cases": 0, "refused by both": 0, "ops": set()}


def check(what, call, arrays, variant, dtype, grad, method=None):
    """call(lib, tensors) on both libraries (and method(lib, tensors) for loom, against torch's
    call): the same values, shapes, dtypes and gradients, or both refusing."""
    ours_in, theirs_in, leaves = to_libraries(arrays, variant, grad)
    try:
        theirs = call(torch, theirs_in)
    except (RuntimeError, IndexError, ValueError, TypeError) as refusal:
        try:
            call(loom, ours_in)
        except Exception:
            COUNTS["refused by both"] += 1
            return
        pytest.fail(f"{what}: torch refuses ({str(refusal).splitlines()[0]}) and loom does not")
    ours = call(loom, ours_in)
    compare(ours, theirs, dtype, what)
    if grad and backward_both(ours, theirs, len(what)):
        for lt, tt in leaves:
            assert (lt.grad is None) == (tt.grad is None), (what, "gradient")
            if tt.grad is not None:
                compare(lt.grad, tt.grad, dtype, what + " gradient")
    if method:
        ours_in, theirs_in, _ = to_libraries(arrays, variant, False)
        compare(method(ours_in), call(torch, theirs_in), dtype, what + " as a method")


def run_case(name, case, arrays, variant, dtype, attrs, label):
    what = f"{name} [{label}] {variant} {np.dtype(dtype).name} {attrs}"
    COUNTS["cases"] += 1
    COUNTS["ops"].add(name)
    if (name, variant) in REFUSED:
        ours_in, theirs_in, _ = to_libraries(arrays, variant, False)
        with pytest.raises(loom.Error):
            case.call(loom, ours_in, **attrs)
        case.call(torch, theirs_in, **attrs)  # still accepted there, or the entry goes
        return
    method = None
    if case.method:
        method = (lambda xs: getattr(xs[0], case.method)(*xs[1:case.tensors], **attrs))
    check(what, lambda m, xs: case.call(m, xs, **attrs), arrays, variant, dtype,
          case.grad and variant not in ("int64", "bool"), method)


def arguments(signature, tensors, attrs):
    """The sample's values by parameter, as the registry's sample_call fills them: the tensors
    in the tensor parameters in order (a Tensor[] takes the rest), the attributes by name."""
    values, rest = {}, list(tensors)
    for p in signature:
        if p["type"] == "Tensor" and rest:
            values[p["name"]] = rest.pop(0)
        elif p["type"] == "Tensor[]":
            values[p["name"]], rest = rest, []
        elif p["name"] in attrs:
            values[p["name"]] = attrs[p["name"]]
    return values


def split_call(signature, values, by_keyword):
    """(positional, keywords): the leading given parameters by position unless by_keyword."""
    args, kwargs = [], {}
    for p in signature:
        if p["name"] not in values:
            by_keyword = True
            continue
        if by_keyword or p["keyword_only"]:
            kwargs[p["name"]] = values[p["name"]]
        else:
            args.append(values[p["name"]])
    return args, kwargs


def peer(lib, name):
    """lib's function for the op: torch's of the same name (nn.functional's for FUNCTIONAL),
    loom.<name>; for METHOD_ONLY ops, the first argument's method."""
    if name in METHOD_ONLY:
        return lambda first, *args, **kwargs: getattr(first, name)(*args, **kwargs)
    if lib is torch and name in FUNCTIONAL:
        return getattr(torch.nn.functional, name)
    return getattr(lib, name)


def run_schema_case(name, signature, arrays, variant, dtype, attrs, label):
    """One generated case: the op called as both libraries' function, by position and by
    keyword, and as the Tensor method where torch has one (with sizes one by one too)."""
    what = f"{name} [{label}] {variant} {np.dtype(dtype).name} {attrs}"
    COUNTS["cases"] += 1
    COUNTS["ops"].add(name)

    def call(by_keyword):
        def made(lib, tensors):
            args, kwargs = split_call(signature, arguments(signature, tensors, attrs), by_keyword)
            return peer(lib, name)(*args, **kwargs)
        return made

    if (name, variant) in REFUSED:
        ours_in, theirs_in, _ = to_libraries(arrays, variant, False)
        with pytest.raises(loom.Error):
            call(False)(loom, ours_in)
        call(False)(torch, theirs_in)  # still accepted there, or the entry goes
        return
    method = None
    first = signature[0]
    if first["type"] == "Tensor" and name not in NOT_AS_METHOD and name not in METHOD_ONLY \
            and hasattr(torch.Tensor, name):
        def method(tensors):
            args, kwargs = split_call(signature, arguments(signature, tensors, attrs), False)
            return getattr(args[0], name)(*args[1:], **kwargs)
    grad = name not in NO_GRADIENT and variant not in ("int64", "bool")
    check(what, call(False), arrays, variant, dtype, grad, method)
    check(what + " by keyword", call(True), arrays, variant, dtype, False)
    sizes = [p for p in signature[1:] if not p["keyword_only"]]
    if len(sizes) == 1 and sizes[0]["type"] == "int[]" and sizes[0]["name"] in attrs and \
            isinstance(attrs[sizes[0]["name"]], list) and len(attrs[sizes[0]["name"]]) > 1:
        one_by_one = (lambda lib, xs: getattr(xs[0], name)(*attrs[sizes[0]["name"]]))  # x.reshape(7, 2, 2)
        check(what + " sizes one by one", one_by_one, arrays, variant, dtype, False)


def sample_arrays(name):
    return [(label, [t.detach().numpy() if t.dtype != loom.bool else t.numpy() for t in inputs], attrs)
            for label, inputs, attrs in loom._loom._sample_inputs(name)]


def variants_of(arrays, variants):
    for dtype in (np.float64, np.float32):
        for variant in ("sample",) + tuple(variants):
            if variant == "0-d" and any(a.ndim == 0 for a in arrays):
                continue
            yield dtype, variant, variant_inputs(arrays, variant, dtype)


@pytest.mark.parametrize("name", [name for name in SCHEMA_OPS if name not in NOT_IN_TORCH])
def test_op_matches_pytorch(name):
    signature = loom._loom._signature(name)
    ran = 0
    for label, arrays, attrs in sample_arrays(name):
        if attrs is None:  # a sample with its own call: gradcheck's, not torch's
            continue
        given = {p["name"] for p in signature[:len(arrays)]} | set(attrs)
        if given & LOOM_ONLY.get(name, set()) or (len(arrays) > sum(p["type"] == "Tensor" for p in signature)
                                                   and not any(p["type"] == "Tensor[]" for p in signature)):
            continue
        if name in LOOM_ONLY and len(arrays) > 1:  # the extra tensor is loom's own argument (softmax's mask)
            continue
        for dtype, variant, inputs in variants_of(arrays, VARIANTS.get(name, ("non-contiguous",))):
            run_schema_case(name, signature, inputs, variant, dtype, attrs, label)
            ran += 1
    assert ran > 0, f"{name}: no sample calls it through its schema"


@pytest.mark.parametrize("name", sorted(HAND))
def test_hand_written_op_matches_pytorch(name):
    case = HAND[name]
    for label, arrays, _ in sample_arrays(name):
        for dtype, variant, inputs in variants_of(arrays, case.variants):
            for attrs in case.attrs:
                run_case(name, case, inputs, variant, dtype, attrs, label)


def test_conformance_size():
    """The suite's size, printed for the docs (pytest -s), and a floor it must not fall under."""
    print(f"conformance: {len(COUNTS['ops'])} ops, {COUNTS['cases']} cases, {COUNTS['refused by both']} refused by both")
    if COUNTS["cases"]:  # run with the rest of the file
        assert len(COUNTS["ops"]) >= 60
