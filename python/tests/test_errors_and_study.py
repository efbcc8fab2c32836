"""Errors as Python exceptions with the engine's message; explain and the graph picture."""
import inspect

import numpy as np
import pytest

import loom


def test_engine_errors_are_loom_errors_naming_the_op():
    assert issubclass(loom.Error, RuntimeError)
    with pytest.raises(loom.Error, match="matmul"):
        loom.ones([2, 3]) @ loom.ones([2, 3])
    with pytest.raises(loom.Error, match="reshape"):
        loom.ones([6]).reshape(4, 2)


def test_wrong_python_types_are_type_errors():
    with pytest.raises(TypeError, match="loom.Tensor or a number"):
        loom.ones([2]) + "x"
    with pytest.raises(TypeError, match="argument 2 must be a loom.Tensor"):
        loom.ops.add(loom.ones([2]), 3)
    # Each names the argument it refuses, and what it got.
    with pytest.raises(TypeError, match=r"loom.sum: argument 'input' \(position 1\) must be loom.Tensor, got list"):
        loom.sum([1, 2])
    with pytest.raises(TypeError, match=r"loom.softmax: argument 'dim' \(position 2\) must be int, got str"):
        loom.softmax(loom.ones([2]), dim="x")
    with pytest.raises(TypeError, match=r"loom.sum: argument 'dim' \(position 2\) must be an int or a sequence of ints "
                       r"or None, got str"):
        loom.ones([2]).sum(dim="a")
    with pytest.raises(TypeError, match=r"loom.amax: got an unexpected keyword argument 'dims'"):
        loom.amax(loom.ones([2]), dims=0)
    with pytest.raises(TypeError, match=r"loom.logsumexp: missing required argument 'dim' \(position 2\)"):
        loom.ones([2]).logsumexp()
    with pytest.raises(TypeError, match=r"loom.argmax: argument 'keepdim' \(position 3\) must be bool, got int"):
        loom.argmax(loom.ones([2]), 0, 1)
    with pytest.raises(TypeError, match=r"argument 'dtype' must be a loom dtype .* got str"):
        loom.zeros([2], dtype="float32")
    with pytest.raises(TypeError, match=r"loom.softmax: argument 'mask' \(position 3\) must be loom.Tensor or None, "
                       r"got int"):
        loom.softmax(loom.ones([2]), mask=3)
    with pytest.raises(TypeError, match=r"loom.cat: argument 'tensors' \(position 1\) must be a sequence of loom.Tensors, got "
                       r"list \(item 1 is int\)"):
        loom.cat([loom.ones([1]), 2])


def test_anomaly_mode_names_the_python_line():
    here = __file__
    x = loom.tensor([-1.0, 4.0], requires_grad=True)
    with loom.detect_anomaly():
        # A NaN in a forward output: the line that called the op.
        line = inspect.currentframe().f_lineno + 2
        with pytest.raises(loom.Error, match=rf"log produced NaN .* called from {here}:{line} \(test_anomaly"):
            loom.log(x)
        # An infinite gradient in backward (sqrt at 0): the line that recorded the op.
        z = loom.tensor([0.0, 1.0], requires_grad=True)
        line = inspect.currentframe().f_lineno + 1
        y = loom.sqrt(z).sum()
        with pytest.raises(loom.Error, match=rf"backward of sqrt produced NaN or Inf .* called from {here}:{line} "):
            y.backward()
    # Outside anomaly mode nothing is checked.
    assert np.isnan(loom.log(x).detach().numpy()[0])


def test_explain_gives_both_jacobians_as_arrays():
    e = loom.explain("tanh")
    assert e.formula.startswith("y = tanh")
    analytic, numeric = e.gradcheck["analytic"], e.gradcheck["numeric"]
    assert isinstance(analytic, np.ndarray) and analytic.shape == numeric.shape
    np.testing.assert_allclose(analytic, numeric, atol=1e-6)
    assert e.gradcheck["passed"] and e.gradgradcheck["passed"]
    x = e.inputs[0].detach().numpy().ravel()
    np.testing.assert_allclose(np.diag(analytic), 1 - np.tanh(x) ** 2, rtol=1e-12)
    assert "<table>" in e._repr_html_()
    with pytest.raises(loom.Error, match="tanh"):
        loom.explain("tahn")


def test_graph_renders_with_gradient_norms():
    x = loom.tensor([1.0, -2.0, 3.0], requires_grad=True)
    x.name = "x"
    with loom.trace_gradients() as trace:
        loss = (x * 3).sum()
        loss.backward()
    g = loom.graph(loss, trace)
    assert "digraph" in g.dot and "mul" in g.dot
    assert f"{np.linalg.norm([3.0, 3.0, 3.0]):.3g}" in g.dot  # the gradient into x, on its edge
    svg = g._repr_svg_()
    assert svg.lstrip().startswith("<?xml") and "<svg" in svg


def test_ctrl_c_stops_a_long_call_between_kernels():
    """SIGINT during a Transformer forward (one call, hundreds of kernels, the GIL
    released) raises KeyboardInterrupt long before the call would have ended, and
    loom works afterwards."""
    import os
    import signal
    import subprocess
    import sys
    import time

    code = r"""
import signal, time
signal.signal(signal.SIGINT, signal.default_int_handler)  # a shell's background job starts with it ignored
import loom
model = loom.models.Transformer(loom.models.TransformerConfig.preset("tiny", 40))
src = loom.tensor([[(i * 7 + j) % 37 + 3 for j in range(60)] for i in range(768)], dtype=loom.int64)
times = []
for _ in range(2):  # warm: the second call is what an uninterrupted one takes
    start = time.perf_counter(); model(src, src); times.append(time.perf_counter() - start)
print("ready", min(times), flush=True)
start = time.perf_counter()
try:
    model(src, src)
    print("finished", time.perf_counter() - start, flush=True)
except KeyboardInterrupt:
    print("interrupted", time.perf_counter() - start, flush=True)
    print("after", (loom.ones([2]) + 1).tolist(), flush=True)
"""
    child = subprocess.Popen([sys.executable, "-c", code], stdout=subprocess.PIPE, text=True, env=os.environ)
    whole = float(child.stdout.readline().split()[1])
    time.sleep(whole / 5)
    child.send_signal(signal.SIGINT)
    out = child.communicate(timeout=120)[0].split("\n")
    assert out[0].startswith("interrupted"), out
    assert float(out[0].split()[1]) < 0.6 * whole, (whole, out)
    assert out[1] == "after [2.0, 2.0]", out


def test_ctrl_c_stops_one_long_kernel():
    """SIGINT during one kernel call (a sum over a broadcast of 2^34 elements, 16
    times one of 2^30) raises KeyboardInterrupt at the kernel's next block of work."""
    import os
    import signal
    import subprocess
    import sys
    import time

    code = r"""
import signal, time
signal.signal(signal.SIGINT, signal.default_int_handler)  # a shell's background job starts with it ignored
import loom
start = time.perf_counter(); loom.ones([1]).expand([2**30]).sum(); print("ready", time.perf_counter() - start, flush=True)
start = time.perf_counter()
try:
    loom.ones([1]).expand([2**34]).sum()
    print("finished", time.perf_counter() - start, flush=True)
except KeyboardInterrupt:
    print("interrupted", time.perf_counter() - start, flush=True)
    print("after", loom.ones([1]).expand([1000]).sum().item(), flush=True)
"""
    child = subprocess.Popen([sys.executable, "-c", code], stdout=subprocess.PIPE, text=True, env=os.environ)
    part = float(child.stdout.readline().split()[1])
    time.sleep(part)
    child.send_signal(signal.SIGINT)
    out = child.communicate(timeout=300)[0].split("\n")
    assert out[0].startswith("interrupted"), out
    assert float(out[0].split()[1]) < 5 * part, (part, out)
    assert out[1] == "after 1000.0", out
