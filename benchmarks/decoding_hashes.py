"""One hash per decoding scenario: every plan, row, token id, start state, key, threshold and
log-probability the decoder returns (and the teacher-forced scorer's log-probabilities of the
sampled plans), so a refactor of the decoder can be checked bit for bit against a commit.

    OMP_NUM_THREADS=1 python benchmarks/decoding_hashes.py [--quick]
    OMP_NUM_THREADS=1 PYTHONPATH=/tmp/base python /work/main/benchmarks/decoding_hashes.py  # a clone's code

Scenarios (random weights, seed 0; ``--quick``: the OpenAGI ones only):

* the embedded T5 (``configs/default.yaml``'s shape) on travel queries: beam search (4 beams),
  sampling at 3, 5 and 7 days (each row's own streams too: ``sample_seeds``), stochastic beam
  search at 3 and 5 days, and 8 queries x 8 distinct plans in slots, with beam search's selects
  mapped on the host (the CPU's path) and gathered on the device (an accelerator's, forced here);
* the embedded T5 on OpenAGI tasks (linear and two-input): beam search (4), greedy, sampling;
* the embedded causal LLaMA with the project's LoRA adapter on the same tasks: the same three.

Floats are hashed by their exact bits (``float.hex``). Compare two runs line by line.
"""

from __future__ import annotations

import argparse
import contextlib
import hashlib
import sys
from collections.abc import Iterator
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # run as a script from anywhere

from benchmarks.decoding_travel import build_embedded, travel_queries, travel_tokenizer_texts  # noqa: E402
from constrained_decoding import runner as runner_mod  # noqa: E402
from constrained_decoding import slot_rows  # noqa: E402
from constrained_decoding.decode import beam_search_plans, greedy_plans, sample_plans  # noqa: E402
from constrained_decoding.logprobs import plan_logprobs  # noqa: E402
from constrained_decoding.without_replacement import sample_distinct_plans  # noqa: E402
from envs.openagi.env import OpenAGIEnv  # noqa: E402
from envs.travel.env import TravelPlannerEnv  # noqa: E402
from rltf.config.sections import EmbeddedSettings, LoraSettings  # noqa: E402
from rltf.planners.embedded import build_embedded_planner  # noqa: E402
from rltf.planners.loading import apply_lora  # noqa: E402

try:  # the device policy; a tree from before it has module-level switches instead (compared across commits)
    from constrained_decoding.device_policy import DevicePolicy
except ImportError:
    DevicePolicy = None


def _plan(d) -> str:
    return repr((d.text, d.rows, d.starts, float(d.logprob).hex()))


def digest(parts) -> str:
    h = hashlib.sha256()
    for p in parts:
        h.update(p.encode())
        h.update(b"\n")
    return h.hexdigest()[:16]


def plans_hash(nested) -> list[str]:
    return [_plan(d) for ds in nested for d in ds]


def distinct_hash(draws) -> list[str]:
    return [repr(([_plan(d) for d in x.plans], [float(k).hex() for k in x.keys], float(x.threshold).hex()))
            for x in draws]


def scored_hash(model, tok, prompts, nested) -> list[str]:
    """The teacher-forced scorer's log-probabilities of the plans (``nested[i]``: prompt ``i``'s)."""
    flat = [(p, d) for p, ds in zip(prompts, nested) for d in ds]
    with torch.no_grad():
        lp = plan_logprobs(model, tok, [p for p, _ in flat], [d.grammar for _, d in flat], [d for _, d in flat])
    return [float(x).hex() for x in lp.tolist()]


@contextlib.contextmanager
def gathering(on: bool) -> Iterator[dict]:
    """The decode functions' keywords that put rows in slots from the first join and beam search's
    selects on the device path (``on``) or the host path; a tree from before the device policy: its
    module-level switches, set within."""
    if DevicePolicy is not None:
        yield {"policy": DevicePolicy(gather_on_device=on, restacked_joins=0)}
        return
    before = slot_rows.GATHER_ON_DEVICE, runner_mod.RESTACKED_JOINS
    slot_rows.GATHER_ON_DEVICE, runner_mod.RESTACKED_JOINS = on, 0
    try:
        yield {}
    finally:
        slot_rows.GATHER_ON_DEVICE, runner_mod.RESTACKED_JOINS = before


def travel_scenarios():
    env = TravelPlannerEnv("all")
    model, tok = build_embedded(travel_tokenizer_texts(env))

    def setup(days, n):
        qs = travel_queries(env, days, n)
        return [q.query for q in qs], [env.grammar(tok, q) for q in qs]

    for days in (3, 5, 7):
        prompts, grammars = setup(days, 2)
        beams = beam_search_plans(model, tok, prompts, grammars, 4)
        yield f"travel beam 4, {days} days", plans_hash(beams)
        drawn = sample_plans(model, tok, prompts, grammars, 4, seed=0)
        yield f"travel sample 2x4, {days} days", plans_hash(drawn)
        yield f"travel sample 2x4, {days} days, scored", scored_hash(model, tok, prompts, drawn)
        own = sample_plans(model, tok, prompts, grammars, 3, sample_seeds=range(6))
        yield f"travel sample 2x3 own streams, {days} days", plans_hash(own)
    for days in (3, 5):
        prompts, grammars = setup(days, 2)
        yield f"travel distinct 2x4, {days} days", distinct_hash(sample_distinct_plans(model, tok, prompts, grammars,
                                                                                        4, seed=0))
    prompts, grammars = setup(3, 8)
    for on in (False, True):
        with gathering(on) as kw:
            got = sample_distinct_plans(model, tok, prompts, grammars, 8, seed=0, **kw)
        yield f"travel distinct 8x8 in slots, {'device' if on else 'host'} path", distinct_hash(got)


def openagi_scenarios():
    env = OpenAGIEnv(split="all")
    t5 = build_embedded_planner(EmbeddedSettings())
    llama = build_embedded_planner(EmbeddedSettings(d_model=64, d_ff=128), arch="causal")
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(0)
        lora = apply_lora(llama.model, LoraSettings(enabled=True), is_encoder_decoder=False).eval()
    for name, model, tok in (("T5", t5.model, t5.tokenizer), ("LLaMA+LoRA", lora, llama.tokenizer)):
        for linear in (True, False):
            ts = [t for t in env.tasks() if t.is_linear == linear][:6]
            prompts, grammars = [t.description for t in ts], [env.grammar(tok, t) for t in ts]
            kind = "linear" if linear else "two-input"
            yield f"openagi {name} beam 4, {kind}", plans_hash(beam_search_plans(model, tok, prompts, grammars, 4))
            yield f"openagi {name} greedy, {kind}", plans_hash([[d] for d in greedy_plans(model, tok, prompts,
                                                                                            grammars)])
            drawn = sample_plans(model, tok, prompts, grammars, 4, seed=0)
            yield f"openagi {name} sample 6x4, {kind}", plans_hash(drawn)
            yield f"openagi {name} sample 6x4, {kind}, scored", scored_hash(model, tok, prompts, drawn)


def main(argv=None) -> list[tuple[str, str]]:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--quick", action="store_true", help="the OpenAGI scenarios only")
    args = ap.parse_args(argv)
    out = []
    for scenarios in (openagi_scenarios,) if args.quick else (openagi_scenarios, travel_scenarios):
        for name, parts in scenarios():
            out.append((name, digest(parts)))
            print(f"{out[-1][1]}  {name} ({len(parts)} items)", flush=True)
    return out


if __name__ == "__main__":
    main()
