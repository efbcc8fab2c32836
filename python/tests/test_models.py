"""Layers, optimizers, the Transformer, and a model folder from `loom train`, from Python."""
import os
import shutil
import subprocess

import numpy as np
import pytest
import torch

import loom
from conftest import write_corpus


def test_linear_matches_numpy_and_names_its_parameters():
    layer = loom.nn.Linear(3, 2)
    names = [name for name, _ in layer.named_parameters()]
    assert names == ["weight", "bias"] and layer.parameter_count() == 8
    x = np.random.default_rng(0).standard_normal((4, 3)).astype(np.float32)
    w, b = layer.weight.detach().numpy(), layer.bias.detach().numpy()
    np.testing.assert_allclose(layer(loom.tensor(x)).detach().numpy(), x @ w.T + b, rtol=1e-5, atol=1e-6)
    assert loom.nn.Linear(3, 2, bias=False).bias is None


def test_a_training_loop_in_python_matches_torch_adam():
    rng = np.random.default_rng(1)
    x, y = rng.standard_normal((16, 4)), rng.standard_normal((16, 1))
    w0 = rng.standard_normal((4, 1))
    w = loom.tensor(w0, requires_grad=True)
    tw = torch.tensor(w0, requires_grad=True)
    opt, topt = loom.optim.Adam([w], lr=0.05), torch.optim.Adam([tw], lr=0.05)
    losses = []
    for _ in range(20):
        opt.zero_grad()
        topt.zero_grad()
        loss = ((loom.tensor(x) @ w - loom.tensor(y)) ** 2).mean()
        tloss = ((torch.tensor(x) @ tw - torch.tensor(y)) ** 2).mean()
        loss.backward()
        tloss.backward()
        opt.step()
        topt.step()
        losses.append(loss.item())
    assert losses[-1] < losses[0] / 2
    np.testing.assert_allclose(w.detach().numpy(), tw.detach().numpy(), rtol=1e-10)


def test_transformer_forward_and_backward():
    config = loom.models.TransformerConfig.preset("tiny", 40)
    assert config.d_model == 64
    model = loom.models.Transformer(config)
    src = loom.tensor([[5, 6, 7, 3]])
    tgt_in = loom.tensor([[2, 8, 9]])
    logits = model(src, tgt_in)
    assert logits.shape == (1, 3, 40)
    loss = loom.cross_entropy(logits.reshape(3, 40), loom.tensor([8, 9, 3]))
    loss.backward()
    missing = [name for name, p in model.named_parameters() if p.grad is None]
    assert not missing, missing
    with pytest.raises(loom.Error):
        loom.models.load("/nonexistent/run")


@pytest.fixture(scope="module")
def corpus(tmp_path_factory):
    """A made-up corpus in Multi30k's layout, and a function that trains a tiny model on it
    with the loom command (LOOM names the binary)."""
    loom_binary = os.environ.get("LOOM")
    if not loom_binary:
        pytest.skip("LOOM (the loom binary) is not set; ctest sets it")
    data = write_corpus(tmp_path_factory.mktemp("corpus"))

    def train(name, *args):
        out = data / name
        subprocess.run([loom_binary, "train", "--data", str(data), "--out", str(out), "--preset", "tiny",
                        "--warmup", "10", "--threads", "2", *args], check=True, capture_output=True)
        return out
    return train


@pytest.fixture(scope="module")
def trained_folder(corpus):
    return corpus("run", "--vocab", "60", "--max-steps", "8")


def test_a_trained_folder_translates_as_the_command_does(trained_folder):
    folder = loom.models.load(str(trained_folder))
    sentences = ["Hund Katze Mann", "", "Ball Haus"]
    translations = folder.translate(sentences, beam=2)
    assert len(translations) == 3 and translations[1] == ""
    command = subprocess.run([os.environ["LOOM"], "translate", "--model", str(trained_folder), "--beam", "2"],
                             input="\n".join(sentences) + "\n", capture_output=True, text=True, check=True)
    assert command.stdout.split("\n")[:3] == translations
    # The exact stopping bound (horizon 0) as the command's --horizon 0.
    exact = subprocess.run([os.environ["LOOM"], "translate", "--model", str(trained_folder), "--beam", "2",
                            "--alpha", "1.4", "--horizon", "0"],
                           input="\n".join(sentences) + "\n", capture_output=True, text=True, check=True)
    assert exact.stdout.split("\n")[:3] == folder.translate(sentences, beam=2, alpha=1.4, horizon=0)


def test_an_ensemble_translates_as_the_command_does(corpus, trained_folder):
    other = corpus("run4", "--vocab", "60", "--max-steps", "4")  # the same pieces, other weights
    folder = loom.models.load(str(trained_folder))
    sentences = ["Hund Katze Mann", "", "Ball Haus rot", "Frau"]
    together = folder.translate(sentences, beam=2, ensemble=[loom.models.load(str(other))])
    command = subprocess.run([os.environ["LOOM"], "translate", "--model", str(trained_folder), "--model", str(other),
                              "--beam", "2"],
                             input="\n".join(sentences) + "\n", capture_output=True, text=True, check=True)
    assert command.stdout.split("\n")[:4] == together
    smaller = loom.models.load(str(corpus("run50", "--vocab", "50", "--max-steps", "2")))
    with pytest.raises(loom.Error, match="ModelFolder.translate: an ensemble's models must share one vocabulary"):
        folder.translate(sentences, ensemble=[smaller])


def test_attention_maps_come_back_as_arrays(trained_folder):
    folder = loom.models.load(str(trained_folder))
    maps = folder.attention("Hund Katze", "dog cat")
    cross = maps["cross"][0].numpy()
    heads = folder.model.config.heads
    assert cross.shape == (heads, len(maps["target_pieces"]), len(maps["source_pieces"]))
    np.testing.assert_allclose(cross.sum(-1), 1.0, rtol=1e-5)  # each query's weights sum to 1
    assert len(maps["encoder_self"]) == len(maps["decoder_self"]) == len(maps["cross"])


def test_translate_refuses_out_of_range_arguments_by_name(trained_folder):
    folder = loom.models.load(str(trained_folder))
    for arguments, words in [({"alpha": float("nan")}, "alpha must be in \\[0, 10\\], got nan"),
                             ({"extra_len": -100}, "extra_len must be in \\[0, "),
                             ({"beam": 0}, "beam must be in \\[1, 1000\\], got 0")]:
        with pytest.raises(ValueError, match=words):
            folder.translate(["Hund"], **arguments)


def test_bad_text_and_damaged_files_are_named(trained_folder, tmp_path):
    folder = loom.models.load(str(trained_folder))
    with pytest.raises(TypeError, match="ModelFolder.translate: sentence 1 is NoneType, not str"):
        folder.translate(["Hund", None])
    with pytest.raises(ValueError, match="sentence 0 is not valid Unicode text \\(it holds a lone surrogate\\)"):
        folder.translate(["Hund \ud800"])
    with pytest.raises(TypeError, match="ModelFolder.attention: target is bytes, not str"):
        folder.attention("Hund", b"dog")
    # A flipped header byte: the error names the file, in printable text (it quoted raw bytes before).
    damaged = tmp_path / "damaged"
    shutil.copytree(trained_folder, damaged)
    data = bytearray((damaged / "model.safetensors").read_bytes())
    data[20] = 0xFF
    (damaged / "model.safetensors").write_bytes(bytes(data))
    with pytest.raises(loom.Error) as error:
        loom.models.load(str(damaged))
    assert f"load_safetensors '{damaged}/model.safetensors': the JSON header is corrupt" in str(error.value)
    # A flipped data byte: its tensor is named, and verify_checksums=False loads it anyway.
    shutil.copytree(trained_folder, tmp_path / "flipped")
    data = bytearray((tmp_path / "flipped" / "model.safetensors").read_bytes())
    data[-1] ^= 1
    (tmp_path / "flipped" / "model.safetensors").write_bytes(bytes(data))
    with pytest.raises(loom.Error, match="does not match its checksum"):
        loom.models.load(str(tmp_path / "flipped"))
    assert loom.models.load(str(tmp_path / "flipped"), verify_checksums=False).translate(["Hund"], beam=1)
