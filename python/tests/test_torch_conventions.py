"""`import loom` tried as a PyTorch user would: each case was a crash or a silently different
answer, and is now PyTorch's answer (checked against Debian's torch) or a named error."""
import threading
import warnings

import numpy as np
import pytest
import torch

import loom


def close(ours, theirs, **tolerance):
    """Value, shape and dtype name equal to torch's."""
    assert tuple(ours.shape) == tuple(theirs.shape)
    assert str(ours.dtype).split(".")[-1] == str(theirs.dtype).split(".")[-1]
    np.testing.assert_allclose(np.asarray(ours.tolist(), dtype=float), theirs.detach().double().numpy(), **tolerance)


def test_integer_division_is_true_division_and_never_traps():
    for a, b in [([7], [0]), ([7, -3, 0], [2, 0, 0]), ([-2**63], [-1])]:
        close(loom.tensor(a) / loom.tensor(b), torch.tensor(a) / torch.tensor(b))
    close(loom.tensor([7], dtype=loom.int32) / 0, torch.tensor([7], dtype=torch.int32) / 0)
    close(loom.tensor([7]) / 2, torch.tensor([7]) / 2)  # 3.5, float32


def test_type_promotion_as_in_pytorch():
    pairs = [
        (lambda m: m.tensor([1, 2]) + 0.5),
        (lambda m: 0.5 * m.tensor([1, 2])),
        (lambda m: m.tensor([1.5, 2.5]) * m.tensor([True, False])),
        (lambda m: m.tensor([True, False]) + 3),
        (lambda m: m.tensor([1, 2], dtype=m.int32) + m.tensor([3, 4])),
        (lambda m: m.tensor([1, 2], dtype=m.int32) + 7),
        (lambda m: m.tensor([1.0, 2.0]) + m.tensor(3.0, dtype=m.float64)),  # a 0-d operand gives way
        (lambda m: m.tensor([1.0, 2.0]) + m.tensor([3.0, 4.0], dtype=m.float64)),
        (lambda m: m.tensor([1, 2]) + m.tensor(3.5, dtype=m.float64)),  # a higher kind does not
        (lambda m: m.tensor([1, 2]) < 1.5),
        (lambda m: m.where(m.tensor([True, False]), m.tensor([1, 2]), 0.5)),
        (lambda m: m.maximum(m.tensor([1, 5]), m.tensor([2.5, 2.5]))),
        (lambda m: m.tensor([2**62 + 1]) - 1),  # an int stays exact
    ]
    for make in pairs:
        close(make(loom), make(torch))


def test_mixed_float_dtypes_send_each_gradient_back_in_its_own_dtype():
    a = loom.tensor([1.0, 2.0], requires_grad=True)
    b = loom.tensor([3.0, 4.0], dtype=loom.float64, requires_grad=True)
    (a * b).sum().backward()
    assert a.grad.dtype == loom.float32 and a.grad.tolist() == [3.0, 4.0]
    assert b.grad.dtype == loom.float64 and b.grad.tolist() == [1.0, 2.0]


def test_a_0d_tensor_reduces_over_dim_0_or_minus_1_as_in_pytorch():
    x, t = loom.from_numpy(np.array(1.5)), torch.tensor(1.5, dtype=torch.float64)
    for dim in (0, -1):
        close(x.sum(dim), t.sum(dim))
        close(x.mean(dim), t.mean(dim))
        close(x.amax(dim), t.amax(dim))
        close(x.logsumexp(dim), t.logsumexp(dim))
        close(loom.logsumexp(x, dim), torch.logsumexp(t, dim))
        close(x.squeeze(dim), t.squeeze(dim))
        close(x.sum(dim, keepdim=True), t.sum(dim, keepdim=True))
        close(loom.argmax(x, dim), torch.argmax(t, dim))
    assert np.isnan(x.var(0).item()) and np.isnan(t.var(0).item())  # one element, correction 1
    for bad in (1, -2):
        with pytest.raises(loom.Error, match="out of range for a 0-d tensor"):
            x.sum(bad)
    with pytest.raises(loom.Error, match="size: dim 0 is out of range for a 0-d tensor"):
        x.size(0)


def test_argmin_and_amin_are_their_own_ops_exact_at_int64s_extremes():
    """argmin was argmax(-x): -(-2**63) wraps to itself, so the smallest int64 was
    never found."""
    smallest = -2**63
    x = loom.tensor([5, smallest, 3, smallest])
    assert loom.argmin(x).item() == 1 == torch.argmin(torch.tensor([5, smallest, 3, smallest])).item()
    assert loom.amin(x).item() == smallest
    values, indices = loom.min(loom.tensor([[4, smallest], [2**63 - 1, 7]]), dim=1)
    assert values.tolist() == [smallest, 7] and indices.tolist() == [1, 1]
    assert loom.min(loom.tensor([3.0, float("nan"), 1.0])).item() != loom.min(loom.tensor([3.0, float("nan"), 1.0])).item()
    assert loom.argmin(loom.tensor([3.0, float("nan"), 1.0])).item() == 1  # NaN first, as torch's
    assert x.argmin().item() == 1 and x.amin().item() == smallest


def test_concurrent_backward_into_one_leaf_loses_nothing():
    x = loom.tensor([1.0, 2.0], dtype=loom.float64, requires_grad=True)

    def work():
        for _ in range(200):
            (x * 1.0).sum().backward()

    threads = [threading.Thread(target=work) for _ in range(8)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert x.grad.tolist() == [1600.0, 1600.0]


def test_tensor_exponents_have_gradients_on_both_sides():
    base, exponent = np.array([1.5, 2.0, 0.5]), np.array([2.0, -1.0, 0.5])
    for e_shape in ((3,), (1,)):
        e = exponent[:e_shape[0]]
        lx, le = loom.tensor(base, requires_grad=True), loom.tensor(e, requires_grad=True)
        tx, te = torch.tensor(base, requires_grad=True), torch.tensor(e, requires_grad=True)
        (lx ** le).sum().backward()
        (tx ** te).sum().backward()
        close(lx.grad, tx.grad)
        close(le.grad, te.grad)
    lx, tx = loom.tensor(base, requires_grad=True), torch.tensor(base, requires_grad=True)
    (2 ** lx).sum().backward()
    (2 ** tx).sum().backward()
    close(lx.grad, tx.grad)
    close(loom.pow(2.0, loom.tensor(base)), torch.pow(2.0, torch.tensor(base)))
    assert loom.gradcheck(lambda a, b: a ** b, (loom.tensor(base, requires_grad=True),
                                               loom.tensor(exponent, requires_grad=True)))


def test_attention_masks_take_pytorchs_convention():
    rng = np.random.default_rng(0)
    q, k, v = (rng.standard_normal((2, 3, 4)) for _ in range(3))
    allowed = np.array([[True, True, False], [True, False, False], [True, True, True]])
    scores = q @ k.transpose(0, 2, 1) / 2.0 + np.where(allowed, 0.0, -np.inf)
    weights = np.exp(scores - scores.max(-1, keepdims=True))
    expected = (weights / weights.sum(-1, keepdims=True)) @ v
    ours = loom.scaled_dot_product_attention(loom.tensor(q), loom.tensor(k), loom.tensor(v), loom.tensor(allowed))
    np.testing.assert_allclose(ours.numpy(), expected, rtol=1e-12)
    causal = loom.scaled_dot_product_attention(loom.tensor(q), loom.tensor(k), loom.tensor(v), is_causal=True)
    lower = loom.scaled_dot_product_attention(loom.tensor(q), loom.tensor(k), loom.tensor(v),
                                              loom.tensor(np.tril(np.ones((3, 3), dtype=bool))))
    assert causal.tolist() == lower.tolist()


def test_embedding_padding_idx_and_int32_ids_as_in_pytorch():
    weight = np.arange(12.0).reshape(4, 3)
    ids = [[0, 3], [3, 1]]
    for padding_idx in (None, -1, 2):
        lw, tw = loom.tensor(weight, requires_grad=True), torch.tensor(weight, requires_grad=True)
        ours = loom.embedding(loom.tensor(ids, dtype=loom.int32), lw, padding_idx=padding_idx)
        theirs = torch.nn.functional.embedding(torch.tensor(ids), tw, padding_idx=padding_idx)
        close(ours, theirs)
        ours.sum().backward()
        theirs.sum().backward()
        close(lw.grad, tw.grad)
    with pytest.raises(loom.Error, match="padding_idx 4 is outside"):
        loom.embedding(loom.tensor(ids), loom.tensor(weight), padding_idx=4)
    with pytest.raises(loom.Error, match="input holds the ids and weight the table; got float64 ids and an int64 "
                                         "table \\(the arguments swapped\\?\\)"):
        loom.embedding(loom.tensor(weight), loom.tensor(ids))
    layer = loom.nn.Embedding(4, 3, padding_idx=-1)
    layer(loom.tensor(ids)).sum().backward()
    assert layer.weight.grad.tolist()[3] == [0.0, 0.0, 0.0] and layer.weight.grad.tolist()[0] == [1.0, 1.0, 1.0]


def test_cross_entropy_takes_classes_on_dim_1_and_probability_targets():
    rng = np.random.default_rng(1)
    logits = rng.standard_normal((2, 5, 3))  # N, C, d1
    target = rng.integers(0, 5, (2, 3))
    for reduction in ("mean", "sum", "none"):
        lx, tx = loom.tensor(logits, requires_grad=True), torch.tensor(logits, requires_grad=True)
        ours = loom.cross_entropy(lx, loom.tensor(target), reduction=reduction, label_smoothing=0.1)
        theirs = torch.nn.functional.cross_entropy(tx, torch.tensor(target), reduction=reduction, label_smoothing=0.1)
        close(ours, theirs, rtol=1e-12)
        ours.sum().backward()
        theirs.sum().backward()
        close(lx.grad, tx.grad, rtol=1e-10)
    probabilities = rng.dirichlet(np.ones(5), 4)
    flat = rng.standard_normal((4, 5))
    close(loom.cross_entropy(loom.tensor(flat), loom.tensor(probabilities), label_smoothing=0.2),
          torch.nn.functional.cross_entropy(torch.tensor(flat), torch.tensor(probabilities), label_smoothing=0.2),
          rtol=1e-12)
    close(loom.cross_entropy(loom.tensor(flat[0]), loom.tensor(2)),
          torch.nn.functional.cross_entropy(torch.tensor(flat[0]), torch.tensor(2)), rtol=1e-12)


def test_read_only_arrays_stay_read_only():
    frozen = np.arange(4.0)
    frozen.flags.writeable = False
    with pytest.warns(UserWarning, match="read-only"):
        t = loom.from_numpy(frozen)
    t.numpy()[0] = 99.0
    assert frozen[0] == 0.0 and t.tolist()[0] == 99.0
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        u = loom.from_numpy(np.frombuffer(b"\x00" * 16, dtype=np.float64))
    u.numpy()[1] = 5.0  # its own copy: the bytes object is untouched
    assert u.tolist() == [0.0, 5.0]


def test_dlpack_dtypes_are_mapped_exactly_or_refused_by_name():
    # 8-bit unsigned is uint8, which loom lacks (it was read as bool holding 2 and 255); bool
    # crosses as DLPack's own bool code (torch 1.13 cannot export bool at all).
    with pytest.raises(TypeError, match="DLPack code 1 with 8 bits \\(torch.uint8\\)"):
        loom.from_dlpack(torch.tensor([2, 255], dtype=torch.uint8))
    flags = loom.tensor([True, False, True])
    assert loom.from_dlpack(flags).tolist() == [True, False, True]
    assert loom.from_dlpack(flags.to(loom.int32) * 300).tolist() == [300, 0, 300]


def test_a_functions_gradients_come_back_in_each_inputs_dtype_and_shape():
    class Half(loom.Function):
        @staticmethod
        def forward(ctx, x):
            return x * 0.5

        @staticmethod
        def backward(ctx, g):
            return (g * 0.5).to(loom.float32)

    x = loom.tensor([1.0, 2.0], dtype=loom.float64, requires_grad=True)
    Half.apply(x).sum().backward()
    assert x.grad.dtype == loom.float64 and x.grad.tolist() == [0.5, 0.5]

    class Wrong(loom.Function):
        @staticmethod
        def forward(ctx, x):
            return x * 1.0

        @staticmethod
        def backward(ctx, g):
            return loom.ones(3, dtype=loom.float64)

    with pytest.raises(ValueError, match="Wrong.backward: gradient 0 has shape \\[3\\], but input 0 has shape \\[2\\]"):
        Wrong.apply(loom.tensor([1.0, 2.0], dtype=loom.float64, requires_grad=True)).sum().backward()


def test_hooks_that_return_the_wrong_thing_are_named():
    def as_text(g):
        return "no"

    def reshaped(g):
        return g.reshape([2, 1])

    for hook, error, words in [(as_text, TypeError, "hook .*as_text returned str"),
                               (reshaped, ValueError, "hook .*reshaped returned a float64 gradient of shape")]:
        x = loom.tensor([1.0, 2.0], dtype=loom.float64, requires_grad=True)
        x.register_hook(hook)
        with pytest.raises(error, match=words):
            (x * 2.0).sum().backward()


def test_layer_norm_refuses_a_negative_eps_and_takes_torchs_arguments():
    with pytest.raises(loom.Error, match="LayerNorm: eps must be a finite number >= 0, got -1"):
        loom.nn.LayerNorm(4, eps=-1)
    x = np.random.default_rng(2).standard_normal((2, 3, 4))
    w, b = np.linspace(0.5, 2, 12).reshape(3, 4), np.linspace(-1, 1, 12).reshape(3, 4)
    close(loom.layer_norm(loom.tensor(x), (3, 4), loom.tensor(w), loom.tensor(b)),
          torch.nn.functional.layer_norm(torch.tensor(x), (3, 4), torch.tensor(w), torch.tensor(b)), rtol=1e-10)
    close(loom.layer_norm(loom.tensor(x), [4]), torch.nn.functional.layer_norm(torch.tensor(x), [4]), rtol=1e-10)


def test_functions_pytorch_code_expects():
    x = np.random.default_rng(3).standard_normal((3, 4))
    lx, tx = loom.tensor(x), torch.tensor(x)
    close(loom.arange(2, 11, 3), torch.arange(2, 11, 3))
    close(loom.arange(0.5, 2.0, 0.25), torch.arange(0.5, 2.0, 0.25))
    close(loom.arange(5), torch.arange(5))
    close(loom.var(lx, 1, unbiased=False), torch.var(tx, 1, unbiased=False))
    close(loom.var(lx, 1, correction=0, keepdim=True), torch.var(tx, 1, correction=0, keepdim=True))
    close(lx.var(0), tx.var(0))
    close(loom.softplus(lx, beta=2.0, threshold=1.0), torch.nn.functional.softplus(tx, beta=2.0, threshold=1.0))
    close(loom.gelu(lx, approximate="tanh"), torch.nn.functional.gelu(tx, approximate="tanh"), rtol=1e-12)
    close(loom.gelu(lx), torch.nn.functional.gelu(tx), rtol=1e-12)
    for ours, theirs in zip(loom.split(lx, [1, 3], 1), torch.split(tx, [1, 3], 1)):
        close(ours, theirs)
    close(loom.tensor(np.ones((2, 1, 3, 1))).squeeze(), torch.ones(2, 1, 3, 1, dtype=torch.float64).squeeze())
    close(loom.pad(lx, (-1, 2, 1, -2)), torch.nn.functional.pad(tx, (-1, 2, 1, -2)))
    close(lx[[0, 2]], tx[[0, 2]])
    close(lx[:, [-1, 0, 0]], tx[:, [-1, 0, 0]])
    close(lx[loom.tensor([[1, 0], [2, 2]])], tx[torch.tensor([[1, 0], [2, 2]])])
    with pytest.raises(IndexError, match="index 3 is out of bounds for dimension 0 with size 3"):
        lx[[0, 3]]
    close(lx.repeat(2, 1, 3), tx.repeat(2, 1, 3))
    sign_input = loom.tensor(x, requires_grad=True)
    loom.sign(sign_input).sum().backward()
    assert sign_input.grad.tolist() == np.zeros((3, 4)).tolist()



def test_schema_bindings_take_torch_calls():
    x = loom.tensor(np.arange(6.0).reshape(2, 3))
    assert x.reshape(3, 2).shape == (3, 2) and x.permute(1, 0).shape == (3, 2)  # sizes one by one, as torch
    with pytest.raises(TypeError, match="loom.reshape: takes 2 positional arguments but 3 were given"):
        loom.reshape(x, 3, 2)  # torch.reshape(x, 3, 2) is a TypeError too
    assert loom.add(x, 2).tolist() == (x + 2).tolist() and loom.add(x, x, alpha=2).tolist() == (x * 3).tolist()
    assert loom.where(x > 2, 1.0, x).tolist() == [[0.0, 1.0, 2.0], [1.0, 1.0, 1.0]]
    pieces = x.chunk(2, 1)
    assert isinstance(pieces, tuple) and [p.shape for p in pieces] == [(2, 2), (2, 1)]
    with pytest.raises(TypeError, match="loom.softmax: missing required argument 'dim' \\(position 2\\)"):
        loom.softmax(x)  # torch.softmax requires it too
    with pytest.raises(TypeError, match="loom.softmax: takes 2 positional arguments but 3 were given"):
        loom.softmax(x, -1, x > 2)  # loom's mask is keyword-only: torch's third is a dtype
    with pytest.raises(loom.Error, match="div: rounding_mode='floor' is not supported"):
        loom.div(x, x, rounding_mode="floor")
    with pytest.raises(loom.Error, match="add: alpha 0.5 must be an integer for the int64 operand"):
        loom.add(loom.tensor([1]), loom.tensor([2]), alpha=0.5)


def test_cross_entropy_with_every_target_ignored_is_zero_not_nan():
    """A deliberate difference (docs/python.md): torch's mean over no targets is 0 / 0."""
    logits = np.random.default_rng(2).standard_normal((3, 4))
    ours = loom.cross_entropy(loom.tensor(logits, requires_grad=True), loom.tensor([1, 1, 1]), ignore_index=1)
    theirs = torch.nn.functional.cross_entropy(torch.tensor(logits), torch.tensor([1, 1, 1]), ignore_index=1)
    assert ours.item() == 0.0 and np.isnan(theirs.item())
