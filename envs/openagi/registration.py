"""The OpenAGI env's :class:`~envs.registry.EnvSpec` (``env.name: openagi``, the default; in Gymnasium
``OpenAGI-Lite-v0``). :data:`envs.registry.BUILTIN_ENVS` names :data:`SPEC` by its import path, so
this module is imported on the first lookup of ``openagi``. Its section is
:class:`envs.openagi.config.OpenAGIEnvConfig` (its keys at the top of ``env:``)."""

from __future__ import annotations

from collections.abc import Sequence

from envs.openagi.config import OpenAGIEnvConfig
from envs.openagi.corpus import default_texts
from envs.openagi.factory import describe_env, make_env, make_envs
from envs.openagi.split import load_split
from envs.openagi.tools import OPENAGI_TOOLS
from envs.registry import EnvSpec

GYM_ID = "OpenAGI-Lite-v0"
# Exhaustive plan search is only affordable with the offline zoo; on the full grammar a VQA task
# alone has millions of valid plans (enumerate_plans under SUITE_LIMITS["full"]).
ORACLE_NOTE = ("eval.schemas includes 'oracle' (exhaustive plan search): the full suite has up to "
               "~6 million valid plans per task, far too many to execute with hub experts; drop it")


def make(section: OpenAGIEnvConfig, split: str = "train", **kwargs):
    return make_env(section, split, **kwargs)


def make_train_and_held_out(section: OpenAGIEnvConfig, **kwargs):
    return make_envs(section, **kwargs)


def split_ids(section: OpenAGIEnvConfig) -> dict[str, list[int]]:
    return load_split(section.suite)


def describe(section: OpenAGIEnvConfig) -> list[str]:
    return describe_env(section)


def tool_names() -> list[str]:
    """OpenAGI's 15 tool names: whole pieces of every embedded tokenizer (the default env's words)."""
    return [t.name for t in OPENAGI_TOOLS]


def evaluation_warnings(section: OpenAGIEnvConfig, schemas: Sequence[str]) -> list[str]:
    """The oracle's exhaustive search on the full suite (:data:`ORACLE_NOTE`)."""
    return [ORACLE_NOTE] if section.suite == "full" and "oracle" in schemas else []


SPEC = EnvSpec(name="openagi", section=OpenAGIEnvConfig, make=make, make_train_and_held_out=make_train_and_held_out,
               split_ids=split_ids, describe=describe, gym_id=GYM_ID, tokenizer_texts=default_texts,
               tokenizer_words=tool_names, evaluation_warnings=evaluation_warnings, enumerable_plans=True)
