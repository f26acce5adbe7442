"""Many flow passes at once: the backend decodes the pending requests of every pass in one batch.

A pass (an agent's whole run on one query: its :class:`~rltf.flows.engine.flow.Flow` passes and the
code around them) asks the backend one node at a time, so run alone every backend call is a batch
of one. :class:`PassBatch` runs up to ``width`` passes together:

* each pass runs in its own thread, but only one thread ever runs at a time: a pass runs until it
  calls its backend or ends, then hands control back (a coroutine made of a thread, so agents stay
  plain functions). A pass's own code is therefore never interleaved with another's;
* each pass sees a :class:`PassBackend`: the real backend's attributes (tokenizer, ``describe``,
  ``supports_grammar`` ...) with ``generate`` recording the request and waiting, and
  ``begin_node`` recording which node asks;
* when every live pass waits on the backend, their requests are grouped (same sampling, same
  node group: ``backend.node_group(node)`` when the backend has it, e.g. the role adapter of
  ``flow.roles: lora``; else the node when it has ``begin_node``) and each group is one
  ``backend.generate`` call, every item with its pass's generator when the backend takes
  per-item generators (``per_item_generators``: the item draws from its own seeded streams, so a
  pass samples the same answers alone or batched). Then the passes resume, in order; a pass that
  ends makes room for the next one.

``width=1`` runs the passes one after another (the reference a batched run is compared with).
A backend call that raises hands the exception to every pass of its group (each retries it as
the engine does); a pass that raises does not stop the others, and :meth:`PassBatch.run` raises the
first such exception once every pass has ended.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

from rltf.flows.backends.base import Completion
from rltf.flows.engine.errors import FlowError

__all__ = ["PassBatch", "PassBackend", "PassCancelled"]


class PassCancelled(BaseException):
    """Ends a waiting pass when its batch stops early (the scheduler itself failed)."""


@dataclass
class _Request:
    messages: list
    grammars: list
    sampling: Any
    node: str | None


@dataclass
class _Pass:
    index: int
    job: Callable[[Any], Any]
    generator: Any
    resume: threading.Semaphore = field(default_factory=lambda: threading.Semaphore(0))
    request: _Request | None = None
    reply: Any = None
    done: bool = False
    cancelled: bool = False
    result: Any = None
    error: BaseException | None = None
    seconds: float = 0.0  # own code + its share of the backend calls it was in
    thread: threading.Thread | None = None


class PassBackend:
    """What one pass of a :class:`PassBatch` sees as its backend (see the module docstring)."""

    def __init__(self, batch: PassBatch, p: _Pass):
        self._batch, self._pass, self._node = batch, p, None

    def __getattr__(self, name: str) -> Any:
        return getattr(self._batch.backend, name)

    def __repr__(self) -> str:
        return repr(self._batch.backend)

    def begin_node(self, name: str) -> None:
        self._node = name

    def generate(self, messages_batch, grammar=None, *, sampling=None) -> list[Completion]:
        messages = list(messages_batch)
        grammars = list(grammar) if isinstance(grammar, (list, tuple)) else [grammar] * len(messages)
        if len(grammars) != len(messages):
            raise ValueError(f"got {len(messages)} message lists but {len(grammars)} grammars; expected one per item "
                             "(or one for all)")
        return self._batch._wait(self._pass, _Request(messages, grammars, sampling, self._node))


class PassBatch:
    """Runs passes together on ``backend``, at most ``width`` at a time (see the module docstring)."""

    def __init__(self, backend, width: int):
        if isinstance(width, bool) or not isinstance(width, int) or width < 1:
            raise FlowError(f"PassBatch width={width!r}: expected an integer >= 1 (1: one pass at a time)")
        self.backend = backend
        self.width = width
        self._turn = threading.Semaphore(0)  # released by a pass when it waits or ends
        self.calls = 0  # backend.generate calls made
        self.items = 0  # items they decoded
        self.seconds: list[float] = []  # per pass of the last run: its own code + its share of its backend calls

    # ------------------------------------------------------------------------ public
    def run(self, jobs: Sequence[Callable[[Any], Any]], generators: Sequence[Any] | None = None) -> list[Any]:
        """``[job(backend_of_its_pass) for job in jobs]``, the passes run together. ``generators``:
        one per job (its pass's sampling generator; see :meth:`generate` of the backend), or None."""
        if generators is not None and len(generators) != len(jobs):
            raise FlowError(f"got {len(jobs)} passes but {len(generators)} generators; expected one per pass")
        passes = [_Pass(i, job, generators[i] if generators is not None else None) for i, job in enumerate(jobs)]
        todo = list(passes)
        live: list[_Pass] = []
        try:
            while True:
                while todo and len(live) < self.width:
                    p = todo.pop(0)
                    p.thread = threading.Thread(target=self._main, args=(p,), daemon=True,
                                                name=f"flow-pass-{p.index}")
                    p.thread.start()
                    self._step(p)
                    if not p.done:
                        live.append(p)
                if not live:
                    break
                self._serve(live)
                for p in list(live):
                    self._step(p)
                    if p.done:
                        live.remove(p)
        finally:
            for p in live:  # only when the scheduler failed: unwind the waiting passes
                p.cancelled = True
                p.resume.release()
                p.thread.join()
        self.seconds = [p.seconds for p in passes]
        failed = next((p for p in passes if p.error is not None), None)
        if failed is not None:
            raise failed.error
        return [p.result for p in passes]

    # ------------------------------------------------------------------------ threads
    def _main(self, p: _Pass) -> None:
        p.resume.acquire()
        try:
            if not p.cancelled:
                p.result = p.job(PassBackend(self, p))
        except PassCancelled:
            pass
        except BaseException as e:  # noqa: BLE001 - handed to the caller by run()
            p.error = e
        finally:
            p.done = True
            self._turn.release()

    def _step(self, p: _Pass) -> None:
        """Let ``p`` run until it waits on the backend or ends."""
        t0 = time.perf_counter()
        p.resume.release()
        self._turn.acquire()
        p.seconds += time.perf_counter() - t0

    def _wait(self, p: _Pass, request: _Request) -> list[Completion]:
        """In ``p``'s thread: hand the request over, wait for the answer."""
        p.request = request
        self._turn.release()
        p.resume.acquire()
        if p.cancelled:
            raise PassCancelled()
        reply, p.reply, p.request = p.reply, None, None
        if isinstance(reply, BaseException):
            raise reply
        return reply

    # ------------------------------------------------------------------------ batching
    def _group(self, node: str | None) -> Any:
        if node is None:
            return None
        group = getattr(self.backend, "node_group", None)
        if group is not None:
            return group(node)
        return node if hasattr(self.backend, "begin_node") else None

    def _serve(self, live: list[_Pass]) -> None:
        """One backend call per group of the live passes' requests; each pass gets its answers."""
        groups: dict[tuple, list[_Pass]] = {}
        for p in live:
            groups.setdefault((p.request.sampling, self._group(p.request.node)), []).append(p)
        b = self.backend
        for members in groups.values():
            t0 = time.perf_counter()
            messages = [m for p in members for m in p.request.messages]
            grammars = [g for p in members for g in p.request.grammars]
            kwargs: dict[str, Any] = {"sampling": members[0].request.sampling}
            gens = [p.generator for p in members for _ in p.request.messages]
            if getattr(b, "per_item_generators", False) and all(g is not None for g in gens):
                kwargs["generators"] = gens
            node = members[0].request.node
            try:
                if node is not None and hasattr(b, "begin_node"):
                    b.begin_node(node)
                out = b.generate(messages, grammars, **kwargs)
            except Exception as e:  # noqa: BLE001 - every pass of the group sees it (and retries)
                for p in members:
                    p.reply = e
            else:
                if not isinstance(out, list) or len(out) != len(messages) \
                        or not all(isinstance(c, Completion) for c in out):
                    raise FlowError(f"backend {b!r} returned {out!r} for {len(messages)} message lists; expected one "
                                    "Completion each")
                at = 0
                for p in members:
                    n = len(p.request.messages)
                    p.reply, at = out[at : at + n], at + n
            self.calls += 1
            self.items += len(messages)
            share = (time.perf_counter() - t0) / len(messages)
            for p in members:
                p.seconds += share * len(p.request.messages)
