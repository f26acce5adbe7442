"""The GPU check's results page (``benchmarks/gpu_check.py``'s JSON): one row per phase."""

from __future__ import annotations

NOT_RECORDED = "not recorded"


def number(v, fmt: str = ".4f") -> str:
    """``v`` formatted, or a dash for None (every results page's cell)."""
    return "—" if v is None else format(v, fmt)


def _env_versions(env: dict) -> str:
    pkgs = ", ".join(f"{k} {v}" for k, v in (env.get("packages") or {}).items() if v)
    return f"python {env.get('python')}, torch {env.get('torch')}, {pkgs}"


def _env_machine(env: dict) -> str:
    return (f"{env.get('gpu')} ({env.get('gpu_memory_gib')} GiB, CUDA {env.get('cuda')}), "
            f"{env.get('cpu_count')} CPU cores")


def _gpu_figures(details: dict) -> str:
    """The few figures of a phase's details a reader looks for, in words."""
    out = []
    if (sft := details.get("sft")) and "wall_s" in sft:
        out.append(f"SFT {sft.get('epochs')} epochs {sft['wall_s']:.1f} s")
    ev = details.get("evaluation") or {}
    if "num_beams" in ev:
        out.append(f"evaluation of {ev.get('tasks')} tasks × {ev['num_beams']} beams {ev['wall_s']:.2f} s")
    if "queries" in ev:
        out.append(f"evaluation of {ev['queries']} queries, final pass {ev.get('finetuned_final_pass')} → "
                   f"{ev.get('rltf_final_pass')}")
    if "same_plans" in details:
        out.append(f"same seed, same plans: {'yes' if details['same_plans'] else 'NO'}")
    if "sampler_vs_scorer_max_abs" in details:
        out.append(f"sampler vs teacher-forced log π_c {details['sampler_vs_scorer_max_abs']:.1e}")
    if "logprob_bf16_vs_fp32_max_abs" in details:
        out.append(f"log π_c bf16 vs fp32: max {details['logprob_bf16_vs_fp32_max_abs']:.3f} abs "
                   f"({100 * details.get('logprob_bf16_vs_fp32_max_rel', 0):.1f}% rel)")
    train = details.get("train") or {}
    if "logprob_mismatch_max" in train:
        out.append(f"sampled vs re-scored log π_c {train['logprob_mismatch_max']:.2g}")
    if "valid_fraction" in train:
        out.append(f"reward {train.get('reward_mean')}, valid completions {train['valid_fraction']}")
    return "; ".join(out)


def gpu_check_lines(data: dict) -> tuple[dict, list[str]]:
    """``benchmarks/gpu_check.py``'s JSON: what it recorded, and one row per phase (extra invocations merged in)."""
    env = data.get("environment", {})
    recorded = {"versions": _env_versions(env), "machine": _env_machine(env)}
    phases = dict(data["phases"])
    if "flow_rltf_fp32" in data:
        phases["flow_rltf (fp32)"] = data["flow_rltf_fp32"]
    lines = ["| phase | status | median step, wall / CPU s | first step, wall s | peak GPU MiB | what | key figures |",
             "|---|---|---|---|---|---|---|"]
    for name, p in phases.items():
        steps = (p.get("details") or {}).get("rltf_steps") or (p.get("details") or {}).get("grpo_steps") or {}
        median = ""
        if "median_wall_s" in steps:
            median = f"{steps['median_wall_s']:.2f} / {number(steps.get('median_cpu_s'), '.2f')}"
        first = steps.get("first_wall_s", (steps.get("first") or {}).get("wall_s"))
        peak = p.get("peak_gpu_mib")
        lines.append(f"| {name} | {p.get('status')} | {median} | {number(first, '.1f') if first is not None else ''} | "
                     f"{number(peak, ',.0f') if peak is not None else ''} | {p.get('what', '')} | "
                     f"{_gpu_figures(p.get('details') or {})} |")
    lines += ["", f"Device `{data.get('device')}`, precision `{data.get('precision')}`; settings: "
                  + ", ".join(f"{k}={v}" for k, v in (data.get("settings") or {}).items()) + "."]
    lines.append(f"Seconds for the check: {data.get('seconds')}; with the QLoRA call: "
                 f"{data.get('seconds_with_qlora', NOT_RECORDED)}; with the flow phases: "
                 f"{data.get('seconds_with_qlora_and_flow', NOT_RECORDED)}. Failed phases: "
                 f"{', '.join(data.get('failed') or []) or 'none'}.")
    runs = [(n, p["run"]) for n, p in phases.items() if p.get("run")]
    if runs:
        lines += ["", "Phases run in a separate invocation:", ""] + [f"* `{n}`: {r}" for n, r in runs]
    q = data.get("qlora_environment")
    if q and q != env:
        diff = {k: v for k, v in (q.get("packages") or {}).items() if (env.get("packages") or {}).get(k) != v}
        lines.append("* the QLoRA invocation's environment differs in: "
                     + ", ".join(f"{k} {v}" for k, v in diff.items()))
    return recorded, lines
