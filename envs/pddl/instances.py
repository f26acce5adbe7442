"""Problem folders: the loader of a folder laid out like PlanBench's, and the persisted generated splits.

A folder holds one domain file (``domain.pddl``, or the only ``*.pddl`` that is not an instance), problems
``instance-<k>.pddl`` (task id ``k``) and, optionally, a ground-truth plan per problem
(``instance-<k>.plan`` or ``instance-<k>.soln``: one ``(action args)`` per line, ``;`` comments) and a
``split.json`` (``{"train": [k, ...], "validation": [...], "test": [...], "test-long": [...]}``). A folder
without ``split.json`` is split by object count (:func:`envs.splitting.stratified_split`, the given seed).
Loading writes nothing; every failure (an empty folder, a malformed file, objects that do not fit the
domain's types, an unknown action in a plan file) is one line naming the file.

:func:`generated_folder` writes a generator's splits into the rltf cache folder once per settings
(``pddl/sets/<domain>-<hash>/``, atomically): ``train`` / ``validation`` / ``test`` drawn from one size
range, ``test-long`` from a larger one, no instance repeated, ids numbered in that order from 1, the
whole set renamed when the settings say so (``renaming.json`` beside it). The settings' domain may be a
domain file that renames a known one (:mod:`envs.pddl.matching` finds how, or the renaming file says):
the set is then drawn by the known domain's generator and written in the file's names, the file itself as
``domain.pddl``; objects of a typed domain are named after their type in the file's names
(``<type><k>``), so no name of the known domain is left.
"""

from __future__ import annotations

import dataclasses
import functools
import hashlib
import json
import random
import re
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path

from common.atomic import atomic_dir
from common.cache_dir import cache_writes, rltf_cache_dir
from envs.pddl.errors import PddlError, PddlSemanticError
from envs.pddl.generators import GENERATORS
from envs.pddl.grounding import GroundTask, ground, split_plan_text
from envs.pddl.matching import find_renaming
from envs.pddl.model import ROOT_TYPE, Domain, Problem
from envs.pddl.parsing import read_domain, read_problem
from envs.pddl.renaming import (
    Renaming,
    draw_renaming,
    neutral_variables,
    read_renaming,
    rename_domain,
    rename_problem,
)
from envs.pddl.simulator import plan_indices
from envs.pddl.writing import domain_text, problem_text
from envs.splitting import stratified_split

SPLIT_NAMES = ("train", "validation", "test", "test-long")
SHIPPED = Path(__file__).parent / "domains"
INSTANCE = re.compile(r"^instance-(\d+)\.pddl$")


@dataclass(eq=False)
class Instance:
    """One problem of a folder: its id, the problem, the grounded task, the folder's plan for it (if any)."""

    id: int
    problem: Problem
    task: GroundTask = field(repr=False)
    given_plan: tuple[str, ...] | None = None


@dataclass(eq=False)
class ProblemSet:
    domain: Domain
    instances: list[Instance]
    split: dict[str, list[int]]
    folder: Path


def shipped_domain(name: str) -> Path | None:
    path = SHIPPED / f"{name}.pddl"
    return path if path.is_file() else None


def domain_file(folder: Path) -> Path:
    if (folder / "domain.pddl").is_file():
        return folder / "domain.pddl"
    others = sorted(p for p in folder.glob("*.pddl") if not INSTANCE.match(p.name))
    if len(others) != 1:
        raise PddlSemanticError(f"{folder}: expected one domain file (domain.pddl) beside the instance-*.pddl "
                                f"problems; found {', '.join(p.name for p in others) or 'none'}")
    return others[0]


def _plan_file(path: Path, task: GroundTask) -> tuple[str, ...]:
    text = path.read_text()
    actions = split_plan_text(text)
    _, error = plan_indices(task, actions)
    if error is not None:
        k = int(error.split()[1])
        line = next((n for n, raw in enumerate(text.splitlines(), 1)
                     if split_plan_text(raw) and split_plan_text(raw)[0] == actions[k - 1]), None)
        raise PddlSemanticError(f"{path}{f':{line}' if line else ''}: {error}")
    return tuple(actions)


def load_folder(folder: str | Path, domain: str | Path | None = None, seed: int = 0) -> ProblemSet:
    """Every ``instance-*.pddl`` of ``folder`` (see the module docstring); ``domain`` overrides its domain file.
    Remembered per (folder, domain, seed) while no file of the folder changes (a config's check reads it
    before the run builds its envs from it)."""
    folder = Path(folder)
    stamp = (str(folder.resolve()), str(domain), seed, tuple(sorted((p.name, p.stat().st_mtime_ns)
                                                                   for p in folder.iterdir()))
             if folder.is_dir() else ())
    if stamp not in _LOADED:
        _LOADED.clear()
        _LOADED[stamp] = _load_folder(folder, domain, seed)
    return _LOADED[stamp]


_LOADED: dict[tuple, ProblemSet] = {}


def _load_folder(folder: Path, domain: str | Path | None, seed: int) -> ProblemSet:
    if not folder.is_dir():
        raise PddlSemanticError(f"{folder}: not a folder of PDDL problems")
    files = sorted((int(m.group(1)), p) for p in folder.iterdir() if (m := INSTANCE.match(p.name)))
    if not files:
        raise PddlSemanticError(f"{folder}: no instance-<k>.pddl problem in the folder")
    d = read_domain(Path(domain) if domain is not None else domain_file(folder))
    instances = []
    for k, path in files:
        problem = read_problem(d, path)
        task = ground(d, problem)
        plan = next((_plan_file(p, task) for p in (path.with_suffix(".plan"), path.with_suffix(".soln"))
                     if p.is_file()), None)
        instances.append(Instance(k, problem, task, plan))
    return ProblemSet(d, instances, _split(folder, instances, seed), folder)


def _split(folder: Path, instances: list[Instance], seed: int) -> dict[str, list[int]]:
    ids = [i.id for i in instances]
    path = folder / "split.json"
    if not path.is_file():
        parts = stratified_split([i.task.size for i in instances], seed, {"validation": 0.1, "test": 0.2}, ids)
        return {**parts, "test-long": []}
    try:
        data = json.loads(path.read_text())
        parts = {name: [int(i) for i in data.get(name, [])] for name in SPLIT_NAMES}
    except (OSError, ValueError, TypeError, AttributeError) as e:
        raise PddlSemanticError(f"{path}: expected JSON {{split name: [instance numbers]}} ({e})") from None
    missing = sorted({i for v in parts.values() for i in v} - set(ids))
    if missing:
        raise PddlSemanticError(f"{path}: instance {missing[0]} is in a split but instance-{missing[0]}.pddl is "
                                "not in the folder")
    return parts


# ------------------------------------------------------------------------------- generated sets
@dataclass(frozen=True)
class GeneratedSettings:
    """What a generated set is a function of (its folder's name hashes these)."""

    domain: str
    sizes: tuple[int, int]
    long_sizes: tuple[int, int]
    counts: tuple[int, int, int, int]  # train, validation, test, test-long
    seed: int
    generator: tuple[tuple[str, int], ...] = ()
    obfuscation_seed: int | None = None
    renaming_file: str | None = None

    def key(self) -> str:
        renaming = Path(self.renaming_file).read_text() if self.renaming_file else None
        source = Path(self.domain) if self.domain not in GENERATORS else SHIPPED / f"{self.domain}.pddl"
        blob = json.dumps([self.domain, self.sizes, self.long_sizes, self.counts, self.seed, self.generator,
                           self.obfuscation_seed, renaming, source.read_text()])
        if self.obfuscation_seed is not None or renaming is not None:  # renamed before v2: variables, types kept
            blob += "renamed-v2"
        if self.domain not in GENERATORS:  # a handed domain: the known domain it renames is part of the set
            blob += (SHIPPED / f"{handed_renaming(self.domain, self.renaming_file)[0]}.pddl").read_text()
        return hashlib.sha256(blob.encode()).hexdigest()[:16]


@functools.cache
def known_domains() -> dict[str, Domain]:
    """The domains the generators know, parsed from their shipped files."""
    return {name: read_domain(SHIPPED / f"{name}.pddl") for name in GENERATORS if shipped_domain(name)}


def handed_renaming(path: str | Path, renaming_file: str | None = None) -> tuple[str, Renaming, Domain]:
    """``(known domain, renaming, handed domain)``: the generator's domain that the domain file ``path``
    renames and how (matched, or ``renaming_file`` checked); one line naming what did not match."""
    handed = read_domain(path)
    given = read_renaming(renaming_file) if renaming_file else None
    name, renaming = find_renaming(handed, known_domains(), given)
    return name, renaming, handed


def typed_object_names(problems: list[Problem], renaming: Renaming) -> dict[str, str]:
    """Every object of ``problems`` -> ``<its type renamed><k>`` (k counts within the type in the order the
    objects first appear): object names that carry no name of the domain they were generated in."""
    names: dict[str, str] = {}
    counts: Counter = Counter()
    for p in problems:
        for o, t in p.objects.items():
            if o not in names:
                new = renaming.types.get(t, t)
                names[o] = f"{new}{counts[new]}"
                counts[new] += 1
    return names


def _draw(settings: GeneratedSettings, domain: Domain, generator: str | None = None,
          prefix: str | None = None) -> tuple[list[Problem], dict[str, list[int]]]:
    generate = GENERATORS[generator or settings.domain]
    prefix = prefix or settings.domain
    rng = random.Random(settings.seed)
    seen: set[str] = set()
    problems: list[Problem] = []
    split: dict[str, list[int]] = {}
    exhausted: set[int] = set()  # sizes whose distinct instances ran out (3 blocks: ~169 problems in all)
    for name, count in zip(SPLIT_NAMES, settings.counts):
        lo, hi = settings.long_sizes if name == "test-long" else settings.sizes
        split[name] = []
        for j in range(count):
            p = None
            for size in _turn(lo, hi, j, exhausted):  # this turn's size, else the next one not exhausted
                for _ in range(1000):
                    k = len(problems) + 1
                    p = generate(domain, size, rng, f"{prefix}-{k}", **dict(settings.generator))
                    text = problem_text(dataclasses.replace(p, name="x"))
                    if text not in seen:
                        break
                else:
                    exhausted.add(size)
                    p = None
                    continue
                break
            if p is None:
                raise PddlError(f"cannot draw {count} distinct {name} instances of {prefix} with sizes "
                                f"{lo}..{hi}; ask for fewer or widen the sizes")
            seen.add(text)
            problems.append(p)
            split[name].append(k)
    return problems, split


def _turn(lo: int, hi: int, j: int, exhausted: set[int]) -> list[int]:
    """The sizes the ``j``-th instance of a split may take, in order: the sizes whose distinct instances have
    not run out go in turn (``j mod`` their number; while none has run out, ``lo + j mod n``: the draws of a
    split that never runs out are unchanged), then the others of them."""
    sizes = [s for s in range(lo, hi + 1) if s not in exhausted]
    if not sizes:
        return []
    first = j % len(sizes)
    return sizes[first:] + sizes[:first]


def renaming_of(settings: GeneratedSettings, domain: Domain, problems: list[Problem]) -> Renaming | None:
    if settings.renaming_file:
        return read_renaming(settings.renaming_file)
    if settings.obfuscation_seed is None:
        return None
    objects = sorted({o for p in problems for o in p.objects})
    return draw_renaming(domain, objects, settings.obfuscation_seed, types=True)


def generated_folder(settings: GeneratedSettings) -> Path:
    """The folder of ``settings``' set, written on first use (see the module docstring)."""
    if settings.domain not in GENERATORS and Path(settings.domain).is_file():
        return _handed_folder(settings)
    source = shipped_domain(settings.domain)
    if source is None or settings.domain not in GENERATORS:
        raise PddlSemanticError(f"no generator for domain {settings.domain!r}; the env generates "
                                f"{', '.join(GENERATORS)} (or give env.pddl.problems, a folder of problems)")
    root = rltf_cache_dir("pddl", "sets")
    target = root / f"{settings.domain}-{settings.key()}"
    if (target / "split.json").is_file():
        return target
    domain = read_domain(source)
    problems, split = _draw(settings, domain)
    renaming = renaming_of(settings, domain, problems)
    with cache_writes(root), atomic_dir(target, complete_marker="split.json") as tmp:
        if renaming is not None:  # no name of the original left: neither the domain's nor its variables'
            name = "mystery" if settings.obfuscation_seed is None else f"mystery-{settings.obfuscation_seed}"
            domain = neutral_variables(rename_domain(domain, renaming, name))
            problems = [dataclasses.replace(rename_problem(p, renaming, name), name=f"{name}-{k}")
                        for k, p in enumerate(problems, 1)]
            (tmp / "renaming.json").write_text(renaming.to_json())
        (tmp / "domain.pddl").write_text(domain_text(domain))
        for k, p in enumerate(problems, 1):
            (tmp / f"instance-{k}.pddl").write_text(problem_text(p, "typing" in domain.requirements))
        (tmp / "split.json").write_text(json.dumps(split))
    return target


def _safe(name: str) -> str:
    return re.sub(r"[^a-z0-9_-]+", "-", name.lower()).strip("-") or "domain"


def _handed_folder(settings: GeneratedSettings) -> Path:
    """A set drawn by the generator of the known domain that ``settings.domain`` (a file) renames, written
    in the file's names (see the module docstring)."""
    if settings.obfuscation_seed is not None:
        raise PddlSemanticError(f"{settings.domain}: a domain file fixes the names; give no obfuscation seed")
    known, renaming, handed = handed_renaming(settings.domain, settings.renaming_file)
    root = rltf_cache_dir("pddl", "sets")
    target = root / f"{known}-as-{_safe(handed.name)}-{settings.key()}"
    if (target / "split.json").is_file():
        return target
    problems, split = _draw(settings, known_domains()[known], known, _safe(handed.name))
    if not renaming.objects and any(t != ROOT_TYPE for p in problems for t in p.objects.values()):
        renaming = dataclasses.replace(renaming, objects=typed_object_names(problems, renaming))
    typing = "typing" in handed.requirements
    with cache_writes(root), atomic_dir(target, complete_marker="split.json") as tmp:
        (tmp / "renaming.json").write_text(renaming.to_json())
        (tmp / "domain.pddl").write_text(handed.text or Path(settings.domain).read_text())
        for k, p in enumerate(problems, 1):
            (tmp / f"instance-{k}.pddl").write_text(problem_text(rename_problem(p, renaming, handed.name), typing))
        (tmp / "split.json").write_text(json.dumps(split))
    return target
