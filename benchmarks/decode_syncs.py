"""What a decode step asks of the host, counted (not timed): syncs, aten ops outside the model,
module-tree walks (issue #39 item 3).

    OMP_NUM_THREADS=1 python benchmarks/decode_syncs.py [--quick]

On a GPU the host queues kernels and runs ahead of the device, unless it must read a device
value: then it waits for the queue to drain (a *sync*). Every eager aten op the host issues is a
kernel launch (a few microseconds of host time each), and ``model.eval()`` / ``model.train()``
visit every module of the tree (a LoRA model has hundreds). None of that is visible in CPU
seconds on a CPU, and all of it is a count that does not depend on load, so this counts, for one
sampling call and one beam-search call of

* (a) the embedded T5 planner (``configs/default.yaml``'s shape, random weights) on OpenAGI tasks
  (linear ones, and two-input ones whose branch rows join the batch while it runs) and, without
  ``--quick``, sampling, beam search and stochastic beam search on travel queries of 3 and 5 days
  (long rows, ~20-40 branch rows each), and stochastic beam search in slots (8 queries x 8 plans)
  with beam search's selects mapped on the host (the CPU's path) and gathered on the device (an
  accelerator's: ``DevicePolicy(gather_on_device=True)``, :mod:`constrained_decoding.device_policy`), and
* (b) a tiny LLaMA (the embedded causal planner's shape) with the project's LoRA adapter
  (:func:`rltf.planners.loading.apply_lora`, default settings: rank 8, dropout 0.05),

per decode step (a ``PlannerRunner.step`` call, i.e. one decoder pass for the running rows):

* **syncs**: the operations that read a device value on the host or size a tensor by data, so on
  a GPU the host would wait for the device: ``Tensor.tolist``; the aten ops
  ``_local_scalar_dense`` (``.item()``, ``int()``, ``bool()``, ``float()`` of a tensor),
  ``nonzero``, ``masked_select``, ``unique``-family ops, ``multinomial`` (it checks its
  probabilities with an ``.item()``), ``index`` / ``index_put`` with a boolean index (a
  ``nonzero`` inside), and copies between devices (none on a CPU). Counted with a
  ``TorchFunctionMode`` (``tolist`` has no aten op on a CPU) and a ``TorchDispatchMode``.
* **uploads**: tensors built from Python data outside the model (``aten::lift_fresh``): on a GPU
  each one the decoder sends to the device is a blocking host-to-device copy, which waits for the
  device as well (some stay on the host: an upper bound); **of which queued**: those made by
  :func:`constrained_decoding.uploads.upload`, which on a GPU copies from pinned memory without
  blocking.
* **aten ops outside the model**: the ops the ``TorchDispatchMode`` sees while no module's forward
  runs (the sampler's bookkeeping, the restricted output head, cache moves); **in the model**:
  the ops inside module forwards (a LoRA layer's dropout is one of them).
* **train() calls** and **modules walked**: ``nn.Module.train`` calls made from outside the tree
  (``eval()`` is ``train(False)``), and the modules they visited.

The totals are integers; the per-step figures divide them by the decode steps.
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Callable
from pathlib import Path

import torch
from torch import nn
from torch.overrides import TorchFunctionMode
from torch.utils._python_dispatch import TorchDispatchMode

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # run as a script from anywhere

from benchmarks.decoding_travel import build_embedded, travel_queries, travel_tokenizer_texts  # noqa: E402
from constrained_decoding.decode import beam_search_plans, sample_plans  # noqa: E402
from constrained_decoding.device_policy import DevicePolicy  # noqa: E402
from constrained_decoding.runner import PlannerRunner  # noqa: E402
from constrained_decoding.uploads import upload  # noqa: E402
from constrained_decoding.without_replacement import sample_distinct_plans  # noqa: E402
from envs.openagi.env import OpenAGIEnv  # noqa: E402
from envs.travel.env import TravelPlannerEnv  # noqa: E402
from rltf.config.sections import EmbeddedSettings, LoraSettings  # noqa: E402
from rltf.planners.embedded import build_embedded_planner  # noqa: E402
from rltf.planners.loading import apply_lora  # noqa: E402

aten = torch.ops.aten
SYNC_OPS = {aten._local_scalar_dense.default, aten.is_nonzero.default, aten.equal.default, aten.nonzero.default,
            aten.masked_select.default,
            aten.multinomial.default, aten._unique2.default, aten.unique_consecutive.default,
            aten.unique_dim.default}
"""aten ops that read device data on the host (or size their output by it)."""
INDEX_OPS = {aten.index.Tensor, aten.index_put.default, aten.index_put_.default}
"""...and these when an index is boolean (a ``nonzero`` runs inside)."""
DROPOUT_OPS = {aten.dropout.default, aten.native_dropout.default}
COPY_OPS = {aten._to_copy.default, aten.copy_.default}
HOST_FUNCS = {"tolist"}
"""Tensor methods that read device data on the host without an aten op of their own on a CPU."""


def _bool_index(args) -> bool:
    idx = args[1] if len(args) > 1 else ()
    return any(isinstance(t, torch.Tensor) and t.dtype in (torch.bool, torch.uint8) for t in idx or ())


def _cross_device(func, args, kwargs) -> bool:
    if func is aten.copy_.default:
        return args[0].device != args[1].device
    dev = kwargs.get("device")
    return dev is not None and torch.device(dev) != args[0].device


def _in_upload() -> bool:
    """Whether the tensor is being made by :func:`constrained_decoding.uploads.upload` (on a GPU a
    non-blocking copy from pinned memory: queued, not waited for)."""
    frame = sys._getframe(2)
    while frame is not None:
        if frame.f_code is upload.__code__:
            return True
        frame = frame.f_back
    return False


class Counts:
    """The counts of one call (see the module docstring)."""

    FIELDS = ("steps", "syncs", "model_syncs", "uploads", "queued", "outside", "inside", "dropouts", "train_calls",
              "modules_walked")

    def __init__(self):
        for f in self.FIELDS:
            setattr(self, f, 0)
        self.sync_kinds: dict[str, int] = {}

    def sync(self, name: str, inside: bool = False) -> None:
        if inside:  # the model's own (transformers' mask checks): not the decoder's to remove
            self.model_syncs += 1
            return
        self.syncs += 1
        self.sync_kinds[name] = self.sync_kinds.get(name, 0) + 1


class _Funcs(TorchFunctionMode):
    def __init__(self, counts: Counts, depth: list[int]):
        super().__init__()
        self.counts, self.depth = counts, depth

    def __torch_function__(self, func, types, args=(), kwargs=None):
        name = getattr(func, "__name__", "")
        if name in HOST_FUNCS:
            self.counts.sync(name, self.depth[0] > 0)
        return func(*args, **(kwargs or {}))


class _Ops(TorchDispatchMode):
    def __init__(self, counts: Counts, depth: list[int]):
        super().__init__()
        self.counts, self.depth = counts, depth

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        kwargs = kwargs or {}
        c, inside = self.counts, self.depth[0] > 0
        if inside:
            c.inside += 1
            c.dropouts += func in DROPOUT_OPS
        else:
            c.outside += 1
        if func in SYNC_OPS or (func in INDEX_OPS and _bool_index(args)) or (
                func in COPY_OPS and _cross_device(func, args, kwargs)):
            c.sync(str(func.overloadpacket.__name__), inside)
        elif func is aten.lift_fresh.default and not inside:  # (the model's own: transformers' constants)
            c.uploads += 1
            c.queued += _in_upload()
        return func(*args, **kwargs)


class counting:
    """Count syncs, uploads, aten ops (outside / inside module forwards), ``train()`` walks and decode
    steps while active: ``with counting() as c: ...``."""

    def __enter__(self) -> Counts:
        c = self.counts = Counts()
        depth = [0]
        hooks = nn.modules.module
        self._hooks = [hooks.register_module_forward_pre_hook(lambda m, a: depth.__setitem__(0, depth[0] + 1)),
                       hooks.register_module_forward_hook(lambda m, a, o: depth.__setitem__(0, depth[0] - 1))]
        self._train, self._step = nn.Module.train, PlannerRunner.step
        train, step, walking = self._train, self._step, [0]

        def counted_train(module, mode=True):
            if not walking[0]:
                c.train_calls += 1
            walking[0] += 1
            c.modules_walked += 1
            try:
                return train(module, mode)
            finally:
                walking[0] -= 1

        def counted_step(runner, *a, **k):
            c.steps += 1
            return step(runner, *a, **k)

        nn.Module.train, PlannerRunner.step = counted_train, counted_step
        self._modes = [_Funcs(c, depth), _Ops(c, depth)]
        for m in self._modes:
            m.__enter__()
        return c

    def __exit__(self, *exc) -> None:
        for m in reversed(self._modes):
            m.__exit__(*exc)
        nn.Module.train, PlannerRunner.step = self._train, self._step
        for h in self._hooks:
            h.remove()


def openagi_calls(env, quick: bool) -> list[tuple[str, Callable]]:
    """Sampling (linear tasks; two-input tasks, whose branch rows join mid-batch) and beam search."""
    n, k = (2, 4) if quick else (8, 8)

    def tasks(linear):
        return [t for t in env.tasks() if t.is_linear == linear][:n]

    def sample(linear):
        def run(model, tok):
            ts = tasks(linear)
            return sample_plans(model, tok, [t.description for t in ts], [env.grammar(tok, t) for t in ts], k, seed=0)
        return run

    def beam(model, tok):
        ts = tasks(True)
        return beam_search_plans(model, tok, [t.description for t in ts], [env.grammar(tok, t) for t in ts], 4)

    return [(f"sample {n}x{k} linear", sample(True)), (f"sample {n}x{k} two-input", sample(False)),
            (f"beam 4 x {n} linear", beam)]


def travel_calls(env, days: tuple[int, ...]) -> list[tuple[str, Callable]]:
    """Travel itineraries (long rows, ~20-40 branch rows each joining the batch): sampling, beam search
    and stochastic beam search (4 distinct plans per query)."""
    def call(d, how):
        def run(model, tok):
            qs = travel_queries(env, d, 2)
            prompts, grammars = [q.query for q in qs], [env.grammar(tok, q) for q in qs]
            if how == "beam":
                return beam_search_plans(model, tok, prompts, grammars, 4)
            if how == "distinct":
                return sample_distinct_plans(model, tok, prompts, grammars, 4, seed=0)
            return sample_plans(model, tok, prompts, grammars, 4, seed=0)
        return run

    def distinct_in_slots(gather_on_device: bool):
        """8 queries x 8 distinct plans: 57 joins, so the batch runs in slots; beam search's selects
        mapped on the host (the CPU's path) or gathered on the device (an accelerator's)."""
        def run(model, tok):
            qs = travel_queries(env, days[0], 8)
            return sample_distinct_plans(model, tok, [q.query for q in qs], [env.grammar(tok, q) for q in qs], 8,
                                         seed=0, policy=DevicePolicy(gather_on_device=gather_on_device))
        return run

    names = {"sample": "sample 2x4", "beam": "beam 4 x 2", "distinct": "distinct 2x4"}
    return [(f"{names[how]} travel {d} days", call(d, how)) for how in names for d in days] + [
        (f"distinct 8x8 travel {days[0]} days, slots, {where}", distinct_in_slots(where == "gathered on device"))
        for where in ("mapped on host", "gathered on device")]


def cases(quick: bool) -> list[tuple[str, nn.Module, object, list[tuple[str, Callable]]]]:
    """(a) the embedded T5 on OpenAGI (and, in a full run, travel, with the travel tokenizer);
    (b) the embedded causal LLaMA with the project's default LoRA adapter on OpenAGI."""
    openagi = OpenAGIEnv(split="all")
    t5 = build_embedded_planner(EmbeddedSettings())
    llama = build_embedded_planner(EmbeddedSettings(d_model=64, d_ff=128), arch="causal")
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(0)
        lora = apply_lora(llama.model, LoraSettings(enabled=True), is_encoder_decoder=False).eval()
    out = [("T5 embedded", t5.model, t5.tokenizer, openagi_calls(openagi, quick)),
           ("LLaMA + LoRA", lora, llama.tokenizer, openagi_calls(openagi, quick))]
    if not quick:
        travel = TravelPlannerEnv("all")
        model, tok = build_embedded(travel_tokenizer_texts(travel))
        out.append(("T5 embedded", model, tok, travel_calls(travel, (3, 5))))
    return out


def main(argv=None) -> list[tuple[str, str, Counts]]:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--quick", action="store_true", help="fewer tasks and samples (a smoke run)")
    args = ap.parse_args(argv)
    print("Per call: decode steps, then totals and per decode step (total / steps): syncs, uploads, aten ops "
          "outside and inside the model, train()/eval() calls and the modules they walked. Counts, not times.\n")
    print("| planner | call | steps | syncs | syncs/step | uploads/step | of which queued | ops outside | "
          "outside/step | ops in model | in model/step | dropouts/step | model syncs/step | train() calls | "
          "modules walked | sync kinds |")
    print("|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|")
    out = []
    for pname, model, tok, calls in cases(args.quick):
        for cname, fn in calls:
            fn(model, tok)  # warm: grammars, stacked tables and the head probe are made once per model
            with counting() as c:
                fn(model, tok)
            s = max(c.steps, 1)
            kinds = ", ".join(f"{k} {v}" for k, v in sorted(c.sync_kinds.items()))
            print(f"| {pname} | {cname} | {c.steps} | {c.syncs} | {c.syncs / s:.2f} | {c.uploads / s:.2f} | "
                  f"{c.queued / s:.2f} | "
                  f"{c.outside} | {c.outside / s:.1f} | {c.inside} | {c.inside / s:.1f} | {c.dropouts / s:.1f} | "
                  f"{c.model_syncs / s:.2f} | {c.train_calls} | "
                  f"{c.modules_walked} | {kinds} |")
            out.append((pname, cname, c))
    return out


if __name__ == "__main__":
    main()
