"""Fixtures of the `hf` backend tests (test_hf_*.py): the tiny random checkpoints, built once per
session, and a backend and its registry over them. Imports happen inside the fixtures, so the
other tests of this folder load neither transformers nor diffusers."""

from __future__ import annotations

import pytest


@pytest.fixture(scope="session")
def tiny(tmp_path_factory):
    """(tool -> checkpoint dir, metric -> checkpoint dir), built once per session."""
    from tests import hf_tiny
    from tests.hf_experts import HAS_DIFFUSERS

    return hf_tiny.build_all(tmp_path_factory.mktemp("hf_tiny"), with_diffusers=HAS_DIFFUSERS)


@pytest.fixture(scope="module")
def backend(tiny):
    from envs.openagi.hf import HFBackend
    from tests.hf_experts import make_config

    return HFBackend(make_config(tiny))


@pytest.fixture(scope="module")
def registry(backend):
    return backend.registry()
