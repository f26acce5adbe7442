"""Fine-tuning schema: supervised training on the train tasks' reference plans.

    python train/sft.py [config=...] [key=value ...]

Writes the fine-tuned planner (``save_pretrained``) to ``<run_dir>/sft`` — the checkpoint RLTF
starts from (``planner.model=<run_dir>/sft``) — and prints its held-out score.
"""

import os
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")

from accelerate import Accelerator  # noqa: E402
from accelerate.utils import set_seed  # noqa: E402

from envs.openagi.split import load_split  # noqa: E402
from rltf import evaluate as ev  # noqa: E402
from rltf.config import load_config, save_config  # noqa: E402
from rltf.distributed import sharding_for  # noqa: E402
from rltf.pipeline import load_planner_for, make_envs  # noqa: E402
from rltf.sft import supervised_finetune  # noqa: E402
from rltf.tracking import write_json  # noqa: E402


def main(argv: list[str] | None = None) -> None:
    cfg = load_config(sys.argv[1:] if argv is None else argv)
    acc = Accelerator()
    sharding = sharding_for(acc)  # replicated (DDP), FSDP2 or DeepSpeed ZeRO-2, as launched
    set_seed(cfg.seed)
    train_env, eval_env = make_envs(cfg, acc)
    planner = load_planner_for(cfg, acc, sharding)
    hist = supervised_finetune(planner, train_env, train_env.tasks(), epochs=cfg.sft.epochs, lr=cfg.sft.lr,
                               batch_size=cfg.sft.batch_size, seed=cfg.seed, accelerator=acc,
                               progress=cfg.logging.progress_bar, sharding=sharding)
    out = cfg.run_dir / "sft"
    weights = sharding.full_state_dict(planner.model)  # every process takes part when sharded
    if acc.is_main_process:
        cfg.run_dir.mkdir(parents=True, exist_ok=True)
        save_config(cfg, cfg.run_dir / "config.yaml")
        planner.save_pretrained(out, state_dict=weights)
        write_json(cfg.run_dir / "sft_history.json", hist)
    split = load_split(cfg.env.suite)
    tasks = [eval_env.get_task(i) for s in cfg.eval.splits for i in split[s]]
    with sharding.gathered(planner.model):
        res = ev.constrained_schema("finetuned", planner, eval_env, tasks, cfg.eval.num_beams)
    if acc.is_main_process:
        print(f"final nll {hist[-1]['sft/nll'] if hist else float('nan'):.4f}; saved to {out}")
        print(f"held-out ({'+'.join(cfg.eval.splits)}) finetuned={res.overall:.4f}")


if __name__ == "__main__":
    main()
