"""Planner loading and saving on tiny random T5 / Llama checkpoints built here (no download)."""

from __future__ import annotations

import json
import os
import shutil
from pathlib import Path

import pytest
import torch
import transformers as tf

from envs.openagi.tools import OPENAGI_TOOLS
from rltf.config.loading import EmbeddedSettings, LoraSettings, PlannerSettings
from rltf.planners.embedded import build_embedded_planner, ensure_embedded_planner
from rltf.planners.hf_models import PlannerError
from rltf.planners.loading import load_planner
from rltf.planners.planner import PLANNER_FILE, Planner
from rltf.planners.tokenizer import default_tokenizer_texts, train_plan_tokenizer
from rltf.rl.kl_reference import ReferencePolicy

# PEFT calls a transformers method deprecated in v5; not ours to fix.
pytestmark = pytest.mark.filterwarnings("ignore:`is_gradient_checkpointing` is deprecated:FutureWarning")

TASK = "Given noisy blurry image, how to return the class label in English step by step?"
PLAN = "Image Denoising, Image Deblurring, Image Classification"
TEXTS = [TASK, PLAN, "(Image Denoising) (Fill Mask) Visual Question Answering, Machine Translation"]


# ------------------------------------------------------------------------------ tiny checkpoints
@pytest.fixture(scope="module")
def tiny_dirs(tmp_path_factory) -> dict[str, Path]:
    """Plain transformers checkpoints (no rltf metadata), as a hub download would look."""
    root = tmp_path_factory.mktemp("tiny")
    tok = train_plan_tokenizer(TEXTS, vocab_size=400)
    torch.manual_seed(0)
    t5 = tf.T5ForConditionalGeneration(tf.T5Config(
        vocab_size=len(tok), d_model=32, d_kv=8, d_ff=64, num_layers=1, num_decoder_layers=1, num_heads=4,
        pad_token_id=0, eos_token_id=1, decoder_start_token_id=0))
    t5.save_pretrained(root / "t5")
    tok.save_pretrained(root / "t5")
    # a causal tokenizer WITHOUT a pad token, like Llama's
    causal_tok = tf.PreTrainedTokenizerFast(tokenizer_object=tok.backend_tokenizer, eos_token="</s>",
                                            unk_token="<unk>")
    llama = tf.LlamaForCausalLM(tf.LlamaConfig(
        vocab_size=len(tok), hidden_size=32, intermediate_size=64, num_hidden_layers=2, num_attention_heads=4,
        num_key_value_heads=2, max_position_embeddings=128, bos_token_id=None, eos_token_id=1, pad_token_id=None))
    llama.save_pretrained(root / "llama")
    causal_tok.save_pretrained(root / "llama")
    return {"t5": root / "t5", "llama": root / "llama"}


def _inputs(planner: Planner) -> dict[str, torch.Tensor]:
    if planner.is_encoder_decoder:
        enc = planner.tokenizer([TASK], return_tensors="pt")
        return {**enc, "labels": planner.tokenizer([PLAN], return_tensors="pt").input_ids}
    return dict(planner.tokenizer([planner.prompt(TASK) + " " + PLAN], return_tensors="pt"))


def _logits(planner: Planner, model: torch.nn.Module | None = None) -> torch.Tensor:
    with torch.no_grad():
        return (model or planner.model)(**_inputs(planner)).logits


def _perturb_lora(planner: Planner, seed: int = 1) -> None:
    """LoRA's B starts at zero (adapter = identity); give it weights so it changes the outputs."""
    g = torch.Generator().manual_seed(seed)
    with torch.no_grad():
        for name, p in planner.model.named_parameters():
            if "lora_B" in name:
                p.copy_(0.5 * torch.randn(p.shape, generator=g))


# Logits through other code paths (a LoRA-wrapped model, a merged adapter): float32 agreement to a
# relative ~1e-6 whose exact value depends on the CPU's vector width and the thread count. Logits
# are O(1): rtol, plus an atol for the entries near 0. Where the maths is exactly the same (an
# adapter whose B is 0 adds zeros; a disabled adapter is the base layer) the atol is 1e-6.
LOGIT_TOL = dict(rtol=1e-5, atol=1e-5)
SAME_MATHS_TOL = dict(rtol=1e-5, atol=1e-6)


def _files_size(d: Path, pattern: str) -> int:
    return sum(f.stat().st_size for f in d.glob(pattern))


# ------------------------------------------------------------------------------ arch and tokenizer
def test_arch_detected_from_config_and_padding(tiny_dirs):
    t5 = load_planner(PlannerSettings(model=str(tiny_dirs["t5"])))
    assert t5.is_encoder_decoder and t5.arch == "seq2seq" and not t5.is_peft
    assert isinstance(t5.model, tf.T5ForConditionalGeneration)
    assert t5.tokenizer.padding_side == "right" and t5.prompt(TASK) == TASK

    llama = load_planner(PlannerSettings(model=str(tiny_dirs["llama"])))
    assert not llama.is_encoder_decoder and llama.arch == "causal"
    assert isinstance(llama.model, tf.LlamaForCausalLM)
    # no pad token in the checkpoint: pad = eos, left padding, and the model config agrees
    assert llama.tokenizer.pad_token == llama.tokenizer.eos_token == "</s>"
    assert llama.tokenizer.padding_side == "left"
    assert llama.model.config.pad_token_id == llama.tokenizer.eos_token_id
    assert llama.prompt(TASK) == f"{TASK}\nPlan:"
    batch = llama.tokenizer(["a", "Image Denoising, Image Deblurring"], padding=True, return_tensors="pt")
    assert batch.attention_mask[0, 0] == 0 and batch.attention_mask[0, -1] == 1  # padded on the left


def test_explicit_arch_must_match_the_model(tiny_dirs):
    with pytest.raises(PlannerError, match=r"planner\.arch='causal'.*seq2seq model.*'t5'"):
        load_planner(PlannerSettings(model=str(tiny_dirs["t5"]), arch="causal"))
    with pytest.raises(PlannerError, match=r"planner\.arch='seq2seq'.*causal model.*'llama'"):
        load_planner(PlannerSettings(model=str(tiny_dirs["llama"]), arch="seq2seq"))
    assert load_planner(PlannerSettings(model=str(tiny_dirs["llama"]), arch="causal")).arch == "causal"


def test_dtype_is_applied(tiny_dirs):
    planner = load_planner(PlannerSettings(model=str(tiny_dirs["llama"]), dtype="bfloat16"))
    assert {p.dtype for p in planner.model.parameters()} == {torch.bfloat16}


# ------------------------------------------------------------------------------ full save / reload
@pytest.mark.parametrize("name", ["t5", "llama"])
def test_full_model_save_and_reload_gives_identical_logits(tiny_dirs, tmp_path, name):
    planner = load_planner(PlannerSettings(model=str(tiny_dirs[name])))
    before = _logits(planner)
    out = planner.save_pretrained(tmp_path / "ckpt")
    meta = json.loads((out / PLANNER_FILE).read_text())
    assert meta["adapter"] is False and meta["arch"] == planner.arch and (out / "config.json").is_file()

    for again in (load_planner(PlannerSettings(model=str(out))), Planner.from_pretrained(out)):
        assert again.arch == planner.arch and not again.is_peft
        assert torch.equal(_logits(again), before)
        assert again.tokenizer(PLAN).input_ids == planner.tokenizer(PLAN).input_ids


# ------------------------------------------------------------------------------ LoRA
@pytest.mark.parametrize("name, expected_targets", [("t5", {"q", "v"}), ("llama", {"q_proj", "v_proj"})])
def test_lora_adapter_save_reload_and_reference(tiny_dirs, tmp_path, name, expected_targets):
    base = load_planner(PlannerSettings(model=str(tiny_dirs[name])))
    base_logits = _logits(base)
    planner = load_planner(PlannerSettings(model=str(tiny_dirs[name]), lora=LoraSettings(enabled=True, r=4)))
    assert planner.is_peft and set(planner.model.peft_config["default"].target_modules) == expected_targets
    assert planner.base_model == str(tiny_dirs[name].resolve())
    trainable = {n for n, p in planner.model.named_parameters() if p.requires_grad}
    assert trainable and all("lora_" in n for n in trainable)  # only the adapter trains
    torch.testing.assert_close(_logits(planner), base_logits, **SAME_MATHS_TOL)  # fresh adapter: B = 0
    _perturb_lora(planner)
    tuned = _logits(planner)
    assert not torch.allclose(tuned, base_logits, rtol=1e-3, atol=1e-3)

    # the KL reference: the same model with the adapter disabled == the base model, no copy
    ref = ReferencePolicy(planner)
    planner.model.train()
    with ref() as m:
        assert m is planner.model and not m.training
        ref_logits = _logits(planner, m)
    assert planner.model.training  # mode restored
    planner.model.eval()
    torch.testing.assert_close(ref_logits, base_logits, **SAME_MATHS_TOL)
    assert torch.equal(_logits(planner), tuned)  # adapter active again

    # adapter-only checkpoint: small, no full weights, reloads to identical logits
    out = planner.save_pretrained(tmp_path / "adapter")
    assert (out / "adapter_config.json").is_file() and not (out / "model.safetensors").exists()
    assert _files_size(out, "adapter_model.*") < 0.5 * _files_size(tiny_dirs[name], "model.safetensors")
    meta = json.loads((out / PLANNER_FILE).read_text())
    assert meta["adapter"] is True and meta["base_model"] == str(tiny_dirs[name].resolve())

    reloaded = Planner.from_pretrained(out)
    assert reloaded.is_peft and torch.equal(_logits(reloaded), tuned)
    assert any(p.requires_grad for p in reloaded.model.parameters())  # trainable by default
    kept = load_planner(PlannerSettings(model=str(out), lora=LoraSettings(enabled=True, merge_source_adapter=False)))
    assert kept.is_peft and torch.equal(_logits(kept), tuned)


def test_lora_source_adapter_is_merged_and_becomes_the_reference(tiny_dirs, tmp_path):
    """RLTF after LoRA SFT: the SFT adapter is merged, a fresh adapter trains on top, and the
    adapter-disabled model is the SFT policy; the checkpoint carries the merged adapter along."""
    sft = load_planner(PlannerSettings(model=str(tiny_dirs["llama"]), lora=LoraSettings(enabled=True)))
    _perturb_lora(sft)
    sft_logits = _logits(sft)
    sft_dir = sft.save_pretrained(tmp_path / "sft")

    rl = load_planner(PlannerSettings(model=str(sft_dir), lora=LoraSettings(enabled=True)))
    assert rl.is_peft and rl.merged_adapters == (str(sft_dir.resolve()),)
    assert rl.base_model == str(tiny_dirs["llama"].resolve())
    torch.testing.assert_close(_logits(rl), sft_logits, **LOGIT_TOL)
    with ReferencePolicy(rl)() as m:
        torch.testing.assert_close(_logits(rl, m), sft_logits, **LOGIT_TOL)
    _perturb_lora(rl, seed=2)
    rl_logits = _logits(rl)

    rl_dir = rl.save_pretrained(tmp_path / "rl")
    assert (rl_dir / "merged_adapters" / "0" / "adapter_config.json").is_file()
    shutil.rmtree(sft_dir)  # the checkpoint is self-contained apart from the base model
    again = Planner.from_pretrained(rl_dir)
    torch.testing.assert_close(_logits(again), rl_logits, **LOGIT_TOL)
    with ReferencePolicy(again)() as m:
        torch.testing.assert_close(_logits(again, m), sft_logits, **LOGIT_TOL)


def test_adapter_without_lora_is_merged_into_a_full_model(tiny_dirs, tmp_path):
    planner = load_planner(PlannerSettings(model=str(tiny_dirs["t5"]), lora=LoraSettings(enabled=True)))
    _perturb_lora(planner)
    tuned = _logits(planner)
    out = planner.save_pretrained(tmp_path / "adapter")
    full = load_planner(PlannerSettings(model=str(out)))
    assert not full.is_peft
    torch.testing.assert_close(_logits(full), tuned, **LOGIT_TOL)
    assert any(p.requires_grad for p in full.model.parameters())


def test_full_model_reference_is_a_frozen_copy(tiny_dirs):
    planner = load_planner(PlannerSettings(model=str(tiny_dirs["t5"])))
    before = _logits(planner)
    ref = ReferencePolicy(planner)
    with torch.no_grad():
        for p in planner.model.parameters():
            p.add_(0.01)
    with ref() as m:
        assert m is not planner.model and not any(p.requires_grad for p in m.parameters())
        assert torch.equal(_logits(planner, m), before)
    assert not torch.equal(_logits(planner), before)


# ------------------------------------------------------------------------------ errors
def test_clear_errors_for_bad_sources(tiny_dirs, tmp_path):
    with pytest.raises(PlannerError, match=r"'\./no/such/model': no such directory"):
        load_planner(PlannerSettings(model="./no/such/model"))
    with pytest.raises(PlannerError, match=r"no such directory, and not a hub model id"):
        load_planner(PlannerSettings(model="checkpoints/run/step-50"))
    with pytest.raises(PlannerError, match=r"cannot load a model config from 'no-such-org/no-such-model'"):
        load_planner(PlannerSettings(model="no-such-org/no-such-model"))  # offline in tests: fails fast
    empty = tmp_path / "empty"
    empty.mkdir()
    (empty / "notes.txt").write_text("x")
    with pytest.raises(PlannerError, match=r"neither config\.json .* nor adapter_config\.json.*notes\.txt"):
        load_planner(PlannerSettings(model=str(empty)))
    with pytest.raises(PlannerError, match=r"is a file"):
        load_planner(PlannerSettings(model=str(empty / "notes.txt")))
    with pytest.raises(PlannerError, match=r"target_modules=\['nope'\].*linear layers are named.*q_proj"):
        load_planner(PlannerSettings(model=str(tiny_dirs["llama"]),
                                     lora=LoraSettings(enabled=True, target_modules=["nope"])))


def test_adapter_whose_base_is_gone(tiny_dirs, tmp_path):
    base = tmp_path / "base"
    shutil.copytree(tiny_dirs["t5"], base)
    planner = load_planner(PlannerSettings(model=str(base), lora=LoraSettings(enabled=True)))
    out = planner.save_pretrained(tmp_path / "adapter")
    shutil.rmtree(base)
    with pytest.raises(PlannerError, match=r"needs its base model .*base.*moved or deleted"):
        Planner.from_pretrained(out)


@pytest.mark.skipif(torch.cuda.is_available(), reason="checks the no-GPU error")
def test_4bit_without_gpu_is_a_clear_error(tiny_dirs):
    settings = PlannerSettings(model=str(tiny_dirs["llama"]), load_in_4bit=True, lora=LoraSettings(enabled=True))
    with pytest.raises(PlannerError, match=r"load_in_4bit=true needs (the bitsandbytes package|a CUDA GPU)"):
        load_planner(settings)


# ------------------------------------------------------------------------------ embedded default
def test_embedded_planner_is_deterministic_from_its_seed():
    small = EmbeddedSettings(d_model=32, num_layers=1, num_heads=2, d_ff=64, vocab_size=500)
    a = build_embedded_planner(small, TEXTS).model.state_dict()
    torch.manual_seed(123)  # the global RNG must not matter
    b = build_embedded_planner(small, TEXTS).model.state_dict()
    c = build_embedded_planner(EmbeddedSettings(**{**small.__dict__, "seed": 1}), TEXTS).model.state_dict()
    assert a.keys() == b.keys() and all(torch.equal(a[k], b[k]) for k in a)
    assert any(not torch.equal(a[k], c[k]) for k in a if k.endswith("weight"))


def test_embedded_planner_saved_on_first_use_and_reloaded(tmp_path):
    emb = EmbeddedSettings(dir=str(tmp_path / "embedded"))  # the default shape
    first = load_planner(PlannerSettings(embedded=emb))
    dirs = [d for d in (tmp_path / "embedded").iterdir()]
    assert len(dirs) == 1 and (dirs[0] / PLANNER_FILE).is_file() and first.source == str(dirs[0])
    assert first.is_encoder_decoder and isinstance(first.model, tf.T5ForConditionalGeneration)
    meta = json.loads((dirs[0] / PLANNER_FILE).read_text())
    assert meta["embedded"]["d_model"] == 128 and meta["embedded"]["seed"] == 0
    mtime = (dirs[0] / "model.safetensors").stat().st_mtime_ns

    second = load_planner(PlannerSettings(embedded=emb))
    assert (dirs[0] / "model.safetensors").stat().st_mtime_ns == mtime  # reloaded, not rebuilt
    assert torch.equal(_logits(first), _logits(second))
    fresh = build_embedded_planner(emb)
    assert all(torch.equal(x, y) for x, y in zip(fresh.model.state_dict().values(),
                                                  second.model.state_dict().values()))
    # another seed is another planner, in its own folder
    other = ensure_embedded_planner(EmbeddedSettings(dir=emb.dir, seed=1))
    assert other != dirs[0] and len(list((tmp_path / "embedded").iterdir())) == 2


def test_embedded_tokenizer_covers_tools_and_plan_syntax():
    tok = train_plan_tokenizer(default_tokenizer_texts(), vocab_size=2000)
    assert (tok.pad_token_id, tok.eos_token_id, tok.unk_token_id) == (0, 1, 2)
    texts = [t.name for t in OPENAGI_TOOLS] + ["(", ")", ",", "(Image Denoising) (Fill Mask) Question Answering"]
    for text in texts:
        ids = tok(text).input_ids
        assert tok.unk_token_id not in ids, text
        assert ids[-1] == tok.eos_token_id
        assert tok.decode(ids, skip_special_tokens=True) == text
    # whole-word pieces: a tool name is one token per word
    assert tok.convert_ids_to_tokens(tok("Image Classification").input_ids) == ["▁Image", "▁Classification", "</s>"]
    assert len(tok) <= 2000 and tok.get_vocab() == train_plan_tokenizer(default_tokenizer_texts(), 2000).get_vocab()


def test_embedded_lora_reference_is_the_embedded_base(tmp_path):
    emb = EmbeddedSettings(d_model=32, num_layers=1, num_heads=2, d_ff=64, dir=str(tmp_path / "e"))
    base = load_planner(PlannerSettings(embedded=emb))
    planner = load_planner(PlannerSettings(embedded=emb, lora=LoraSettings(enabled=True)))
    _perturb_lora(planner)
    out = planner.save_pretrained(tmp_path / "adapter")
    assert Path(json.loads((out / PLANNER_FILE).read_text())["base_model"]).is_absolute()
    again = Planner.from_pretrained(out)
    assert torch.equal(_logits(again), _logits(planner))
    with ReferencePolicy(again)() as m:
        torch.testing.assert_close(_logits(again, m), _logits(base), **SAME_MATHS_TOL)


def test_hf_offline_in_tests():
    assert os.environ.get("HF_HUB_OFFLINE") == "1"
