"""A skipped update advances the learning-rate schedule without torch's "``lr_scheduler.step()`` before
``optimizer.step()``" warning (issue #38 item 10: it was 3 of the suite's warnings; the filter meant to
silence it took the message's parentheses as a regular expression's and never matched), and the suite
turns that warning into an error (pyproject.toml's ``filterwarnings``), so it cannot come back."""

from __future__ import annotations

import warnings
from pathlib import Path

import tomllib
import torch

from rltf.run.distributed import advance_schedule

ROOT = Path(__file__).resolve().parents[2]


def _schedule():
    model = torch.nn.Linear(2, 2)
    optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
    return optimizer, torch.optim.lr_scheduler.LambdaLR(optimizer, lambda i: 1.0 / (1 + i))


def test_a_skipped_first_update_advances_the_schedule_silently():
    optimizer, scheduler = _schedule()
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        advance_schedule(scheduler)
    assert scheduler.last_epoch == 1 and optimizer.param_groups[0]["lr"] == 0.05


def test_the_suite_makes_the_schedule_order_warning_an_error():
    filters = tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["pytest"]["ini_options"]["filterwarnings"]
    assert any(f.startswith("error:Detected call of `lr_scheduler") for f in filters), filters
    _, scheduler = _schedule()
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        scheduler.step()  # torch's own warning, as a schedule stepped before its optimizer gives it
    assert any("lr_scheduler.step()" in str(w.message) for w in caught)
