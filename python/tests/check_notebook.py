#!/usr/bin/python3
"""Executes docs/notebooks/gradients.ipynb (jupyter nbconvert, Debian's Jupyter) and checks
what each step printed and drew: the derivative, the graph picture, gradcheck's verdicts
(a wrong backward caught), softmax's two Jacobians agreeing, a trained model's translation and
attention map, and the loss falling.
    check_notebook.py <notebook> <PYTHONPATH with the built loom package>"""
import json
import os
import re
import subprocess
import sys
import tempfile

notebook, python_path = sys.argv[1], sys.argv[2]
with tempfile.TemporaryDirectory() as out:
    env = dict(os.environ, PYTHONPATH=python_path, PYDEVD_DISABLE_FILE_VALIDATION="1")
    subprocess.run(["jupyter", "nbconvert", "--to", "notebook", "--execute", "--ExecutePreprocessor.timeout=300",
                    "--output-dir", out, "--output", "executed", notebook], check=True, env=env)
    cells = json.load(open(os.path.join(out, "executed.ipynb")))["cells"]

text, kinds = "", []
for cell in cells:
    for output in cell.get("outputs", []):
        if output["output_type"] == "error":
            sys.exit(f"check_notebook: a cell failed: {output['ename']}: {output['evalue']}")
        if output["output_type"] == "stream":
            text += "".join(output["text"])
        kinds += list(output.get("data", {}))

def expect(pattern):
    match = re.search(pattern, text)
    if not match:
        sys.exit(f"check_notebook: no output matching {pattern!r} in:\n{text}")
    return match

expect(r"dy/dx = 8\.0  by hand: 8\.0")
expect(r"Cube gradcheck: True\nCube gradgradcheck: True\nWrongCube gradcheck: False")
error = float(expect(r"max \|analytic - numeric\| = ([0-9.e-]+)").group(1))
first, last = map(float, expect(r"loss: first ([0-9.]+), last ([0-9.]+)").groups())
translation = expect(r"translation: (.*)").group(1)
expect(r"cross attention \(\d+, \d+\) rows sum to \[1\.( 1\.)*\]")
if error > 1e-6:
    sys.exit(f"check_notebook: softmax's Jacobians differ by {error}")
if not last < first / 20:
    sys.exit(f"check_notebook: the loss went from {first} to {last} only")
if translation != "dog woman house":
    sys.exit(f"check_notebook: the trained model translated 'Hund Frau Haus' as {translation!r}")
if kinds.count("image/svg+xml") != 1 or kinds.count("image/png") != 3:
    sys.exit(f"check_notebook: expected one SVG graph and three PNG plots, got {kinds}")
print(f"check_notebook: {len(cells)} cells ran; Jacobians agree to {error:.1e}; loss {first:.3f} -> {last:.4f}; "
      f"'Hund Frau Haus' -> {translation!r}; 1 graph, 3 pictures")
