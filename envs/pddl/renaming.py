"""Obfuscation: a consistent renaming of a domain's predicates, actions and types and a problem's objects
(Mystery Blocksworld is one such renaming), drawn from a word list with a seed or read from a file.

A :class:`Renaming` maps each kind's old names to new ones; :func:`rename_domain` / :func:`rename_problem`
apply it to the model and :meth:`Renaming.inverse` undoes it, so a plan in either naming maps onto the
other action by action. A renaming file is JSON: ``{"predicates": {old: new}, "actions": {...},
"objects": {...}, "types": {...}}`` (a kind left out keeps its names).
"""

from __future__ import annotations

import json
import random
from dataclasses import dataclass, field
from pathlib import Path

from envs.pddl.errors import PddlSemanticError
from envs.pddl.model import ActionSchema, Atom, Domain, Literal, Problem

WORDS = tuple("""
acorn amber anchor anvil apricot arch aspen atlas badge bagel balsa bamboo banjo barley basil beacon
bellow birch biscuit blanket bramble brass breeze brick bristle bucket buckle cactus camber candle canvas
carbon cedar cello chalk charcoal cherry chisel cider cinder clover cobalt comet copper coral cotton crane
crater crescent crystal cypress daisy dawn delta denim dune ember fable falcon feather fennel fern fiddle
flint fog frost garnet gazelle ginger glacier granite gravel harbor hazel heron hickory honey horizon
indigo iris ivory jasmine juniper kettle kiwi lagoon lantern lark lava lemon lilac linen lotus magnet
mango maple marble meadow melon mint mosaic moss nectar nickel nutmeg oak oasis olive onyx opal orchid
otter paddle panther parcel pebble pepper pewter pine plum pollen poppy prism quartz quill quince radish
raven reed ribbon river robin saffron sage sapphire satin shale shovel sienna silver slate sorrel spruce
sparrow spindle sprout squash summit swallow tallow thistle thimble thyme timber topaz tulip tundra
turnip velvet violet walnut willow wren yarrow zephyr zinc
""".split())
KINDS = ("predicates", "actions", "objects", "types")


@dataclass(frozen=True)
class Renaming:
    """Old name -> new name per kind (``predicates``, ``actions``, ``objects``, ``types``); names not listed
    stay."""

    predicates: dict[str, str] = field(default_factory=dict)
    actions: dict[str, str] = field(default_factory=dict)
    objects: dict[str, str] = field(default_factory=dict)
    types: dict[str, str] = field(default_factory=dict)

    def inverse(self) -> Renaming:
        return Renaming(*({v: k for k, v in getattr(self, kind).items()} for kind in KINDS))

    def action_text(self, text: str) -> str:
        """``(stack a b)`` in the new names."""
        name, *args = text.strip("()").split()
        return f"({' '.join((self.actions.get(name, name), *(self.objects.get(a, a) for a in args)))})"

    def to_json(self) -> str:
        return json.dumps({k: getattr(self, k) for k in KINDS}, indent=1, sort_keys=True)


def draw_renaming(domain: Domain, objects: list[str], seed: int, types: bool = False) -> Renaming:
    """Fresh distinct words for every predicate, action and object (in that order), drawn with ``seed``;
    ``types``: for every declared type too (after the others; without it the draw is the same as before)."""
    type_names = list(domain.types) if types else []
    names = [*domain.predicates, *(a.name for a in domain.actions), *objects, *type_names]
    if len(names) > len(WORDS):
        raise PddlSemanticError(f"a renaming needs {len(names)} words; the word list has {len(WORDS)}")
    words = random.Random(seed).sample(WORDS, len(names))
    p, a, o = len(domain.predicates), len(domain.actions), len(objects)
    return Renaming(dict(zip(domain.predicates, words[:p])), dict(zip([x.name for x in domain.actions],
                    words[p:p + a])), dict(zip(objects, words[p + a:p + a + o])),
                    dict(zip(type_names, words[p + a + o:])))


def read_renaming(path: str | Path) -> Renaming:
    """A renaming file (see the module docstring); a bad one is one line naming the file."""
    try:
        data = json.loads(Path(path).read_text())
    except (OSError, ValueError) as e:
        raise PddlSemanticError(f"{path}: cannot read the renaming ({e}); expected JSON "
                                '{"predicates": {old: new}, "actions": {...}, "objects": {...}}') from None
    if not isinstance(data, dict) or set(data) - set(KINDS) or not all(
            isinstance(v, dict) and all(isinstance(x, str) and isinstance(y, str) for x, y in v.items())
            for v in data.values()):
        raise PddlSemanticError(f"{path}: expected JSON with the keys {', '.join(KINDS)}, each a mapping of "
                                "old name -> new name")
    renaming = Renaming(**{k: {x.lower(): y.lower() for x, y in v.items()} for k, v in data.items()})
    for kind in KINDS:
        new = list(getattr(renaming, kind).values())
        if len(set(new)) != len(new):
            raise PddlSemanticError(f"{path}: the {kind} renaming maps two names onto one")
    return renaming


def _atom(r: Renaming, atom: Atom) -> Atom:
    return (r.predicates.get(atom[0], atom[0]), *(r.objects.get(x, x) for x in atom[1:]))


def _lit(r: Renaming, lit: Literal) -> Literal:
    if lit.pred == "=":
        return Literal("=", tuple(r.objects.get(x, x) for x in lit.args), lit.positive)
    atom = _atom(r, (lit.pred, *lit.args))
    return Literal(atom[0], atom[1:], lit.positive)


def _types(r: Renaming, ts: tuple[str, ...]) -> tuple[str, ...]:
    return tuple(r.types.get(t, t) for t in ts)


def rename_domain(domain: Domain, r: Renaming, name: str | None = None) -> Domain:
    actions = tuple(ActionSchema(r.actions.get(a.name, a.name), tuple((v, _types(r, ts)) for v, ts in a.params),
                                 tuple(_lit(r, x) for x in a.pre), tuple(_atom(r, x) for x in a.add),
                                 tuple(_atom(r, x) for x in a.delete))
                    for a in domain.actions)
    return Domain(name or domain.name, domain.requirements,
                  {r.types.get(c, c): r.types.get(p, p) for c, p in domain.types.items()},
                  {r.objects.get(c, c): r.types.get(t, t) for c, t in domain.constants.items()},
                  {r.predicates.get(p, p): tuple(_types(r, ts) for ts in args)
                   for p, args in domain.predicates.items()},
                  actions)


def rename_problem(problem: Problem, r: Renaming, domain_name: str | None = None) -> Problem:
    return Problem(problem.name, domain_name or problem.domain_name,
                   {r.objects.get(o, o): r.types.get(t, t) for o, t in problem.objects.items()},
                   frozenset(_atom(r, a) for a in problem.init), tuple(_lit(r, x) for x in problem.goal))


def neutral_variables(domain: Domain) -> Domain:
    """Each action's parameters renamed ``?x1``, ``?x2``, ... (``?truck`` would tell what a renamed action
    moves: the planner's instructions list the parameters)."""
    def action(a: ActionSchema) -> ActionSchema:
        new = {f"?{v}": f"?x{i}" for i, (v, _) in enumerate(a.params, 1)}
        atom = lambda x: (x[0], *(new.get(y, y) for y in x[1:]))  # noqa: E731
        return ActionSchema(a.name, tuple((new[f"?{v}"][1:], t) for v, t in a.params),
                            tuple(Literal(x.pred, atom((x.pred, *x.args))[1:], x.positive) for x in a.pre),
                            tuple(atom(x) for x in a.add), tuple(atom(x) for x in a.delete))
    return Domain(domain.name, domain.requirements, dict(domain.types), dict(domain.constants),
                  dict(domain.predicates), tuple(action(a) for a in domain.actions))
