"""Where the decoder's running rows live and how they and the host data they need move: one object.

The searches (sampling, beam search, stochastic beam search) decide *which* rows run; how the rows'
state is stored and moved is the row store's (:class:`constrained_decoding.kv_rows.RowBatch`, a
re-stacked cache, or :class:`constrained_decoding.slot_rows.SlotBatch`, preallocated slots), and
every choice that differs between a CPU and an accelerator, or between the two stores, is made
here, by a :class:`DevicePolicy` the runner holds (``PlannerRunner(policy=...)``, the decode
functions' ``policy`` keyword):

* **re-stacked or slots** (:meth:`DevicePolicy.into_slots`): a batch re-stacks its cache at each
  of its first ``restacked_joins`` joins, then moves into slots (``slots=False``: it always
  re-stacks, the reference the tests compare with);
* **host or device path for a beam search select** (:meth:`DevicePolicy.gathers_on_device`): in
  slots, a ``same_prompt`` select is mapped on the host (reads the kept rows back, copies only the
  repeated slots) or gathered on the device (copies every running row, reads nothing back);
* **how host data reaches the device** (:meth:`DevicePolicy.queues_uploads`, used by
  :func:`constrained_decoding.uploads.upload`): on CUDA a non-blocking copy from pinned memory,
  queued behind the device's work; elsewhere ``torch.as_tensor``.

On a CPU every path gives the same numbers bit for bit (``benchmarks/decoding_hashes.py``); the
tests force the accelerator's paths on the CPU with ``DevicePolicy(gather_on_device=True,
restacked_joins=0)``.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch

__all__ = ["DEFAULT_POLICY", "DevicePolicy", "RESTACKED_JOINS"]

RESTACKED_JOINS = 8
"""Joins a batch takes by re-stacking before it moves into slots: moving costs about one re-stacking
plus the buffers' first writes, which a batch joined a few times does not earn back. Plain sampling
joins 1-7 times on travel (``benchmarks/decoding_growth.py --k 1 --queries 8``), beam search 3
times; stochastic beam search joins 66-182 times per call and gains most (0.18-0.48x the
re-stacking CPU on travel, ``benchmarks/distinct_sampling.py``)."""


@dataclass(frozen=True)
class DevicePolicy:
    """Where rows live and how they move (see the module docstring).

    ``slots``: rows joining a running batch go into its slots after ``restacked_joins`` re-stacking
    joins (False: every join re-stacks). ``gather_on_device``: a beam search select in slots is
    gathered on the device (True) or mapped on the host (False); None: on every device but the
    CPU, where a read costs nothing and the host path copies less."""

    slots: bool = True
    restacked_joins: int = RESTACKED_JOINS
    gather_on_device: bool | None = None

    def into_slots(self, joins: int, in_slots: bool) -> bool:
        """Whether rows joining a batch that has taken ``joins`` joins (``in_slots``: it is in slots
        already) go into slots rather than re-stack it."""
        return self.slots and (in_slots or joins >= self.restacked_joins)

    def gathers_on_device(self, device: torch.device) -> bool:
        """Whether a ``same_prompt`` select of rows in slots on ``device`` is gathered on the device."""
        return device.type != "cpu" if self.gather_on_device is None else self.gather_on_device

    @staticmethod
    def queues_uploads(device: torch.device | str | None) -> bool:
        """Whether host data is sent to ``device`` from pinned memory without blocking (CUDA only:
        a pageable copy waits for the device's queue; elsewhere there is no queue to wait for)."""
        return device is not None and torch.device(device).type == "cuda"


DEFAULT_POLICY = DevicePolicy()
"""The policy of a runner given none: slots after :data:`RESTACKED_JOINS` joins, the device path on accelerators."""
