"""How the planner's parameters live across processes: replicated (DDP), FSDP-sharded or in a ZeRO-2 engine.

The constrained decoder drives the planner through its sub-modules (encoder, decoder, the rows of
the output layer it needs) and every process decodes as many steps as its own plans need. That
rules out using a sharded model as is, so each mode says how to decode, score, reduce and save:

- ``replicated`` (one process, or DDP): every process holds all parameters; decoding and scoring
  call sub-modules; gradients are averaged explicitly after ``backward`` (:func:`all_reduce_grads`).
- ``fsdp`` (``configs/accelerate/fsdp.yaml``, FSDP2): parameters are sharded with torch's
  ``fully_shard`` per transformer block (the model's ``_no_split_modules``) and at the root. We
  shard ourselves, not through ``accelerator.prepare``: accelerate's FSDP2 wrapping rejects T5's
  tied embeddings, and on CPU it ignores FSDP altogether (so the same code runs in the CPU
  tests). Decoding runs inside :meth:`Sharding.gathered` (every shard all-gathered once, no
  collective per step, so processes may decode different numbers of steps); scoring with
  gradients runs through the root module's ``forward`` (FSDP's hooks gather, reduce-scatter the
  averaged gradients and reshard); clipping is DTensor-aware; checkpoints hold full state dicts
  (``torch.distributed.checkpoint.state_dict``), so a run saved sharded reloads anywhere.
- ``deepspeed`` (``configs/accelerate/deepspeed-zero2.yaml``, ZeRO stage 1 or 2): parameters stay
  whole on every process, so decoding and scoring call sub-modules as usual; the optimiser runs
  inside a DeepSpeed engine (``accelerator.prepare``) whose backward reduces and partitions the
  gradients and whose ``step`` clips and updates the partitioned fp32 master weights. Each stage
  (SFT, RLTF) prepares its own engine and releases it (:meth:`Sharding.release`). Checkpoints add
  the engine's own partitioned state (``deepspeed/``). ZeRO-3 (sharded parameters) is refused.
"""

from __future__ import annotations

import contextlib
import math
import os
import re
import warnings
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

import torch
import torch.distributed as dist
from torch import nn


@dataclass
class Sharding:
    kind: str  # "replicated" | "fsdp" | "deepspeed"
    accelerator: Any
    engine: Any = None  # DeepSpeed: the engine of the stage being trained

    @property
    def sharded(self) -> bool:
        """Are parameters sharded (decode inside :meth:`gathered`, score through ``forward``)?"""
        return self.kind == "fsdp"

    # ---------------------------------------------------------------------------- optimisers
    def prepare(self, model: nn.Module, optimizer, scheduler, max_grad_norm: float):
        """DeepSpeed: wrap model, optimiser and schedule in an engine (``model`` itself stays the
        module the decoder drives); unchanged otherwise. Returns (optimizer, scheduler)."""
        if self.kind != "deepspeed":
            return optimizer, scheduler
        acc = self.accelerator
        ds = acc.state.deepspeed_plugin.deepspeed_config
        ds["gradient_clipping"] = max_grad_norm if max_grad_norm > 0 else 0.0
        ds["train_micro_batch_size_per_gpu"] = 1  # no dataloader: batches are our own
        ds["gradient_accumulation_steps"] = 1
        ds["train_batch_size"] = acc.num_processes
        self.engine, optimizer, scheduler = acc.prepare(model, optimizer, scheduler)
        return optimizer, scheduler

    def release(self) -> None:
        """DeepSpeed: remove the engine's gradient hooks before the next stage prepares its own."""
        if self.engine is not None:
            self.engine.destroy()
            self.accelerator.free_memory()
            self.engine = None

    # ------------------------------------------------------------------------------ decoding
    @contextlib.contextmanager
    def gathered(self, model: nn.Module) -> Iterator[None]:
        """All parameters materialised on every process for free-running decoding (FSDP: one
        all-gather per shard on entry, resharded on exit; all processes must enter together)."""
        if not self.sharded:
            yield
            return
        from torch.distributed.fsdp import FSDPModule  # FSDP2: torch >= 2.6, only when sharding with FSDP

        mods = [m for m in model.modules() if isinstance(m, FSDPModule)]
        for m in mods:
            m.set_reshard_after_forward(False, recurse=False)
        for m in mods:
            m.unshard()
        try:
            yield
        finally:
            for m in mods:
                m.reshard()
                m.set_reshard_after_forward(True, recurse=False)

    # ------------------------------------------------------------------------------ updates
    def backward(self, loss: torch.Tensor) -> None:
        """DeepSpeed: the engine's backward (reduces gradients, then steps); else autograd's."""
        if self.kind == "deepspeed":
            self.accelerator.backward(loss)
        else:
            loss.backward()

    def clip_and_step(self, model: nn.Module, optimizer, scheduler, max_grad_norm: float) -> float:
        """Average gradients (replicated: explicitly; FSDP: already reduce-scattered), clip, step.

        Returns the gradient norm before clipping; a non-finite norm skips the optimizer step
        (the gradients are dropped, the schedule advances)."""
        if self.kind == "deepspeed":  # accelerator.backward already reduced, clipped and stepped
            norm = self.engine.get_global_grad_norm()
            return float("nan") if norm is None else float(norm)
        if not self.sharded:
            all_reduce_grads(self.accelerator, model)
        params = [p for p in model.parameters() if p.requires_grad and p.grad is not None]
        norm = torch.nn.utils.clip_grad_norm_(params, max_grad_norm if max_grad_norm > 0 else float("inf"))
        if hasattr(norm, "full_tensor"):
            norm = norm.full_tensor()
        if math.isfinite(float(norm)):  # a NaN/inf gradient never reaches the weights (the caller decides
            optimizer.step()            # whether the run stops or skips the step)
            scheduler.step()
        else:
            advance_schedule(scheduler)
        optimizer.zero_grad(set_to_none=True)
        return float(norm)

    # ----------------------------------------------------------------------------- state dicts
    def full_state_dict(self, model: nn.Module) -> dict[str, torch.Tensor] | None:
        """The full model state dict on the main process (collective under FSDP: call on all
        processes); ``None`` when replicated (the model's own ``state_dict`` is already full)."""
        if not self.sharded:
            return None
        # heavy: torch.distributed.checkpoint takes ~0.6 s to import; only for FSDP state dicts
        from torch.distributed.checkpoint.state_dict import StateDictOptions, get_model_state_dict

        return get_model_state_dict(model, options=StateDictOptions(full_state_dict=True, cpu_offload=True))

    def load_full_state_dict(self, model: nn.Module, state: dict[str, torch.Tensor]) -> None:
        """Load a full (unsharded) state dict, e.g. from ``Planner.from_pretrained(...).model``."""
        if not self.sharded:
            model.load_state_dict(state)
            return
        # heavy: torch.distributed.checkpoint takes ~0.6 s to import; only for FSDP state dicts
        from torch.distributed.checkpoint.state_dict import StateDictOptions, set_model_state_dict

        set_model_state_dict(model, state, options=StateDictOptions(full_state_dict=True))

    def optimizer_state_dict(self, model: nn.Module, optimizer) -> dict[str, Any] | None:
        """The optimiser's state as one dict (``None`` for DeepSpeed: see :meth:`save_engine`)."""
        if self.kind == "deepspeed":
            return None
        if not self.sharded:
            return optimizer.state_dict()
        # heavy: torch.distributed.checkpoint takes ~0.6 s to import; only for FSDP state dicts
        from torch.distributed.checkpoint.state_dict import StateDictOptions, get_optimizer_state_dict

        return get_optimizer_state_dict(model, optimizer,
                                        options=StateDictOptions(full_state_dict=True, cpu_offload=True))

    def load_optimizer_state_dict(self, model: nn.Module, optimizer, state: dict[str, Any] | None) -> None:
        if self.kind == "deepspeed":
            return
        if not self.sharded:
            optimizer.load_state_dict(state)
            return
        # heavy: torch.distributed.checkpoint takes ~0.6 s to import; only for FSDP state dicts
        from torch.distributed.checkpoint.state_dict import StateDictOptions, set_optimizer_state_dict

        set_optimizer_state_dict(model, optimizer, state, options=StateDictOptions(full_state_dict=True))

    # DeepSpeed keeps the optimiser partitioned across processes: its own checkpoint format
    def save_engine(self, directory) -> Any:
        """DeepSpeed: every process writes its partition under ``directory`` (returned); else None."""
        if self.kind != "deepspeed":
            return None
        self.engine.save_checkpoint(str(directory), tag="engine")
        return directory

    def load_engine(self, directory) -> None:
        if self.kind == "deepspeed":
            self.engine.load_checkpoint(str(directory), tag="engine", load_optimizer_states=True,
                                        load_lr_scheduler_states=True)


GRAD_BUCKET_ELEMENTS = 2**24
"""Gradients are averaged in flat buckets of at most this many elements (one collective per bucket
rather than per parameter; 64 MiB of float32)."""

ROW_SPARSE_MIN_ROWS = 4096
"""A gradient with at least this many rows is averaged over its rows that are non-zero on some
process only (:func:`all_reduce_grads`): the default planner's token embedding (30522 rows, 90% of
its trained parameters) gets a gradient in a few hundred rows per step."""


def all_reduce_grads(accelerator, model: nn.Module) -> None:
    """Average gradients over processes (a no-op in a single process): the trainable parameters'
    gradients (zeros where a process has none), flattened into buckets of one dtype and device of
    up to :data:`GRAD_BUCKET_ELEMENTS` elements, one all-reduce per bucket; element by element the
    same mean as one all-reduce per parameter.

    A gradient of at least :data:`ROW_SPARSE_MIN_ROWS` rows (a token embedding: only the rows of
    the tokens a step's plans hold get a gradient) joins the buckets with only the rows that are
    non-zero on some process (one more all-reduce, of a flag per row, finds them): every other row
    is zero on every process, so its mean is the zero it already holds."""
    if accelerator.num_processes == 1:
        return
    params = [p for p in model.parameters() if p.requires_grad]
    for p in params:
        if p.grad is None:
            p.grad = torch.zeros_like(p)
    sparse = [p for p in params if p.grad.dim() >= 2 and p.grad.shape[0] >= ROW_SPARSE_MIN_ROWS]
    rows = dict(zip(map(id, sparse), _rows_nonzero_anywhere(accelerator, [p.grad for p in sparse])))
    pieces = [p.grad.index_select(0, rows[id(p)]) if id(p) in rows else p.grad for p in params]
    buckets: list[list[int]] = []
    size = 0
    for i, t in enumerate(pieces):
        if not buckets or size + t.numel() > GRAD_BUCKET_ELEMENTS or \
                (t.dtype, t.device) != (pieces[buckets[-1][0]].dtype, pieces[buckets[-1][0]].device):
            buckets.append([])
            size = 0
        buckets[-1].append(i)
        size += t.numel()
    for bucket in buckets:
        flat = accelerator.reduce(torch.cat([pieces[i].reshape(-1) for i in bucket]), reduction="mean")
        for i, g in zip(bucket, flat.split([pieces[i].numel() for i in bucket])):
            p = params[i]
            if id(p) in rows:
                p.grad.index_copy_(0, rows[id(p)], g.view_as(pieces[i]))
            else:
                p.grad = g.view_as(p.grad)


def _rows_nonzero_anywhere(accelerator, grads: list[torch.Tensor]) -> list[torch.Tensor]:
    """Per gradient, the indices of its rows that hold a non-zero entry on at least one process
    (one all-reduce of a flag per row of all of them)."""
    if not grads:
        return []
    flags = torch.cat([g.reshape(g.shape[0], -1).ne(0).any(dim=1) for g in grads]).to(torch.float32)
    anywhere = accelerator.reduce(flags, reduction="sum") > 0
    return [torch.nonzero(f).flatten() for f in anywhere.split([g.shape[0] for g in grads])]


def launch_share() -> tuple[int, int]:
    """``(this process's index, the number of processes)`` of the launch: torch.distributed's default
    group once it is initialised (accelerate starts it for a multi-process launch), else ``(0, 1)``."""
    if dist.is_available() and dist.is_initialized():
        return dist.get_rank(), dist.get_world_size()
    return 0, 1


def gather_objects(obj: Any) -> list[Any]:
    """``obj`` (any picklable object) of every process of the launch, in process order; ``[obj]`` in
    one process. A collective: every process must call it."""
    _, world = launch_share()
    if world == 1:
        return [obj]

    out: list[Any] = [None] * world
    dist.all_gather_object(out, obj)
    return out


def _env_true(name: str) -> bool:
    return os.environ.get(name, "false").strip().lower() in ("1", "true", "yes")


def sharding_for(accelerator) -> Sharding:
    """The mode the launch asked for (``accelerate launch --config_file configs/accelerate/...``).

    FSDP is read from accelerate's state or, where accelerate ignores it (CPU), from the
    launcher's ``ACCELERATE_USE_FSDP``; only FSDP2 (``fsdp_version: 2``) is supported."""
    dist_type = accelerator.distributed_type.name
    if str(accelerator.mixed_precision) == "fp16" and dist_type != "DEEPSPEED":
        raise ValueError("mixed_precision fp16: the RLTF trainer's own optimiser step has no loss scaling; use "
                         "bf16 (accelerate launch --mixed_precision bf16), or DeepSpeed, which scales fp16 itself")
    if dist_type == "DEEPSPEED":
        stage = int(accelerator.state.deepspeed_plugin.zero_stage)
        if stage > 2:
            raise ValueError(f"DeepSpeed ZeRO stage {stage}: the constrained decoder needs whole parameters on every "
                             "process; use zero_stage 1 or 2 (configs/accelerate/deepspeed-zero2.yaml), or FSDP "
                             "(configs/accelerate/fsdp.yaml) to shard parameters")
        return Sharding("deepspeed", accelerator)
    if _env_true("ACCELERATE_USE_DEEPSPEED"):
        raise ValueError("ACCELERATE_USE_DEEPSPEED is set but accelerate did not start DeepSpeed (is deepspeed "
                         "installed, with a GPU or a torch.distributed backend?); `pip install deepspeed` or "
                         "launch with configs/accelerate/ddp.yaml or fsdp.yaml")
    if dist_type == "FSDP" or _env_true("ACCELERATE_USE_FSDP"):
        plugin = getattr(accelerator.state, "fsdp_plugin", None)
        version = str(getattr(plugin, "fsdp_version", None) or os.environ.get("FSDP_VERSION", "1"))
        if version != "2":
            raise ValueError(f"FSDP version {version}: the RLTF trainer shards with FSDP2 only; set "
                             "fsdp_version: 2 in the accelerate config (see configs/accelerate/fsdp.yaml)")
        if accelerator.num_processes > 1:
            return Sharding("fsdp", accelerator)
    return Sharding("replicated", accelerator)


def shard_planner(model: nn.Module, sharding: Sharding) -> None:
    """FSDP2: ``fully_shard`` each transformer block, then the root (in place); a no-op otherwise.

    One dummy forward through the root on every process finishes FSDP's lazy initialisation, so
    that :meth:`Sharding.gathered` may run before any training forward."""
    if not sharding.sharded:
        return
    from torch.distributed.device_mesh import init_device_mesh  # FSDP2: torch >= 2.6, only when sharding with FSDP
    from torch.distributed.fsdp import fully_shard  # FSDP2: torch >= 2.6, only when sharding with FSDP

    acc = sharding.accelerator
    base = model.get_base_model() if hasattr(model, "peft_config") else model
    names = set(getattr(base, "_no_split_modules", None) or ())
    blocks = [m for m in model.modules() if type(m).__name__ in names]
    if not blocks:
        raise ValueError(f"cannot shard {type(base).__name__}: it names no transformer block class "
                         f"(_no_split_modules={sorted(names)}); FSDP needs one to wrap")
    mesh = init_device_mesh(acc.device.type, (acc.num_processes,))
    for b in blocks:
        fully_shard(b, mesh=mesh)
    fully_shard(model, mesh=mesh, reshard_after_forward=True)  # the root too: parameters rest sharded
    cfg = base.config
    pad = cfg.pad_token_id if cfg.pad_token_id is not None else 0
    ids = torch.full((1, 2), pad, dtype=torch.long, device=acc.device)
    with torch.no_grad():
        if cfg.is_encoder_decoder:
            start = cfg.decoder_start_token_id if cfg.decoder_start_token_id is not None else pad
            model(input_ids=ids, decoder_input_ids=torch.full_like(ids[:, :1], start))
        else:
            model(input_ids=ids)
    model.reshard()  # optimisers must be built over the sharded parameters


def advance_schedule(scheduler) -> None:
    """Step ``scheduler`` for a skipped update, so the schedule stays aligned with the step count
    (without torch's warning about a scheduler step before any optimizer step)."""
    with warnings.catch_warnings():
        # (the message is a regular expression: its parentheses escaped, or it never matches torch's text)
        warnings.filterwarnings("ignore", message=re.escape("Detected call of `lr_scheduler.step()` before"))
        scheduler.step()
