"""The texts the embedded planner's tokenizer learns on OpenAGI (``OpenAGIEnv.tokenizer_texts``)."""

from __future__ import annotations

from envs.openagi.plans import format_plan
from envs.openagi.registry import ToolRegistry
from envs.openagi.split import load_split
from envs.openagi.suite import task_specs
from envs.openagi.tools import OPENAGI_TOOLS, SPECS


def default_texts() -> list[str]:
    """The descriptions of the TRAIN tasks only (no validation or test task of either suite, lite or
    full, reaches the tokenizer), the canonical reference plans of every task (tool names and plan
    syntax are allowed everywhere: they are the action space, not the task), and the tool names with
    their one-line descriptions. The same for every run, whatever its suite."""
    train, held_out = set(), set()
    for suite in ("lite", "full"):
        specs, split = task_specs(suite), load_split(suite)
        train |= {specs[i].description for i in split["train"]}
        held_out |= {specs[i].description for part in ("validation", "test") for i in split[part]}
    specs = task_specs("full")
    texts = [s.description for s in specs if s.description in train - held_out]
    texts += [format_plan(s.reference_plan) for s in specs]
    texts += [t.name for t in OPENAGI_TOOLS] + [f"{t.name}: {t.description}" for t in OPENAGI_TOOLS]
    return texts


def registry_texts(registry: ToolRegistry) -> list[str]:
    """:func:`default_texts` plus the name and the ``name: description`` line of every tool of
    ``registry`` that is not one of OpenAGI's (registered from outside, ``env.tools``), so it gets
    whole-word pieces like the others."""
    extra = [t for t in registry if t.name not in SPECS]
    return default_texts() + [t.name for t in extra] + [f"{t.name}: {t.description}" for t in extra]
