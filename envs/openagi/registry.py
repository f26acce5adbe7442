"""The tool registry: the one source of truth for what tools exist and how they type-check.

Both the environment (which executes plans) and the constrained decoder (which only emits plans
that type-check) read tools from a :class:`ToolRegistry`. Adding a tool is one ``register`` call.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field
from typing import Any

IMAGE = "image"
TEXT = "text"

_NAME_RE = re.compile(r"^[A-Za-z0-9][A-Za-z0-9\- ]*[A-Za-z0-9]$|^[A-Za-z0-9]$")
_MODALITY_RE = re.compile(r"^[a-z][a-z0-9_]*$")

BatchedFn = Callable[..., Sequence[Any]]
"""A batched tool implementation: ``fn(batch_of_input_0, batch_of_input_1, ...) -> outputs``.

Each argument is a list with one element per sample; the result is a list of the same length.
"""


class UnknownToolError(KeyError):
    """A tool name that is not in the registry."""

    def __init__(self, name: str, known: Sequence[str]):
        self.name = name
        self.known = tuple(known)
        super().__init__(f"unknown tool {name!r}; expected one of: {', '.join(self.known)}")

    def __str__(self) -> str:  # KeyError quotes its message otherwise
        return self.args[0]


@dataclass(frozen=True)
class Tool:
    """An expert model: its name, its ordered input modalities, its output modality."""

    name: str
    inputs: tuple[str, ...]
    output: str
    fn: BatchedFn = field(compare=False, repr=False)
    description: str = field(default="", compare=False)
    batch_invariant: bool = field(default=False, compare=False)
    """Each sample's output is computed from that sample alone, bit for bit the same in any batch:
    requests of several plans may then be merged into one call (:mod:`envs.openagi.merged_requests`)."""

    @property
    def arity(self) -> int:
        return len(self.inputs)

    def __call__(self, *batches: Sequence[Any]) -> list[Any]:
        if len(batches) != self.arity:
            raise TypeError(f"tool {self.name!r} takes {self.arity} input batch(es), got {len(batches)}")
        sizes = {len(b) for b in batches}
        if len(sizes) != 1:
            raise ValueError(f"tool {self.name!r}: input batches differ in length: {sorted(sizes)}")
        out = list(self.fn(*batches))
        if len(out) != len(batches[0]):
            raise RuntimeError(
                f"tool {self.name!r} returned {len(out)} outputs for a batch of {len(batches[0])}"
            )
        return out


DOWN_LIMIT = 32
"""Requests in a row on which a tool produced no output at all (the batch and every sample retried
alone raised) after which it is *down*: requests fail at once with its last error, without calling
it, but one request in :data:`PROBE_EVERY` still calls it (it may be back)."""
PROBE_EVERY = 16


@dataclass
class ToolHealth:
    """What a registry remembers of a tool's recent requests (see :meth:`ToolRegistry.health`).

    A request on which the tool produced any output clears it (transient or sample-specific
    failures are forgotten at the next success); ``failures`` counts requests in a row on which
    it produced none."""

    failures: int = 0
    last_error: str | None = None
    skipped: int = 0  # requests answered with last_error while down

    @property
    def down(self) -> bool:
        return self.failures >= DOWN_LIMIT

    def should_call(self) -> bool:
        """False while down, but for one request in :data:`PROBE_EVERY` (a probe)."""
        if not self.down:
            return True
        self.skipped += 1
        return self.skipped % PROBE_EVERY == 0

    def succeeded(self) -> None:
        self.failures, self.last_error, self.skipped = 0, None, 0

    def failed(self, error: str) -> None:
        self.failures += 1
        self.last_error = error


class ToolRegistry:
    """An ordered collection of tools, looked up by name."""

    def __init__(self, tools: Sequence[Tool] = ()):
        self._tools: dict[str, Tool] = {}
        self._health: dict[str, ToolHealth] = {}
        for tool in tools:
            self._add(tool)

    def health(self, name: str) -> ToolHealth:
        """The failure record of tool ``name`` (shared by every executor using this registry)."""
        h = self._health.get(name)
        if h is None:
            h = self._health[name] = ToolHealth()
        return h

    def register(
        self,
        name: str,
        inputs: Sequence[str] | str,
        output: str,
        fn: BatchedFn,
        description: str = "",
        *,
        replace: bool = False,
        batch_invariant: bool = False,
    ) -> Tool:
        """Register a tool. ``inputs`` is one modality or an ordered sequence of them;
        ``batch_invariant``: see :attr:`Tool.batch_invariant`."""
        if isinstance(inputs, str):
            inputs = (inputs,)
        tool = Tool(name=name, inputs=tuple(inputs), output=output, fn=fn, description=description,
                    batch_invariant=batch_invariant)
        self._add(tool, replace=replace)
        return tool

    def tool(self, name: str, inputs: Sequence[str] | str, output: str, description: str = ""):
        """Decorator form of :meth:`register`."""

        def deco(fn: BatchedFn) -> BatchedFn:
            self.register(name, inputs, output, fn, description)
            return fn

        return deco

    def _add(self, tool: Tool, replace: bool = False) -> None:
        if not isinstance(tool.name, str) or not _NAME_RE.match(tool.name) or "  " in tool.name:
            raise ValueError(
                f"bad tool name {tool.name!r}: expected letters, digits, hyphens and single spaces "
                "(no commas or brackets, which the plan syntax uses)"
            )
        if not tool.inputs:
            raise ValueError(f"tool {tool.name!r} must take at least one input modality")
        for m in (*tool.inputs, tool.output):
            if not isinstance(m, str) or not _MODALITY_RE.match(m):
                raise ValueError(
                    f"tool {tool.name!r}: bad modality {m!r}; expected a lowercase identifier like 'image'"
                )
        if not callable(tool.fn):
            raise TypeError(f"tool {tool.name!r}: implementation {tool.fn!r} is not callable")
        if tool.name in self._tools and not replace:
            raise ValueError(f"tool {tool.name!r} is already registered (pass replace=True to override)")
        self._tools[tool.name] = tool
        self._health.pop(tool.name, None)  # a replaced implementation starts with a clean record

    def get(self, name: str) -> Tool:
        try:
            return self._tools[name]
        except KeyError:
            raise UnknownToolError(name, list(self._tools)) from None

    __getitem__ = get

    def __contains__(self, name: object) -> bool:
        return name in self._tools

    def __iter__(self) -> Iterator[Tool]:
        return iter(self._tools.values())

    def __len__(self) -> int:
        return len(self._tools)

    @property
    def names(self) -> tuple[str, ...]:
        return tuple(self._tools)

    @property
    def modalities(self) -> tuple[str, ...]:
        seen: dict[str, None] = {}
        for t in self:
            for m in (*t.inputs, t.output):
                seen.setdefault(m)
        return tuple(seen)

    def single_input(self) -> list[Tool]:
        return [t for t in self if t.arity == 1]

    def multi_input(self) -> list[Tool]:
        return [t for t in self if t.arity > 1]

    def subset(self, names: Sequence[str]) -> "ToolRegistry":
        return ToolRegistry([self.get(n) for n in names])

    def __repr__(self) -> str:
        return f"ToolRegistry({list(self._tools)})"
