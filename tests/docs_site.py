#!/usr/bin/python3
"""Checks the documentation site scripts/docs built (scripts/test runs it):
every internal link and picture of every page resolves (file and #anchor),
headless Chromium renders the index and the C++ API page with their content, and
every link in README.md resolves inside the repository.
Usage: tests/docs_site.py build/docs/html"""
import html.parser
import os
import re
import subprocess
import sys
import tempfile
import urllib.parse
import xml.etree.ElementTree


class Page(html.parser.HTMLParser):
    def __init__(self):
        super().__init__()
        self.ids, self.refs = set(), []

    def handle_starttag(self, tag, attrs):
        a = dict(attrs)
        if "id" in a:
            self.ids.add(a["id"])
        for key in ("href", "src"):
            if a.get(key):
                self.refs.append((tag, a[key]))


def parse(path):
    page = Page()
    with open(path, encoding="utf-8") as f:
        page.feed(f.read())
    return page


def is_picture(path):
    """A PNG with its signature, or an SVG that parses with an <svg> root."""
    if path.endswith(".png"):
        with open(path, "rb") as f:
            return f.read(8) == b"\x89PNG\r\n\x1a\n" and os.path.getsize(path) > 100
    if path.endswith(".svg"):
        try:
            return xml.etree.ElementTree.parse(path).getroot().tag.endswith("svg")
        except xml.etree.ElementTree.ParseError:
            return False
    return os.path.getsize(path) > 0


def check_links(root):
    pages = {}
    for folder, _, files in os.walk(root):
        for name in files:
            if name.endswith(".html"):
                path = os.path.join(folder, name)
                pages[os.path.normpath(path)] = parse(path)
    broken = []
    for path, page in pages.items():
        for tag, ref in page.refs:
            url = urllib.parse.urlsplit(ref)
            if url.scheme or ref.startswith("//"):
                continue  # external: not this site's to check
            target = os.path.normpath(os.path.join(os.path.dirname(path), urllib.parse.unquote(url.path))) \
                if url.path else path
            if os.path.isdir(target):
                target = os.path.join(target, "index.html")
            if not os.path.exists(target):
                broken.append(f"{os.path.relpath(path, root)}: <{tag}> {ref}: no such file")
            elif tag == "img" and not is_picture(target):
                broken.append(f"{os.path.relpath(path, root)}: <img> {ref}: not a PNG or SVG picture")
            elif url.fragment and target in pages and url.fragment not in pages[target].ids:
                broken.append(f"{os.path.relpath(path, root)}: {ref}: no id '{url.fragment}' in that page")
    return len(pages), broken


def check_readme():
    """README's links: files of this repository (a clone has nothing beside it)."""
    repo = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    with open(os.path.join(repo, "README.md"), encoding="utf-8") as f:
        text = f.read()
    broken = []
    for target in re.findall(r"\]\(([^)\s]+)\)", text):
        path = urllib.parse.urlsplit(target).path
        if urllib.parse.urlsplit(target).scheme or not path:
            continue
        full = os.path.normpath(os.path.join(repo, path))
        if not full.startswith(repo + os.sep) or not os.path.exists(full):
            broken.append(target)
    return broken


def rendered(page):
    """The page's DOM after Chromium loaded and ran it."""
    with tempfile.TemporaryDirectory() as profile:
        out = subprocess.run(["chromium", "--headless", "--no-sandbox", "--disable-gpu", f"--user-data-dir={profile}",
                              "--virtual-time-budget=5000", "--dump-dom", "file://" + os.path.abspath(page)],
                             capture_output=True, text=True, timeout=120)
    if out.returncode != 0:
        sys.exit(f"docs_site: chromium failed on {page}: {out.stderr[-2000:]}")
    return out.stdout


def main():
    root = sys.argv[1] if len(sys.argv) > 1 else "build/docs/html"
    outside = check_readme()
    if outside:
        sys.exit(f"docs_site: README.md links to what this repository does not have: {outside}")
    count, broken = check_links(root)
    if broken:
        sys.exit("docs_site: broken links:\n  " + "\n  ".join(broken))
    expect = {"index.html": ["reverse-mode automatic-differentiation engine", "Getting started", "C++ API"],
              "cpp-api.html": ["class", "Tensor", "backward", "requires_grad_", "dropout_add_layer_norm"],
              "seeing-gradients.html": ["curves.svg", "attention-cross.png", "graph.svg", "noam.svg"]}
    for name, texts in expect.items():
        dom = rendered(os.path.join(root, name))
        missing = [t for t in texts if t not in dom]
        if missing:
            sys.exit(f"docs_site: {name} rendered by chromium lacks {missing}")
    print(f"docs_site: README's links resolve; {count} pages, every internal link and picture resolves; chromium renders "
          f"{', '.join(expect)} with their content")


main()
