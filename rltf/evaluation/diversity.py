"""How diverse the constrained policy π_c is, per task: distinct plans, the top plan's probability, entropy.

A planner that puts almost all of π_c's mass on one plan per task cannot explore: its K samples per
step agree, every advantage is zero under a group baseline, and RLTF stops learning (measured on
SmolLM2-135M: 4 distinct plans over 10 test tasks, top plan probability 0.91-0.999, 32 samples of a
task giving 1 distinct plan). :func:`policy_diversity` measures, for each task (prompt + grammar):

* ``distinct_plans`` — distinct plans among ``samples`` draws from π_c (at ``temperature``), each
  task's draws seeded by ``(seed, task key)`` alone (:func:`sample_seeds`), so the count does not
  depend on the other tasks decoded with it, on the process that decodes it, nor on any global RNG;
* ``entropy`` (nats) — **exact** when the grammar's plan set is enumerable: at most ``max_plans``
  plans (:meth:`~constrained_decoding.protocol.Grammar.enumerate`, cut at ``max_plans + 1``), each
  teacher-forced (:func:`~constrained_decoding.logprobs.plan_logprobs`), H = −Σ p log p, after
  checking that the probabilities sum to 1 (π_c is normalised over the valid plans, so a gap means
  the enumeration missed plans; the task then falls back to the estimate, with a warning).
  Otherwise the Monte-Carlo estimate −mean log π_c(sample) over the same samples, with its
  standard error ``entropy_se`` (0 when exact);
* ``top_plan_prob`` — π_c of the most likely plan: exact (the enumeration's maximum) when
  enumerated; otherwise the best of a constrained beam search of width ``num_beams`` (re-scored at
  ``temperature``) and of the samples: a lower bound, exact whenever the beam finds the mode.

Everything runs on the model's device in decoding mode (eval, no autograd; the model's mode is
restored), draws from its own generators and leaves the global RNGs alone, so measuring a planner
during training changes nothing in the run. :func:`validation_diversity` is the periodic
validation's share (``eval.diversity_samples``; keys :data:`DIVERSITY_KEYS`), split over the
launch's processes like the schemas are; :func:`diversity_curve` / :func:`diversity_markdown` are
what ``rewards.png`` and ``results.md`` show of it. The last validation's per-task values are kept in
``<run>/rltf/`` (:func:`save_last_diversity`), so a resumed run that validates no more (a finished
run resumed, a run killed after its last validation) still reports them (:func:`load_last_diversity`).
"""

from __future__ import annotations

import itertools
import json
import math
import warnings
from collections.abc import Sequence
from dataclasses import asdict, dataclass
from pathlib import Path

import numpy as np

from common.atomic import write_atomic
from constrained_decoding.decode import beam_search_plans, decoding_mode, sample_plans
from constrained_decoding.logprobs import plan_logprobs
from constrained_decoding.protocol import Grammar
from envs.protocol import RLTFEnv, Task
from rltf.config.loading import RunConfig
from rltf.rl.training_state import VALIDATION_PREFIX
from rltf.run.distributed import gather_objects, launch_share

PREFIX = VALIDATION_PREFIX
"""The validation row's keys (beside ``eval/validation/score``) are ``PREFIX + name`` for each name of
:data:`DIVERSITY_KEYS`, which says what it means."""
DIVERSITY_KEYS = {
    "distinct_plans": "mean over the validation tasks of the distinct plans among eval.diversity_samples draws",
    "top_plan_prob": "mean π_c of each task's most likely plan",
    "entropy": "mean entropy of π_c over each task's plans, in nats (exact where enumerable, else estimated)",
    "entropy_se": "standard error of the mean entropy (from the estimated tasks; 0 when all are exact)",
    "entropy_exact_share": "share of the validation tasks whose entropy is exact (plan set enumerated)",
}
SUM_TOLERANCE = 1e-4
"""How far Σ π_c over an enumerated plan set may be from 1 (float32 log-probabilities of hundreds of
plans: ~1e-6 in practice) before the enumeration is taken to be incomplete."""


@dataclass(frozen=True)
class TaskDiversity:
    """One task's diversity under π_c (see the module docstring)."""

    key: int  # the task's key (its id): seeds its samples
    samples: int  # draws from π_c
    distinct_plans: int  # distinct plans among them
    top_plan_prob: float  # π_c of the most likely plan (exact when enumerated, else a lower bound)
    entropy: float  # nats: exact when enumerated, else -mean log π_c(sample)
    entropy_se: float  # standard error of the estimate; 0.0 when exact
    exact: bool  # whether the plan set was enumerated
    plan_count: int | None  # how many valid plans (None: more than max_plans, not counted)
    top_plan: str  # the most likely plan's text


@dataclass(frozen=True)
class Diversity:
    """Per-task diversity and its means over the tasks (:meth:`means`: the validation row's values)."""

    tasks: tuple[TaskDiversity, ...]

    def means(self) -> dict[str, float]:
        """The :data:`DIVERSITY_KEYS` means over the tasks (``entropy_se``: the standard error of the
        mean entropy, sqrt(Σ se²) / n); empty when there are no tasks."""
        if not self.tasks:
            return {}
        n = len(self.tasks)
        return {"distinct_plans": float(np.mean([t.distinct_plans for t in self.tasks])),
                "top_plan_prob": float(np.mean([t.top_plan_prob for t in self.tasks])),
                "entropy": float(np.mean([t.entropy for t in self.tasks])),
                "entropy_se": math.sqrt(sum(t.entropy_se ** 2 for t in self.tasks)) / n,
                "entropy_exact_share": sum(t.exact for t in self.tasks) / n}

    def row(self, prefix: str = PREFIX) -> dict[str, float]:
        """:meth:`means` under ``prefix`` (a validation row's keys)."""
        return {prefix + k: v for k, v in self.means().items()}

    def as_dict(self) -> dict:
        return {"means": self.means(), "tasks": [asdict(t) for t in self.tasks]}


def sample_seeds(seed: int, key: int, samples: int) -> list[int]:
    """The ``samples`` sampling seeds of the task ``key`` under ``seed`` (non-negative 31-bit ints,
    from numpy's SeedSequence: no global state)."""
    state = np.random.SeedSequence([int(seed), int(key) & 0xFFFFFFFF, 0x5EED]).generate_state(samples)
    return [int(x) & 0x7FFFFFFF for x in state]


def enumerated_plans(grammar: Grammar, max_plans: int) -> list | None:
    """Every valid plan of ``grammar`` when there are at most ``max_plans`` of them, else None."""
    if max_plans <= 0:
        return None
    plans = list(itertools.islice(grammar.enumerate(), max_plans + 1))
    return plans if len(plans) <= max_plans else None


def policy_diversity(model, tokenizer, prompts: Sequence[str], grammars: Sequence[Grammar], *,
                     samples: int = 16, seed: int = 0, keys: Sequence[int] | None = None,
                     max_plans: int = 1000, num_beams: int = 8, temperature: float = 1.0,
                     chunk: int = 512) -> Diversity:
    """Each task's :class:`TaskDiversity` under π_c (``prompts``: task descriptions, as the trainer and
    the decoder take them; one grammar per prompt). ``samples``: draws per task; ``keys``: one int per
    task that seeds its draws with ``seed`` (default: its position); ``max_plans``: the largest plan set
    enumerated for the exact entropy (0: always estimate); ``num_beams``: the beam search width for the
    top plan of a task not enumerated; ``chunk``: plans teacher-forced per forward pass."""
    if samples < 1:
        raise ValueError(f"samples={samples}: expected at least 1 draw per task")
    prompts, grammars = list(prompts), list(grammars)
    keys = list(range(len(prompts))) if keys is None else [int(k) for k in keys]
    if not len(prompts) == len(grammars) == len(keys):
        raise ValueError(f"got {len(prompts)} prompts, {len(grammars)} grammars and {len(keys)} keys; expected one "
                         "of each per task")
    if not prompts:
        return Diversity(())
    seeds = [s for k in keys for s in sample_seeds(seed, k, samples)]
    drawn = sample_plans(model, tokenizer, prompts, grammars, samples, temperature, sample_seeds=seeds)
    enumerated = [enumerated_plans(g, max_plans) for g in grammars]
    exact = _exact_logprobs(model, tokenizer, prompts, grammars, keys, enumerated, temperature, chunk)
    beamed = [i for i, lp in enumerate(exact) if lp is None]
    best = _beam_top(model, tokenizer, [prompts[i] for i in beamed], [grammars[i] for i in beamed], num_beams,
                     temperature)
    top = dict(zip(beamed, best))
    out = []
    for i, (key, ds, g) in enumerate(zip(keys, drawn, grammars)):
        lps = np.array([d.logprob for d in ds], dtype=np.float64)
        distinct = len({d.text for d in ds})
        if exact[i] is not None:
            p = np.exp(exact[i])
            j = int(np.argmax(p))
            entropy = max(0.0, float(-np.sum(p * exact[i])))  # (a log-prob of 1e-7 above 0: float32)
            out.append(TaskDiversity(key, samples, distinct, float(p[j]), entropy, 0.0, True, len(p),
                                     g.format(enumerated[i][j])))
            continue
        (beam_lp, beam_text) = top[i]
        j = int(np.argmax(lps))
        top_lp, top_text = (beam_lp, beam_text) if beam_lp >= lps[j] else (float(lps[j]), ds[j].text)
        se = float(np.std(lps, ddof=1) / math.sqrt(samples)) if samples > 1 else math.nan  # (one draw: unknown)
        entropy = max(0.0, float(-lps.mean()))
        out.append(TaskDiversity(key, samples, distinct, math.exp(top_lp), entropy, se, False, None, top_text))
    return Diversity(tuple(out))


def _exact_logprobs(model, tokenizer, prompts, grammars, keys, enumerated, temperature,
                    chunk) -> list[np.ndarray | None]:
    """log π_c of every enumerated plan per task (float64), None where not enumerated or where the
    probabilities do not sum to 1 (warned)."""
    jobs = [(i, plan) for i, plans in enumerate(enumerated) if plans is not None for plan in plans]
    scored = []
    with decoding_mode(model):
        for at in range(0, len(jobs), chunk):
            part = jobs[at:at + chunk]
            lp = plan_logprobs(model, tokenizer, [prompts[i] for i, _ in part], [grammars[i] for i, _ in part],
                               [plan for _, plan in part], temperature)
            scored.extend(lp.double().cpu().tolist())
    out: list[np.ndarray | None] = [None] * len(prompts)
    at = 0
    for i, plans in enumerate(enumerated):
        if plans is None:
            continue
        lps = np.array(scored[at:at + len(plans)], dtype=np.float64)
        at += len(plans)
        total = float(np.exp(lps).sum())
        if abs(total - 1.0) > SUM_TOLERANCE:
            warnings.warn(f"task {keys[i]}: the {len(plans)} enumerated plans of {grammars[i]!r} hold π_c mass "
                          f"{total:.6f}, not 1: the enumeration misses plans; its entropy is estimated instead",
                          RuntimeWarning, stacklevel=3)
            continue
        out[i] = lps
    return out


def _beam_top(model, tokenizer, prompts, grammars, num_beams: int, temperature: float) -> list[tuple[float, str]]:
    """``(log π_c, text)`` of the best of a beam search's plans per prompt, at ``temperature``."""
    if not prompts:
        return []
    found = beam_search_plans(model, tokenizer, prompts, grammars, num_beams=num_beams)
    if temperature == 1.0:
        return [(ds[0].logprob, ds[0].text) for ds in found]
    flat = [d for ds in found for d in ds]
    with decoding_mode(model):
        lps = plan_logprobs(model, tokenizer, [p for p, ds in zip(prompts, found) for _ in ds],
                            [d.grammar for d in flat], flat, temperature).double().cpu().tolist()
    out, at = [], 0
    for ds in found:
        j = max(range(len(ds)), key=lambda k: lps[at + k])
        out.append((lps[at + j], ds[j].text))
        at += len(ds)
    return out


def validation_diversity(planner, env: RLTFEnv, tasks: Sequence[Task], cfg: RunConfig) -> Diversity:
    """:func:`policy_diversity` of ``planner`` on ``tasks`` as the run config says (``eval.diversity_samples``
    draws per task at ``rltf.temperature``, the policy RLTF samples from, seeded by ``seed`` and each
    task's id; ``eval.diversity_max_plans``; ``eval.num_beams``), with ``env``'s grammars; shared over
    the launch's processes like the evaluation schemas (each process its every n-th task; a collective:
    every process must call it, with every parameter at hand)."""
    samples, seed, max_plans = cfg.eval.diversity_samples, cfg.seed, cfg.eval.diversity_max_plans
    num_beams, temperature = cfg.eval.num_beams, cfg.rltf.temperature
    rank, world = launch_share()
    mine = list(range(rank, len(tasks), world))
    part = policy_diversity(planner.model, planner.tokenizer, [tasks[i].description for i in mine],
                            [env.grammar(planner.tokenizer, tasks[i]) for i in mine], samples=samples, seed=seed,
                            keys=[tasks[i].id for i in mine], max_plans=max_plans, num_beams=num_beams,
                            temperature=temperature)
    if world == 1:
        return part
    found = {t.key: t for p in gather_objects(part) for t in p.tasks}
    return Diversity(tuple(found[t.id] for t in tasks))


def diversity_curve(validation: Sequence[dict] | None, prefix: str = PREFIX) -> list[dict]:
    """``{"step", <DIVERSITY_KEYS>...}`` of the validation rows that hold diversity (what ``rewards.png``
    draws and ``results.json`` keeps), in step order."""
    return [{"step": r["step"], **{k: r[prefix + k] for k in DIVERSITY_KEYS if prefix + k in r}}
            for r in validation or () if prefix + "entropy" in r]


LAST_FILE = "diversity_last.json"
"""The last validation's per-task diversity, in the run's checkpoint folder (``<run>/rltf/``)."""


def save_last_diversity(folder: str | Path, diversity: Diversity) -> Path:
    """Keep ``diversity`` (a validation's, :meth:`Diversity.as_dict`) in ``folder`` (atomically)."""
    return write_atomic(Path(folder) / LAST_FILE, json.dumps(diversity.as_dict(), indent=1) + "\n")


def load_last_diversity(folder: str | Path, curve: Sequence[dict]) -> Diversity | None:
    """The per-task diversity :func:`save_last_diversity` kept in ``folder`` when it is the last row of
    ``curve`` (:func:`diversity_curve` of the run's validations: the same means); None otherwise
    (none kept, unreadable, or another validation's)."""
    try:
        kept = json.loads((Path(folder) / LAST_FILE).read_text(encoding="utf-8"))
        found = Diversity(tuple(TaskDiversity(**t) for t in kept["tasks"]))
    except (OSError, ValueError, TypeError, KeyError):
        return None
    last = {k: v for k, v in curve[-1].items() if k != "step"} if curve else None
    return found if last is not None and found.means() == last else None


def diversity_markdown(curve: Sequence[dict], samples: int) -> str:
    """A ``results.md`` section: the diversity of π_c at each validation (empty without any)."""
    if not curve:
        return ""
    lines = ["", f"## Policy diversity on the validation tasks ({samples} samples per task)", "",
             "| step | distinct plans | top plan prob | entropy (nats) | exact share |", "|---|---|---|---|---|"]
    lines += [f"| {r['step']} | {r['distinct_plans']:.2f} | {r['top_plan_prob']:.3f} | {r['entropy']:.3f} ± "
              f"{r['entropy_se']:.3f} | {r['entropy_exact_share']:.2f} |" for r in curve]
    return "\n".join(lines) + "\n"


def diversity_results(validation: Sequence[dict] | None, last: Diversity | None, samples: int) -> tuple[dict, str]:
    """What a run's results keep of its validations' diversity: ``({"policy_diversity": {"samples",
    "curve" (:func:`diversity_curve`), "last" (the last validation's means and per-task values)}},
    the results.md section)``; ``({}, "")`` when no validation measured it."""
    curve = diversity_curve(validation)
    if not curve:
        return {}, ""
    found = {"samples": samples, "curve": curve, "last": last.as_dict() if last is not None else None}
    return {"policy_diversity": found}, diversity_markdown(curve, samples)
