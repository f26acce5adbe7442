"""``train/rltf.py`` under DeepSpeed on CPU (run by tests/rl/test_rltf_sharded.py under torchrun).

On a machine without GPUs accelerate finds no torch.distributed backend by itself; a gloo
process group made first lets it start DeepSpeed (``ACCELERATE_USE_DEEPSPEED=true``)."""

import runpy
import sys
from pathlib import Path

from accelerate.state import PartialState

if __name__ == "__main__":
    PartialState(backend="gloo")
    script = Path(__file__).resolve().parents[1] / "train" / "rltf.py"
    sys.argv = [str(script), *sys.argv[1:]]
    runpy.run_path(str(script), run_name="__main__")
