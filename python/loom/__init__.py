"""loom: reverse-mode automatic differentiation you can read, from Python.

Tensors and autograd are shaped like PyTorch's (loom.tensor, .backward(), .grad,
loom.no_grad(), loom.grad); memory is shared with NumPy and PyTorch, never copied
(.numpy(), loom.from_numpy, DLPack); ops written in Python (loom.Function) join the
graph and are checked by the same gradcheck as the C++ registry.
"""
import collections as _collections
import contextlib as _contextlib
import os as _os
import re as _re
import sys as _sys
import functools as _functools
import builtins as _builtins
import math as _math

import numpy as _np

from . import _loom
from ._loom import nn, optim, models, data  # noqa: F401 (loom.nn.Linear, loom.optim.Adam, loom.models.load, loom.data.Store)
from ._loom import (Error, Tensor, dtype, ops, from_numpy, from_dlpack, zeros, ones, full, arange, rand, randn,
                    manual_seed, is_grad_enabled, set_grad_enabled, is_anomaly_enabled, set_anomaly_enabled, gradcheck,
                    gradgradcheck, op_names, GradientTrace)

# Every op with a schema is bound from it with torch's arguments (loom.sum, loom.layer_norm...);
# those without one reach the top level from loom.ops further down.
for _name in op_names():
    if hasattr(_loom, _name):
        globals()[_name] = getattr(_loom, _name)



def _argument_problem(signature, args, kwargs):
    """Which argument a pybind11 signature line "(input: loom._loom.Tensor, dim: int = -1, ...)"
    refuses, as "argument 'dim' must be int, got str ('x')"; None when none stands out."""
    params = [p.split(":", 1) for p in _re.findall(r"(\w+: [\w.\[\], ]+?)(?: = [^,]+)?(?:, |\)$)", signature)]
    checks = {"loom._loom.Tensor": lambda v: isinstance(v, Tensor), "int": lambda v: isinstance(v, int),
              "float": lambda v: isinstance(v, (int, float)), "bool": lambda v: isinstance(v, (bool, int)),
              "str": lambda v: isinstance(v, str), "object": lambda v: True,
              "List[int]": lambda v: isinstance(v, (list, tuple)) and all(isinstance(x, int) for x in v),
              "List[loom._loom.Tensor]": lambda v: isinstance(v, (list, tuple)) and all(isinstance(x, Tensor)
                                                                                     for x in v)}
    given = dict(zip((name for name, _ in params), args))
    given.update(kwargs)
    for name, kind in params:
        kind = kind.strip()
        if name in given and not checks.get(kind, lambda v: True)(given[name]):
            value = repr(given[name])
            shown = kind.replace("loom._loom.", "loom.")
            return f"argument '{name}' must be {shown}, got {type(given[name]).__name__} ({value[:40]})"
    return None


def _naming_arguments(function):
    """`function` (a pybind11 builtin), whose TypeError on arguments of the wrong type
    names the argument and what it got instead of only listing the signature."""
    @_functools.wraps(function)
    def call(*args, **kwargs):
        try:
            return function(*args, **kwargs)
        except TypeError as e:
            text = str(e)
            if "incompatible function arguments" not in text:
                raise
            signature = text.split("\n")[1].strip().split(". ", 1)[-1].split(" -> ")[0]
            problem = _argument_problem(signature, args, kwargs)
            if problem is None:
                raise
            raise TypeError(f"loom.{function.__name__}: {problem}") from None
    return call


# The hand-bound functions (the others come from their ops' schemas, which name the argument themselves).
for _name in ("zeros", "ones", "full", "arange", "rand", "randn", "manual_seed", "split"):
    globals()[_name] = _naming_arguments(globals()[_name])

float32, float64, int32, int64, bfloat16 = dtype.float32, dtype.float64, dtype.int32, dtype.int64, dtype.bfloat16
bool = dtype.bool  # noqa: A001 (loom.bool, as torch.bool)

# torch.max and torch.min: over everything, (values, indices) along a dim, or elementwise
# against another tensor. Along a dim the gradient goes to the index found (gather's),
# over everything it is shared among equal maxima (amax's), as in PyTorch.
_ValuesIndices = _collections.namedtuple("values_indices", ["values", "indices"])


def _extreme(largest):
    extreme, index_of = (amax, argmax) if largest else (amin, argmin)

    def reduce(input, dim=None, keepdim=False):
        if isinstance(dim, Tensor):
            return (_loom.ops.maximum if largest else _loom.ops.minimum)(input, dim)
        if dim is None:
            return extreme(input)
        indices = index_of(input, dim, keepdim)
        if input.ndim == 0:  # its own extreme, at index 0 (index_of checked the dim)
            return _ValuesIndices(input * 1, indices)
        values = gather(input, dim, indices if keepdim else indices.unsqueeze(dim))
        return _ValuesIndices(values if keepdim else values.squeeze(dim), indices)
    reduce.__name__ = "max" if largest else "min"
    reduce.__doc__ = f"""{reduce.__name__}(input), {reduce.__name__}(input, dim, keepdim=False) -> (values, indices),
    or {reduce.__name__}(input, other): as torch.{reduce.__name__}."""
    return reduce


max, min = _extreme(True), _extreme(False)  # noqa: A001 (loom.max, as torch.max)


clip = clamp


# ---- PyTorch's signatures and conventions where loom's C++ ops differ ----
# (the C++ op, and loom.ops.<name>, keep loom's: see docs/python.md's list of differences)

def pow(input, exponent):
    """``input ** exponent``, as torch.pow: either may be a number; a tensor exponent gets its gradient too."""
    if isinstance(input, Tensor):
        return input ** exponent
    if not isinstance(exponent, Tensor):
        raise TypeError(f"loom.pow: input or exponent must be a loom.Tensor, got {type(input).__name__} and "
                        f"{type(exponent).__name__}")
    return exponent.__rpow__(input)


def arange(start, end=None, step=1, *, dtype=None):
    """arange(end) or arange(start, end, step=1), as torch.arange: int64 when every bound is an int,
    else float32."""
    if end is None:
        start, end = 0, start
    if step == 0:
        raise ValueError("loom.arange: step must be nonzero")
    count = _builtins.max(0, _math.ceil((end - start) / step))
    integral = all(isinstance(v, int) for v in (start, end, step))
    if dtype is None:
        dtype = int64 if integral else float32
    if integral and dtype in (int32, int64) and start == 0 and step == 1:
        return _loom.arange(count, dtype=dtype)
    positions = _loom.arange(count, dtype=float64)
    return (positions * float(step) + float(start)).to(dtype)






def split(tensor, split_size_or_sections, dim=0):
    """Pieces of split_size (the last may be smaller), or of the sizes listed, as torch.split."""
    if isinstance(split_size_or_sections, int):
        return tuple(_loom.split(tensor, split_size_or_sections, dim))
    sizes = list(split_size_or_sections)
    if _builtins.sum(sizes) != tensor.shape[dim] or _builtins.min(sizes, default=0) < 0:
        raise RuntimeError(f"loom.split: the sizes {sizes} must be >= 0 and add up to {tensor.shape[dim]} (dim {dim})")
    pieces, start = [], 0
    for size in sizes:
        pieces.append(tensor.narrow(dim, start, size))
        start += size
    return tuple(pieces)



# Every registered op reaches the top level by its registered call, unless bound
# above with its attributes (sum's dim, softmax's dim...). These registered calls fix
# attributes to their test sample's (a shape, p, a learning rate): they stay in loom.ops,
# where loom.explain shows them, so that no top-level call silently uses those values.
_SAMPLE_ATTRIBUTES = {"adam_step_", "adam_steps_", "sgd_step_", "dropout_backward", "embedding_backward", "slice",
                      "slice_backward", "sum_to", "to_dtype", "relu_dropout", "relu_dropout_backward",
                      "label_smoothed_cross_entropy", "label_smoothed_cross_entropy_backward"}
for _name in ops.__all__:
    if _name not in globals() and _name not in _SAMPLE_ATTRIBUTES:
        globals()[_name] = getattr(ops, _name)

_NUMPY_DTYPES = {_np.dtype("float32"): float32, _np.dtype("float64"): float64, _np.dtype("int32"): int32,
                 _np.dtype("int64"): int64, _np.dtype("bool"): bool}


def tensor(data, dtype=None, requires_grad=False):
    """A new tensor holding a copy of `data` (a number, nested lists, an ndarray or a Tensor).
    Python floats become float32 and ints int64, as in PyTorch; an ndarray keeps its dtype."""
    if isinstance(data, Tensor):
        data = data.detach().numpy()
    keep_dtype = isinstance(data, (_np.ndarray, _np.generic))  # NumPy arrays and scalars keep theirs, as torch
    array = _np.array(data)
    if dtype is None:
        if array.dtype.kind == "f" and not keep_dtype:
            array = array.astype(_np.float32)
        elif array.dtype.kind in "iu" and not keep_dtype:
            array = array.astype(_np.int64)
    if array.dtype not in _NUMPY_DTYPES:
        raise TypeError(f"loom.tensor: data of NumPy dtype {array.dtype} has no loom dtype "
                        "(float32, float64, int32, int64, bool)")
    t = from_numpy(_np.require(array, requirements="C"))  # ascontiguousarray would make a 0-d array 1-d
    if dtype is not None and t.dtype != dtype:
        t = t.to(dtype)
    return t.requires_grad_(requires_grad)


def _tolist(self):
    """The values as nested Python lists (a number for a 0-d tensor)."""
    return self.detach().to("cpu").numpy().tolist()


Tensor.tolist = _tolist
Tensor.__array__ = lambda self, dtype=None: _np.asarray(self.detach().numpy(), dtype=dtype)


class _GradMode(_contextlib.ContextDecorator):
    def __init__(self, enabled):
        self._enabled = enabled

    def __enter__(self):
        self._previous = is_grad_enabled()
        set_grad_enabled(self._enabled)

    def __exit__(self, *exc):
        set_grad_enabled(self._previous)
        return False


def no_grad():
    """`with loom.no_grad():` (or as a decorator): ops record no graph inside."""
    return _GradMode(False)


def enable_grad():
    """`with loom.enable_grad():` records again inside a no_grad block."""
    return _GradMode(True)


def _user_line():
    """The innermost caller outside loom's own package, as "file:line (function)":
    what anomaly errors name (the C++ side asks, in anomaly mode only)."""
    package = _os.path.dirname(_os.path.abspath(__file__))
    frame = _sys._getframe(1)
    while frame is not None and _os.path.abspath(frame.f_code.co_filename).startswith(package + _os.sep):
        frame = frame.f_back
    if frame is None:
        return ""
    return f"{frame.f_code.co_filename}:{frame.f_lineno} ({frame.f_code.co_name})"


@_contextlib.contextmanager
def detect_anomaly():
    """Inside, every op checks its output and every backward its gradients for NaN/Inf,
    and raises loom.Error naming the op that made the first one and the Python line
    that called it."""
    previous = is_anomaly_enabled()
    set_anomaly_enabled(True)
    try:
        yield
    finally:
        set_anomaly_enabled(previous)


def grad(outputs, inputs, grad_outputs=None, retain_graph=False, create_graph=False, allow_unused=False):
    """d(outputs)/d(inputs) as a tuple, without touching .grad (torch.autograd.grad).
    create_graph=True records the backward itself, for second derivatives."""
    as_list = lambda x: [x] if isinstance(x, Tensor) else list(x)  # noqa: E731
    seeds = None if grad_outputs is None else as_list(grad_outputs)
    return _loom.grad(as_list(outputs), as_list(inputs), seeds, retain_graph, create_graph, allow_unused)


class FunctionContext:
    """What forward leaves for backward: ``ctx.save_for_backward(*tensors)``, ``ctx.saved_tensors``,
    and any attribute (ctx.dim = dim)."""

    def save_for_backward(self, *tensors):
        self.saved_tensors = tensors


class Function:
    """An op written in Python, as torch.autograd.Function::

        class Square(loom.Function):
            @staticmethod
            def forward(ctx, x):
                ctx.save_for_backward(x)
                return x * x

            @staticmethod
            def backward(ctx, g):
                (x,) = ctx.saved_tensors
                return 2 * x * g

        y = Square.apply(x)

    forward runs without recording; backward gets dL/dy and returns one gradient (or None)
    per forward argument. It is written with loom ops, so create_graph=True differentiates
    it again (gradgradcheck). Non-tensor arguments get None as their gradient."""

    @classmethod
    def apply(cls, *args):
        ctx = FunctionContext()
        with no_grad():
            output = cls.forward(ctx, *args)
        if not isinstance(output, Tensor):
            raise TypeError(f"{cls.__name__}.forward must return a loom.Tensor, got {type(output).__name__}")
        positions = [i for i, a in enumerate(args) if isinstance(a, Tensor)]

        def backward(g):
            grads = cls.backward(ctx, g)
            grads = grads if isinstance(grads, (tuple, list)) else (grads,)
            if len(grads) != len(args):
                raise ValueError(f"{cls.__name__}.backward returned {len(grads)} gradients for {len(args)} "
                                 "forward arguments")
            return tuple(grads[i] for i in positions)

        return _loom._record_python_op(cls.__name__, [args[i] for i in positions], output, backward)


class Explanation:
    """loom.explain(op): the op's formulas, one of its samples, and both Jacobians of
    gradcheck (analytic from backward, numeric from central differences) as arrays."""

    def __init__(self, fields):
        self.__dict__.update(fields)

    def __repr__(self):
        return self.text

    def _repr_html_(self):
        import html
        rows = "".join(f"<tr><th style='text-align:left'>{k}</th><td style='text-align:left'>{html.escape(str(v))}"
                       "</td></tr>" for k, v in [("forward", self.formula), ("derivative", self.derivative),
                                                  ("shape", self.shape_rule), ("sample", self.sample)])
        table = f"<table>{rows}</table>"
        if self.gradcheck is not None:
            table += "<pre>" + html.escape(self.text) + "</pre>"
        return table


def explain(op, sample=None):
    """What `loom explain OP` prints, as values: .formula, .derivative, .shape_rule, .inputs,
    .output, .gradcheck['analytic'] and ['numeric'] (NumPy arrays), and .gradgradcheck."""
    return Explanation(_loom._explain(op, sample))


class Graph:
    """The autograd graph behind a tensor, drawn by Graphviz; in a notebook it shows itself
    (SVG). Made inside `with loom.trace_gradients() as t:` and given t, its edges carry the
    norm of the gradient that flowed along them."""

    def __init__(self, root, trace=None):
        self.dot = _loom.graph_dot(root, trace)

    def svg(self):
        return _loom.svg_of_dot(self.dot)

    def _repr_svg_(self):
        return self.svg()


def graph(root, trace=None):
    return Graph(root, trace)


def trace_gradients():
    """`with loom.trace_gradients() as trace:` records the gradient norm along every edge of
    the backward passes inside, for loom.graph(loss, trace)."""
    return GradientTrace()


# Tensor methods PyTorch code calls: each the function of the same name, the tensor first.
def _as_method(function):
    @_functools.wraps(function)
    def method(self, *args, **kwargs):
        return function(self, *args, **kwargs)
    return method


for _name in ("matmul", "triu", "tril", "clamp", "clip", "masked_fill", "gather", "index_select", "split", "chunk",
              "argmax", "argmin", "amin", "max", "min", "rsqrt", "sign", "eq", "ne", "lt", "le", "gt", "ge", "index_add",
              "scatter_add", "maximum", "minimum", "softmax", "log_softmax"):
    if not hasattr(Tensor, _name):
        setattr(Tensor, _name, _as_method(globals()[_name]))
Tensor.add, Tensor.sub, Tensor.mul, Tensor.div = Tensor.__add__, Tensor.__sub__, Tensor.__mul__, Tensor.__truediv__
Tensor.neg = Tensor.__neg__


def _flatten(self, start_dim=0, end_dim=-1):
    """The dims start_dim..end_dim made one, as torch.Tensor.flatten."""
    if self.ndim == 0:
        return self.reshape([1])
    for d in (start_dim, end_dim):  # as torch: out of range is an error, not wrapped around
        if not -self.ndim <= d < self.ndim:
            raise IndexError(f"Dimension out of range (expected to be in range of [{-self.ndim}, {self.ndim - 1}], "
                             f"but got {d})")
    start, end = start_dim % self.ndim, end_dim % self.ndim
    if start > end:
        raise RuntimeError("flatten() has invalid args: start_dim cannot come after end_dim")
    shape = list(self.shape)
    return self.reshape(shape[:start] + [_math.prod(shape[start:end + 1])] + shape[end + 1:])


Tensor.flatten = _flatten




def _repeat(self, *sizes):
    """The tensor tiled sizes[i] times along each dim, as torch.Tensor.repeat."""
    sizes = list(sizes[0]) if len(sizes) == 1 and not isinstance(sizes[0], int) else list(sizes)
    if len(sizes) < self.ndim:
        raise RuntimeError(f"repeat: {len(sizes)} repeats for a tensor of {self.ndim} dims (give at least one "
                           "per dim)")
    shape = [1] * (len(sizes) - self.ndim) + list(self.shape)
    interleaved = [v for s in shape for v in (1, s)]
    tiled = [v for r, s in zip(sizes, shape) for v in (r, s)]
    return self.reshape(interleaved).expand(tiled).reshape([r * s for r, s in zip(sizes, shape)])


Tensor.repeat, Tensor.split = _repeat, split
Tensor.where = lambda self, condition, other: where(condition, self, other)  # x.where(c, y): torch.where(c, x, y)
