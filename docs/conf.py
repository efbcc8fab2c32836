# Sphinx configuration of loom's documentation site (scripts/docs builds it into
# build/docs/html, warnings as errors). Pages are MyST markdown; the C++ reference
# comes from Doxygen's XML through Breathe, the Python one from the module's docstrings.
import os
import sys

project = "loom"
author = "the loom developers"
extensions = ["myst_parser", "sphinx.ext.autodoc", "breathe"]
source_suffix = {".md": "markdown"}
exclude_patterns = ["_build", "_pictures", "notebooks", "README.md"]
myst_heading_anchors = 4
myst_enable_extensions = ["colon_fence"]
html_theme = "furo"
html_title = "loom"
# Snippets elided with "..." are not always valid code; they are shown unhighlighted.
suppress_warnings = ["misc.highlighting_failure"]

# Set by scripts/docs: Doxygen's XML of the public headers, the built Python module,
# and the folder of the pictures the build makes.
breathe_projects = {"loom": os.environ.get("LOOM_DOXYGEN_XML", "")}
breathe_default_project = "loom"
breathe_domain_by_extension = {"h": "cpp"}
if os.environ.get("LOOM_PYTHON_PATH"):
    sys.path.insert(0, os.environ["LOOM_PYTHON_PATH"])
