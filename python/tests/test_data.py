"""Corpus stores from Python: loom.data.prepare writes one, loom.data.Store maps it."""
import numpy as np
import pytest

import loom
from conftest import write_corpus


@pytest.fixture(scope="module")
def store(tmp_path_factory):
    data = write_corpus(tmp_path_factory.mktemp("corpus"))
    manifest = loom.data.prepare(str(data), str(data / "store"), vocab=60)
    assert manifest["pairs"] == 300 and manifest["read"] == 300 and manifest["pieces"] == 60
    return loom.data.Store(str(data / "store"))


def test_a_store_holds_every_pair_as_ids(store):
    assert len(store) == 300 and store.manifest["src"] == "de" and store.vocabulary.endswith("spm.model")
    lengths = [store[i][0].shape[0] + store[i][1].shape[0] for i in range(len(store))]
    assert sum(lengths) == store.manifest["tokens"]
    src, tgt = store[-1]
    assert src.dtype == loom.int64 and np.all(src.numpy() >= 4) and np.all(tgt.numpy() < 60)  # no specials
    # Pairs that repeat in the corpus (rows repeat every 105 lines) have the same ids.
    np.testing.assert_array_equal(store[0][0].numpy(), store[105][0].numpy())
    with pytest.raises(IndexError, match="pair 300 of 300"):
        store[300]
    with pytest.raises(loom.Error, match="is not a corpus store: it has no manifest.json"):
        loom.data.Store(store.vocabulary.rsplit("/", 2)[0])


def test_batches_cover_the_pairs_within_budget_in_a_seeded_order(store):
    batches = list(store.batches(max_tokens=64, max_len=16, seed=3))
    assert len(batches) == len(store.batches(max_tokens=64, max_len=16, seed=3))
    fitting = sum(1 for i in range(len(store)) if max(s.shape[0] for s in store[i]) + 1 <= 16)
    assert sum(b.src.shape[0] for b in batches) == fitting
    for b in batches:
        rows, width = b.src.shape
        assert rows * (width - 1) <= 64 and b.tgt_in.shape == b.tgt_out.shape
        tgt_in, tgt_out = b.tgt_in.numpy(), b.tgt_out.numpy()
        assert np.all(tgt_in[:, 0] == 2)  # bos
        np.testing.assert_array_equal(tgt_in[:, 1:][tgt_out[:, :-1] != 3], tgt_out[:, :-1][tgt_out[:, :-1] != 3])
        assert b.tgt_tokens == int((tgt_out != 0).sum())
    again = [b.src.numpy().tolist() for b in store.batches(max_tokens=64, max_len=16, seed=3)]
    assert again == [b.src.numpy().tolist() for b in batches]
    other = [b.src.numpy().tolist() for b in store.batches(max_tokens=64, max_len=16, seed=4)]
    assert other != again and sorted(map(str, other)) == sorted(map(str, again))  # the same batches, reordered


def test_a_batch_trains_a_transformer(store):
    config = loom.models.TransformerConfig.preset("tiny", store.manifest["pieces"])
    model = loom.models.Transformer(config)
    batch = next(iter(store.batches(max_tokens=256, max_len=32)))
    logits = model(batch.src, batch.tgt_in)
    assert logits.shape == (batch.tgt_in.shape[0], batch.tgt_in.shape[1], 60)
