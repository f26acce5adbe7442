"""The small offline run of the reliability tests (issue 16): a config with a tiny batch and a
checkpoint every step, and a tiny random T5 planner."""

from rltf.config.loading import load_config
from rltf.planners.planner import Planner
from tests.tiny_models import tiny_t5, unigram_tokenizer


def make_cfg(tmp_path, *overrides):
    return load_config([f"output_dir={tmp_path}", "run_name=toy", "rltf.tasks_per_batch=2", "rltf.k_samples=4",
                        "rltf.lr=0.01", "rltf.eval_every=0", "rltf.checkpoint_every=1", "logging.progress_bar=false",
                        *overrides])


def make_planner(seed=0):
    tok = unigram_tokenizer()
    return Planner(tiny_t5(tok, seed=seed), tok, True, "tiny-t5")
