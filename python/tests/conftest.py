# The suites import the loom package built into <build>/python (ctest sets PYTHONPATH).
import numpy as np
import pytest


@pytest.fixture
def rng():
    return np.random.default_rng(0)


def write_corpus(folder, splits=(("train", 300), ("val", 20))):
    """A made-up parallel corpus in Multi30k's layout (<split>.de, <split>.en) in `folder`;
    its rows repeat every 105 lines."""
    de = "Hund Katze Mann Frau Kind Ball Haus Baum läuft sitzt spielt rot blau groß klein".split()
    en = "dog cat man woman child ball house tree runs sits plays red blue big small".split()
    for split, count in splits:
        rows = [[(i * 7 + k * 3) % 15 for k in range(3 + i % 5)] for i in range(count)]
        (folder / f"{split}.de").write_text("".join(" ".join(de[w] for w in r) + "\n" for r in rows))
        (folder / f"{split}.en").write_text("".join(" ".join(en[w] for w in r) + "\n" for r in rows))
    return folder
