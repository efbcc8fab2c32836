"""Tensors and autograd from Python: values against NumPy and gradients against PyTorch, in float64."""
import numpy as np
import pytest
import torch

import loom


def both(array):
    """The same float64 values as a loom leaf and a torch leaf."""
    return loom.tensor(array, requires_grad=True), torch.tensor(array, requires_grad=True)


def test_tensor_from_lists_takes_pytorch_dtypes():
    assert loom.tensor([1.5, 2.0]).dtype == loom.float32
    assert loom.tensor([[1, 2], [3, 4]]).dtype == loom.int64
    assert loom.tensor([True, False]).dtype == loom.bool
    assert loom.tensor(np.zeros(3)).dtype == loom.float64  # an ndarray keeps its dtype
    assert loom.tensor([1, 2], dtype=loom.float64).dtype == loom.float64
    t = loom.tensor([[1.0, 2.0, 3.0], [4.0, 5.0, 6.0]])
    assert t.shape == (2, 3) and t.ndim == 2 and t.numel() == 6 and len(t) == 2
    assert t.tolist() == [[1.0, 2.0, 3.0], [4.0, 5.0, 6.0]]
    assert t.sum().item() == 21.0


def test_a_number_makes_a_0d_tensor_as_in_pytorch():
    for value in (3.14, 7, True):
        assert loom.tensor(value).shape == torch.tensor(value).shape == ()
    x = loom.tensor(3.0, dtype=loom.float64, requires_grad=True)
    y = x * x + 2 * x
    y.backward()
    assert y.shape == () and x.grad.shape == () and x.grad.item() == 8.0
    (g,) = loom.grad(x * x, [x], grad_outputs=loom.tensor(3.0, dtype=loom.float64))
    assert g.shape == () and g.item() == 18.0


def test_indexing_errors_and_iteration_as_in_pytorch():
    rows = [[1.0, 2.0, 3.0], [4.0, 5.0, 6.0], [7.0, 8.0, 9.0], [1.0, 1.0, 1.0]]
    t, reference = loom.tensor(rows), torch.tensor(rows)
    for key in [(1, 3), (5,), (-5,), (0, 0, 0)]:
        with pytest.raises(IndexError) as ours:
            t[key]
        with pytest.raises(IndexError) as theirs:
            reference[key]
        assert str(ours.value) == str(theirs.value)
    with pytest.raises(IndexError, match="a single ellipsis"):  # as NumPy and torch 2 (Debian's 1.13 accepts it)
        t[..., ...]
    assert t[np.int64(2)].tolist() == reference[np.int64(2)].tolist()  # NumPy integers index too
    assert t[-1, np.int32(0)].item() == 1.0
    a, b, c, d = t  # unpacking and list() iterate over dim 0
    assert b.tolist() == rows[1] and [r.tolist() for r in t] == rows
    scalar = loom.tensor(1.5)
    with pytest.raises(TypeError, match="len\\(\\) of a 0-d tensor"):
        len(scalar)
    with pytest.raises(TypeError, match="iteration over a 0-d tensor"):
        iter(scalar)


def test_factories_take_sizes_as_pytorch_does():
    for factory in ("zeros", "ones", "rand", "randn"):
        ours, theirs = getattr(loom, factory), getattr(torch, factory)
        for size in [(2, 3), ([2, 3],), ((4,),), (torch.Size([2, 2]),), ([],), (np.int64(3), 2)]:
            assert ours(*size).shape == tuple(theirs(*size).shape), (factory, size)
        with pytest.raises(TypeError, match="a size is required"):
            ours()
        with pytest.raises(TypeError, match=f"loom.{factory}: size must be ints or a sequence of ints, got float"):
            ours(2.5)
        with pytest.raises(TypeError, match="got str"):
            ours(2, "3")
    assert loom.zeros(2, dtype=loom.float64).dtype == loom.float64
    assert loom.randn(2, 2, requires_grad=True).requires_grad


def test_max_min_argmax_clamp_chunk_flatten_as_in_pytorch():
    a = np.array([[1.0, 5.0, 2.0], [7.0, 0.0, 7.0]])  # a tie in row 1
    for reduce in ("max", "min"):
        x, t = both(a)
        ours, theirs = getattr(loom, reduce), getattr(torch, reduce)
        assert ours(x).shape == () and ours(x).item() == theirs(t).item()
        for dim, keepdim in [(1, False), (0, True), (-1, False)]:
            (v, i), (tv, ti) = ours(x, dim, keepdim=keepdim), theirs(t, dim, keepdim=keepdim)
            assert v.shape == tuple(tv.shape) and v.tolist() == tv.tolist() and i.tolist() == ti.tolist()
        v, tv = getattr(x, reduce)(dim=1).values, getattr(t, reduce)(dim=1).values
        v.sum().backward()
        tv.sum().backward()
        np.testing.assert_array_equal(x.grad.numpy(), t.grad.numpy())  # to the index found
        x, t = both(a)
        ours(x).backward()
        theirs(t).backward()
        np.testing.assert_array_equal(x.grad.numpy(), t.grad.numpy())  # shared among equal extremes
        other = np.full((2, 3), 4.0)
        assert ours(x, loom.tensor(other)).tolist() == theirs(t, torch.tensor(other)).tolist()
    x, t = both(a)
    for dim in (None, 0, 1):
        assert x.argmax(dim).tolist() == t.argmax(dim).tolist() and x.argmin(dim).tolist() == t.argmin(dim).tolist()
    assert loom.argmax(x, keepdim=True).shape == tuple(torch.argmax(t, keepdim=True).shape)
    for bounds in [{"max": 3.0}, {"min": 2.0}, {"min": 1.0, "max": 6.0}]:
        x, t = both(a)
        x.clamp(**bounds).sum().backward()
        t.clamp(**bounds).sum().backward()
        assert x.clip(**bounds).tolist() == t.clip(**bounds).tolist()
        np.testing.assert_array_equal(x.grad.numpy(), t.grad.numpy())
    with pytest.raises(loom.Error, match="at least one of 'min' or 'max'"):
        x.clamp()
    for chunks, dim in [(2, 1), (3, 0), (4, -1)]:
        assert [c.tolist() for c in x.chunk(chunks, dim)] == [c.tolist() for c in t.chunk(chunks, dim)]
    for start, end in [(0, -1), (1, -1), (0, 1)]:
        z = np.zeros((2, 3, 4))
        assert loom.tensor(z).flatten(start, end).shape == tuple(torch.tensor(z).flatten(start, end).shape)
    for start, end, error in [(5, -1, IndexError), (0, -4, IndexError), (2, 1, RuntimeError)]:
        with pytest.raises(error) as ours:
            loom.zeros(2, 3, 4).flatten(start, end)
        with pytest.raises(error) as theirs:
            torch.zeros(2, 3, 4).flatten(start, end)
        assert str(ours.value) == str(theirs.value)
    assert x.add(1).mul(2).sub(x).div(4).neg().tolist() == t.add(1).mul(2).sub(t).div(4).neg().tolist()
    assert x.matmul(x.transpose(0, 1)).tolist() == t.matmul(t.transpose(0, 1)).tolist()
    assert x.triu(1).tolist() == t.triu(1).tolist() and x.tril().tolist() == t.tril().tolist()


def test_registry_calls_check_their_tensor_count():
    x = loom.tensor([[1.0, 5.0, 2.0], [7.0, 0.0, 7.0]])
    with pytest.raises(TypeError, match="loom.ops.add: takes 2 tensors, got 1 argument"):
        loom.ops.add(x)
    with pytest.raises(TypeError, match="loom.ops.exp: takes 1 tensor, got 2 arguments"):
        loom.ops.exp(x, x)
    with pytest.raises(IndexError):  # its fixed sample call wants a third piece: an error, not a crash
        loom.ops.chunk(x)


def test_forward_values_match_numpy(rng):
    a, b = rng.standard_normal((3, 4)), rng.standard_normal((4, 5))
    x, y = loom.tensor(a), loom.tensor(b)
    np.testing.assert_allclose((x @ y).numpy(), a @ b, rtol=1e-12)
    np.testing.assert_allclose(x.exp().numpy(), np.exp(a), rtol=1e-14)
    np.testing.assert_allclose(loom.tanh(x).numpy(), np.tanh(a), rtol=1e-14)
    np.testing.assert_allclose(x.sum(1).numpy(), a.sum(1), rtol=1e-13)
    np.testing.assert_allclose(x.mean((0, 1), keepdim=True).numpy(), a.mean(keepdims=True), rtol=1e-13)
    e = np.exp(a - a.max(-1, keepdims=True))
    np.testing.assert_allclose(x.softmax(-1).numpy(), e / e.sum(-1, keepdims=True), rtol=1e-13)
    np.testing.assert_allclose((2.0 - x * 3 / (x.abs() + 1)).numpy(), 2.0 - a * 3 / (np.abs(a) + 1), rtol=1e-13)
    np.testing.assert_allclose(x[1:, ::2].numpy(), a[1:, ::2])
    np.testing.assert_allclose(x[None, ..., 2].numpy(), a[None, ..., 2])
    assert (x > 0).dtype == loom.bool
    np.testing.assert_array_equal((x > 0).numpy(), a > 0)


def test_gradients_match_pytorch(rng):
    a, w = rng.standard_normal((4, 3)), rng.standard_normal((3, 2))
    (x, tx), (v, tv) = both(a), both(w)
    loss = (loom.tanh(x @ v).softmax(-1) * loom.tensor(np.arange(8.0).reshape(4, 2))).sum()
    tloss = (torch.tanh(tx @ tv).softmax(-1) * torch.arange(8.0, dtype=torch.float64).reshape(4, 2)).sum()
    loss.backward()
    tloss.backward()
    assert loss.item() == pytest.approx(tloss.item(), rel=1e-13)
    np.testing.assert_allclose(x.grad.numpy(), tx.grad.numpy(), rtol=1e-12)
    np.testing.assert_allclose(v.grad.numpy(), tv.grad.numpy(), rtol=1e-12)
    assert x.is_leaf and not loss.is_leaf and loss.grad_fn is not None


def test_cross_entropy_matches_pytorch(rng):
    logits = rng.standard_normal((5, 7))
    target = np.array([0, 3, 6, 2, -100])
    x, tx = both(logits)
    loss = loom.cross_entropy(x, loom.tensor(target), label_smoothing=0.1)
    tloss = torch.nn.functional.cross_entropy(tx, torch.tensor(target), label_smoothing=0.1)
    loss.backward()
    tloss.backward()
    assert loss.item() == pytest.approx(tloss.item(), rel=1e-12)
    np.testing.assert_allclose(x.grad.numpy(), tx.grad.numpy(), rtol=1e-10, atol=1e-15)


def test_no_grad_and_detach():
    x = loom.tensor([1.0, 2.0], requires_grad=True)
    with loom.no_grad():
        y = x * 2
    assert not y.requires_grad and y.grad_fn is None
    assert loom.is_grad_enabled()

    @loom.no_grad()
    def doubled(t):
        return t * 2

    assert not doubled(x).requires_grad
    assert not x.detach().requires_grad and (x * 2).requires_grad


def test_double_backward_matches_pytorch(rng):
    a = rng.standard_normal(5)
    x, tx = both(a)
    (g,) = loom.grad((x ** 3).sum(), x, create_graph=True)
    (tg,) = torch.autograd.grad((tx ** 3).sum(), tx, create_graph=True)
    np.testing.assert_allclose(g.detach().numpy(), 3 * a * a, rtol=1e-13)
    (gg,) = loom.grad(g.sum(), x)
    (tgg,) = torch.autograd.grad(tg.sum(), tx)
    np.testing.assert_allclose(gg.numpy(), tgg.numpy(), rtol=1e-13)


def test_hooks_see_and_replace_the_gradient():
    x = loom.tensor([1.0, 2.0, 3.0], requires_grad=True)
    seen = []
    x.register_hook(lambda g: seen.append(g.tolist()))
    (x * x).sum().backward()
    assert seen == [[2.0, 4.0, 6.0]]
    y = loom.tensor([1.0, 1.0], requires_grad=True)
    y.register_hook(lambda g: g * 10)
    (y * 3).sum().backward()
    assert y.grad.tolist() == [30.0, 30.0]


def test_every_registered_op_is_a_function():
    names = loom.op_names()
    assert len(names) >= 80 and "softplus" in names and "bias_gelu" in names
    for name in names:
        assert callable(getattr(loom.ops, name)), name
        # at the top level unless its registered call fixes attributes (a shape, p, a learning rate)
        assert callable(getattr(loom, name, None)) != (name in loom._SAMPLE_ATTRIBUTES), name
    x = loom.tensor([-1.0, 0.0, 2.0], dtype=loom.float64)
    np.testing.assert_allclose(loom.ops.softplus(x).numpy(), np.log1p(np.exp([-1.0, 0.0, 2.0])), rtol=1e-14)


def test_ops_release_the_gil_while_they_run():
    """Another Python thread runs while an op computes: the op started, then the main
    thread ran, long before the op ended (an op holding the GIL would block it to the end)."""
    import threading
    import time

    a, big = loom.randn([2000, 2000]), loom.randn([4000, 4000])  # each product ~16 GFLOP: ~50 ms on 2 cores
    a.sum()  # warm: the first call loads kernels
    calls = {
        "a @ a": lambda: a @ a,
        "loom.matmul": lambda: loom.matmul(a, a),
        "loom.ops.matmul": lambda: loom.ops.matmul(a, a),
        "big + big": lambda: big + big,
        "big.to(float64)": lambda: big.to(loom.float64),
        "big.sum(dim=1)": lambda: big.sum(dim=1),
        "loom.softmax": lambda: loom.softmax(big, dim=-1),
    }
    measured = 0
    for name, call in calls.items():
        started, times = threading.Event(), {}

        def worker():
            started.set()
            begin = time.perf_counter()
            call()
            times["op"] = (begin, time.perf_counter())

        thread = threading.Thread(target=worker)
        thread.start()
        started.wait()
        times["main ran"] = time.perf_counter()
        thread.join()
        begin, end = times["op"]
        if end - begin < 0.02:
            continue  # too fast to tell on this machine
        measured += 1
        assert times["main ran"] < end - 0.5 * (end - begin), f"{name}: the main thread waited for the op ({times})"
    assert measured >= 3, f"only {measured} ops ran long enough (20 ms) to tell: make them larger"
