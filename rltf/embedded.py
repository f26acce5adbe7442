"""The embedded planner: a small random T5 with a tokenizer trained locally, built once per settings.

``planner.model: embedded`` (:func:`rltf.planner_loading.load_planner`) builds a small T5 from
``planner.embedded`` with a tokenizer trained on the task texts (:mod:`rltf.tokenizer`), saves it
under ``<embedded.dir>/<fingerprint>/`` on first use and reloads it from there afterwards. The
fingerprint covers the settings, the seed and the tokenizer texts, so the same config + seed
always gives the same weights.
"""

from __future__ import annotations

import hashlib
import json
import warnings
from collections.abc import Sequence
from dataclasses import asdict
from pathlib import Path

import torch
from transformers import T5Config, T5ForConditionalGeneration

from envs.atomic import atomic_dir
from rltf.config import EmbeddedSettings
from rltf.planner import FORMAT_VERSION, PLANNER_FILE, Planner
from rltf.tokenizer import default_tokenizer_texts, train_plan_tokenizer


def embedded_fingerprint(settings: EmbeddedSettings, texts: Sequence[str]) -> str:
    """Names the embedded planner built from these settings, seed and tokenizer texts."""
    spec = {k: v for k, v in asdict(settings).items() if k != "dir"}
    h = hashlib.sha256(json.dumps({"v": FORMAT_VERSION, "spec": spec, "texts": list(texts)}, sort_keys=True).encode())
    return f"t5-d{settings.d_model}-l{settings.num_layers}-s{settings.seed}-{h.hexdigest()[:10]}"


def build_embedded_planner(settings: EmbeddedSettings, tokenizer_texts: Sequence[str] | None = None) -> Planner:
    """A fresh small T5 and its locally trained tokenizer, in memory. The weights depend only on
    the settings (seed included) and the texts; the global RNG is left untouched."""
    texts = list(tokenizer_texts) if tokenizer_texts is not None else default_tokenizer_texts()
    tokenizer = train_plan_tokenizer(texts, settings.vocab_size)
    config = T5Config(
        vocab_size=len(tokenizer), d_model=settings.d_model, d_kv=settings.d_model // settings.num_heads,
        d_ff=settings.d_ff, num_layers=settings.num_layers, num_decoder_layers=settings.num_layers,
        num_heads=settings.num_heads, dropout_rate=settings.dropout, feed_forward_proj="relu",
        pad_token_id=tokenizer.pad_token_id, eos_token_id=tokenizer.eos_token_id,
        decoder_start_token_id=tokenizer.pad_token_id, tie_word_embeddings=True,
    )
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(settings.seed)
        model = T5ForConditionalGeneration(config)
    model.eval()
    return Planner(model, tokenizer, True, source="embedded")


def ensure_embedded_planner(settings: EmbeddedSettings, tokenizer_texts: Sequence[str] | None = None) -> Path:
    """The directory of the embedded planner for these settings, built and saved on first use.

    Written to a temporary sibling and renamed into place, so concurrent processes (DDP ranks)
    never see a half-written folder; they build identical weights, and the first rename wins."""
    texts = list(tokenizer_texts) if tokenizer_texts is not None else default_tokenizer_texts()
    root = Path(settings.dir).expanduser()
    target = root / embedded_fingerprint(settings, texts)
    damaged = False
    if (target / PLANNER_FILE).is_file():
        try:
            Planner.from_pretrained(target)  # a cached build is used only when it loads whole
            return target
        except Exception as exc:
            damaged = True
            warnings.warn(f"the embedded planner built at {target} is damaged ({type(exc).__name__}: "
                          f"{_first_line(exc)}); rebuilding it", RuntimeWarning, stacklevel=2)
    planner = build_embedded_planner(settings, texts)
    with atomic_dir(target, replace=damaged, complete_marker=PLANNER_FILE) as tmp:
        planner.save_pretrained(tmp)
        meta = json.loads((tmp / PLANNER_FILE).read_text())
        meta["embedded"] = {k: v for k, v in asdict(settings).items() if k != "dir"}
        (tmp / PLANNER_FILE).write_text(json.dumps(meta, indent=2) + "\n")
    return target


def _first_line(exc: BaseException) -> str:
    text = str(exc).strip()
    return text.splitlines()[0] if text else type(exc).__name__
