"""The agent-flow configs on SmolLM2 (issue 23, item 6) load, name the same held-out queries and
describe their runs without loading anything; ``flow.warm_start_queries`` is checked and described."""

from __future__ import annotations

import re
from pathlib import Path

import pytest
import yaml

import envs
from rltf.config.loading import ConfigError, load_config
from rltf.flows.evaluate import describe_flows, load_flow_config
from rltf.flows.evaluation import held_out_ids
from rltf.stages.flow_job import check_flow_job, describe_flow_job

EVAL_CONFIGS = ("travel-mtp-smollm2", "travel-react-smollm2")
RL_CONFIG = "configs/travel-mtp-smollm2-rl.yaml"


def test_the_untrained_configs_run_smollm2_on_the_hf_backend_with_free_text():
    queries = []
    for name in EVAL_CONFIGS:
        cfg, flow = load_flow_config([f"config=configs/{name}.yaml"])
        shipped = yaml.safe_load(Path(f"configs/{name}.yaml").read_text())["flow"]
        assert flow.methods == [name.split("-")[1]] and flow.limit == shipped["limit"]
        assert flow.backend.kind == "hf" and flow.backend.model == "smollm2" and flow.backend.chat_template == "auto"
        assert flow.mtp.supervisor == "model" if name.startswith("travel-mtp") else flow.react.think_tokens > 0
        text = describe_flows(cfg, flow)
        assert "backend     hf: smollm2 on cpu" in text and "nothing was loaded" in text
        queries.append(held_out_ids(cfg, flow, None))
    cfg = load_config([f"config={RL_CONFIG}"])
    queries.append(held_out_ids(cfg, cfg.flow, None))
    assert queries[0] == queries[1] == queries[2] and len(queries[0]) == 4  # one table, the same queries
    assert set(queries[0]) <= set(envs.split_ids(cfg.env)["test"])


def test_the_rl_config_trains_smollm2_with_lora_on_a_few_warm_start_queries():
    cfg = load_config([f"config={RL_CONFIG}"])
    assert check_flow_job(cfg) == "mtp" and cfg.planner.model == "smollm2" and cfg.planner.lora.enabled
    assert cfg.flow.backend.kind == "planner" and cfg.flow.warm_start_queries == 4
    assert cfg.flow.score_batch == 8  # the step's memory bounded: 8 decisions per re-scoring forward
    text = describe_flow_job(cfg)
    assert ("on 4 (evenly spaced) of the train queries" in text
            and "rltf        4 steps x 2 queries x 2 sampled passes" in text)
    assert "the solver answers every choice of mtp on the train queries" in describe_flow_job(
        load_config([f"config={RL_CONFIG}", "flow.warm_start_queries=null"]))
    with pytest.raises(ConfigError, match=re.escape("'flow.warm_start_queries': 0")):
        load_config([f"config={RL_CONFIG}", "flow.warm_start_queries=0"])
