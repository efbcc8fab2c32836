#!/usr/bin/python3
"""Runs every ```python block of README.md and docs/*.md, each in a fresh interpreter
with the built module (scripts/docs runs it): documentation whose code has stopped
working fails the build. Usage: tests/doc_python.py BUILD_PYTHON_DIR"""
import glob
import os
import re
import subprocess
import sys
import tempfile

repo = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
module = os.path.abspath(sys.argv[1] if len(sys.argv) > 1 else os.path.join(repo, "build", "python"))
count = 0
for path in [os.path.join(repo, "README.md")] + sorted(glob.glob(os.path.join(repo, "docs", "*.md"))):
    text = open(path, encoding="utf-8").read()
    for match in re.finditer(r"^```python\n(.*?)^```", text, re.S | re.M):
        line = text[:match.start()].count("\n") + 2
        with tempfile.TemporaryDirectory() as scratch:
            run = subprocess.run([sys.executable, "-c", match.group(1)], cwd=scratch, capture_output=True, text=True,
                                 env={**os.environ, "PYTHONPATH": module}, timeout=300)
        if run.returncode != 0:
            sys.exit(f"doc_python: {os.path.relpath(path, repo)}:{line}: the block failed:\n{run.stderr[-3000:]}")
        count += 1
print(f"doc_python: {count} Python blocks of README.md and docs/ ran")
