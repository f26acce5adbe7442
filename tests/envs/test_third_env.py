"""The env interface is enough: a third env defined only here ("sort three words", built on
``envs.base.RLTFEnvBase``: it writes its tasks, grammar, reward and formatting, the base answers the
rest) is registered through ``envs.registry``, passes ``envs.checker.check_rltf_env``, and trains end
to end through ``train/rltf.py``'s stages (config -> envs -> planner -> SFT -> RLTF -> evaluation ->
report) without any change to rltf."""

from __future__ import annotations

import contextlib
import io
import itertools
import json
from dataclasses import dataclass

import numpy as np
import pytest

from common.config_fields import bound_errors, num
from constrained_decoding.rows import RowLanguageGrammar, RowText, build_row_languages
from envs import registry
from envs.base import RLTFEnvBase
from envs.checker import check_rltf_env
from envs.registry import EnvSpec
from rltf.config.loading import ConfigError, load_config
from rltf.planners.tokenizer import train_plan_tokenizer
from rltf.stages import plan_job as stages

pytestmark = pytest.mark.usefixtures("one_torch_thread")

NAME = "sorting"
WORDS = ("apple", "banana", "cherry", "damson", "elder", "fig", "grape", "hazel")
SPLIT = {"train": list(range(0, 10)), "validation": [10, 11], "test": [12, 13]}


# ---------------------------------------------------------------------------------- the env
@dataclass(frozen=True)
class SortTask:
    id: int
    words: tuple[str, str, str]
    metric: str = "sorting"

    @property
    def description(self) -> str:
        return "sort: " + " ".join(self.words)

    @property
    def reference_plan(self) -> str:
        return " ".join(sorted(self.words))


@dataclass(frozen=True)
class SortResult:
    task_id: int
    plan_text: str
    reward: float
    valid: bool
    error: str | None = None
    sample_errors: tuple = ()


class SortGrammar(RowLanguageGrammar):
    """Every order of the task's three words, one root row (a constrained_decoding Grammar)."""

    branching = False

    def __init__(self, tokenizer, task: SortTask):
        self.orders = [" ".join(p) for p in itertools.permutations(task.words)]
        self.rows = build_row_languages(tokenizer, [[RowText(o, o) for o in self.orders]], where=f"task {task.id}")

    def branch_starts(self, root_tokens):
        return ()

    def assemble(self, root_tokens, branch_tokens=()):
        return self.rows.meaning(self.root, root_tokens)

    def rows_for(self, action):
        if action not in self.orders:
            raise ValueError(f"{action!r} is not an order of the task's words")
        return [(self.root, self.rows.tokens(0, action))]

    def format(self, action):
        return action

    def enumerate(self):
        return iter(self.orders)


class SortEnv(RLTFEnvBase):
    """Reward: the fraction of the three positions holding the right word; text that is not an order
    of the task's words is invalid (0). No oracle (the base's None), no columns of its own."""

    def __init__(self, seed: int, task_ids: list[int]):
        super().__init__()
        rng = np.random.default_rng(seed)
        self.all = {i: SortTask(i, tuple(str(w) for w in rng.choice(WORDS, 3, replace=False)))
                    for i in range(14)}
        self.task_ids = task_ids
        self._grammars: dict = {}

    def tasks(self):
        return [self.all[i] for i in self.task_ids]

    def get_task(self, task):
        if isinstance(task, SortTask):
            return task
        if isinstance(task, (int, np.integer)) and int(task) in self.all:
            return self.all[int(task)]
        raise ValueError(f"unknown task {task!r}; expected an id in 0..{len(self.all) - 1}")

    def grammar(self, tokenizer, task):
        task = self.get_task(task)
        key = (id(tokenizer), task.id)
        if key not in self._grammars:
            self._grammars[key] = SortGrammar(tokenizer, task)
        return self._grammars[key]

    def reward_plans(self, pairs, rng=None):
        out = []
        for ref, plan in pairs:
            task, text = self.get_task(ref), str(plan)
            words = text.split()
            if sorted(words) != sorted(task.words):
                out.append(SortResult(task.id, text, 0.0, False, "not an order of the task's words"))
                continue
            right = sum(a == b for a, b in zip(words, sorted(task.words)))
            out.append(SortResult(task.id, text, right / 3, True))
        return out

    def format_plan(self, plan):
        return str(plan)

    def plan_instructions(self):
        return "Answer with the words of the task in alphabetical order, separated by spaces."

    def tokenizer_texts(self, task_ids=None):
        ids = self.task_ids if task_ids is None else task_ids
        return [self.all[i].description for i in ids] + list(WORDS)


@dataclass
class SortSection:
    name: str = NAME
    seed: int = num(0, ge=0)  # draws the tasks' words

    def validate(self, section: str = "env") -> None:
        for message in bound_errors(self, f"{section}."):
            raise ValueError(message)


def _make(section, split="train", **_):
    ids = [i for p in SPLIT.values() for i in p] if split == "all" else SPLIT[split]
    return SortEnv(section.seed, ids)


SPEC = EnvSpec(name=NAME, section=SortSection, make=_make,
               make_train_and_held_out=lambda s, **_: (_make(s, "train"), _make(s, "all")),
               split_ids=lambda s: {k: list(v) for k, v in SPLIT.items()},
               describe=lambda s: [f"env         sorting three words, seed {s.seed}, "
                                   f"{len(SPLIT['train'])} train tasks"])


@pytest.fixture(scope="module", autouse=True)
def sorting_env():
    registry.register(SPEC)
    yield
    registry.unregister(NAME)


# ---------------------------------------------------------------------------------- the tests
def test_the_sorting_env_passes_the_checker():
    import envs

    train, held_out = envs.make_train_and_held_out({"name": NAME, "seed": 1})
    tokenizer = train_plan_tokenizer(train.tokenizer_texts(), vocab_size=300)
    check_rltf_env(train, tokenizer)
    check_rltf_env(held_out, tokenizer)


def test_its_config_keys_are_its_own():
    assert load_config([f"env.name={NAME}", "env.seed=3"]).env == SortSection(seed=3)
    with pytest.raises(ConfigError, match=rf"'env.travel' .* is a key of the travel env, not of the {NAME} env"):
        load_config([f"env.name={NAME}", "env.travel.days=[3]"])
    with pytest.raises(ConfigError, match=r"'env.seed': -1; expected an integer >= 0"):
        load_config([f"env.name={NAME}", "env.seed=-1"])


TINY = [f"env.name={NAME}", "planner.embedded.encoder=scratch", "planner.embedded.d_model=32",
        "planner.embedded.d_ff=64", "planner.embedded.num_layers=1", "planner.embedded.num_heads=2",
        "planner.embedded.vocab_size=300", "sft.epochs=2", "sft.batch_size=8", "rltf.steps=2",
        "rltf.tasks_per_batch=2", "rltf.k_samples=2", "rltf.eval_every=2", "rltf.checkpoint_every=2",
        "eval.num_beams=2", "eval.splits=[test]", "logging.progress_bar=false"]


def test_the_sorting_env_trains_end_to_end_through_the_main_jobs_stages(tmp_path):
    cfg = load_config([f"output_dir={tmp_path}", "run_name=sorting", f"planner.embedded.dir={tmp_path / 'emb'}",
                       *TINY])
    out = io.StringIO()
    with contextlib.redirect_stdout(out):  # train/rltf.py's run(), stage by stage
        job = stages.start(cfg)
        envs_ = stages.build_envs(job)
        planner = stages.build_planner(job, envs_)
        tasks = envs_.tasks(cfg.eval.splits)
        results = stages.evaluate_untrained(job, planner, envs_, tasks)
        stages.fine_tune(job, planner, envs_, job.run_dir / "sft")
        results |= stages.evaluate(job, {"finetuned"}, planner, envs_, tasks)
        history = stages.train_rltf(job, planner, envs_)
        results |= stages.evaluate(job, {"rltf", "reference", "oracle"}, planner, envs_, tasks)
        summary = stages.report(job, results, tasks, title="sorting", history=history)
    last = out.getvalue().strip().splitlines()[-1]
    assert last.startswith("held-out overall: zero=n/a few=n/a finetuned=") and last.endswith(" oracle=n/a"), last
    table = json.loads((tmp_path / "sorting" / "results.json").read_text())["table"]
    assert list(table["rows"]) == ["zero", "few", "finetuned", "rltf", "reference", "oracle"]
    assert table["n/a"]["oracle"] == "the env has no oracle"
    for schema in ("finetuned", "rltf", "reference"):
        assert 0 <= table["rows"][schema]["overall"] <= 1
        assert set(summary["scores"][schema]) == set(SPLIT["test"])
    assert table["rows"]["reference"]["overall"] == 1.0  # the sorted words score 1
    assert len(history) == 2 and all(0 <= row["train/reward"] <= 1 for row in history)
    assert history[-1]["train/valid"] == 1.0  # every sampled plan is an order of the words (the grammar)
    md = (tmp_path / "sorting" / "results.md").read_text()
    assert md.index("| rltf") < md.index("| oracle | n/a |")  # the n/a row in its place (after "rltf (best ...)")
