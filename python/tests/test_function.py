"""Ops written in Python: in graphs, checked by the registry's own gradcheck (float64)."""
import numpy as np
import pytest

import loom


class Cube(loom.Function):
    @staticmethod
    def forward(ctx, x):
        ctx.save_for_backward(x)
        return x * x * x

    @staticmethod
    def backward(ctx, g):
        (x,) = ctx.saved_tensors
        return 3 * x * x * g


class WrongCube(Cube):
    @staticmethod
    def backward(ctx, g):
        (x,) = ctx.saved_tensors
        return 2 * x * x * g  # the derivative of x^3 is 3x^2: gradcheck must catch this


class ScaledSoftmax(loom.Function):
    """Two inputs, one not a tensor."""

    @staticmethod
    def forward(ctx, x, scale):
        y = (x * scale).softmax(-1)
        ctx.save_for_backward(y)
        ctx.scale = scale
        return y

    @staticmethod
    def backward(ctx, g):
        (y,) = ctx.saved_tensors
        return (y * (g - (g * y).sum(-1, keepdim=True))) * ctx.scale, None


def leaf(shape, seed=0):
    return loom.tensor(np.random.default_rng(seed).standard_normal(shape), requires_grad=True)


def test_a_python_op_joins_the_graph():
    x = leaf(4)
    y = (Cube.apply(x) + x).sum()
    assert y.grad_fn is not None
    y.backward()
    a = x.detach().numpy()
    np.testing.assert_allclose(x.grad.numpy(), 3 * a * a + 1, rtol=1e-14)


def test_gradcheck_passes_a_right_backward_and_catches_a_wrong_one():
    assert loom.gradcheck(Cube.apply, [leaf(5)])
    assert loom.gradgradcheck(Cube.apply, [leaf(5)])
    assert loom.gradcheck(lambda x: ScaledSoftmax.apply(x, 0.7), [leaf((3, 4))])
    assert not loom.gradcheck(WrongCube.apply, [leaf(5)], raise_exception=False)
    with pytest.raises(loom.Error, match="gradcheck failed: max abs error"):
        loom.gradcheck(WrongCube.apply, [leaf(5)])


def test_gradcheck_fast_mode_as_torch_s():
    # One random projection per input, torch.autograd.gradcheck(fast_mode=True)'s check.
    assert loom.gradcheck(Cube.apply, [leaf(5)], fast_mode=True)
    assert loom.gradgradcheck(Cube.apply, [leaf(5)], fast_mode=True)
    assert loom.gradcheck(lambda x: ScaledSoftmax.apply(x, 0.7), [leaf((3, 4))], fast_mode=True)
    assert not loom.gradcheck(WrongCube.apply, [leaf(5)], raise_exception=False, fast_mode=True)


def test_a_backward_returning_the_wrong_count_is_named():
    class Bad(loom.Function):
        @staticmethod
        def forward(ctx, x):
            return x * 2

        @staticmethod
        def backward(ctx, g):
            return g, g

    with pytest.raises(ValueError, match="Bad.backward returned 2 gradients for 1"):
        Bad.apply(leaf(3)).sum().backward()
