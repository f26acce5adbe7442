"""Issue 16, non-finite numbers in a config: refused naming the key."""


import pytest

from rltf.config.loading import ConfigError
from tests.toy_run import make_cfg

pytestmark = pytest.mark.usefixtures("one_torch_thread")


@pytest.mark.parametrize("key", ["rltf.lr", "rltf.temperature", "sft.lr", "env.n_samples"])
@pytest.mark.parametrize("value", ["inf", "nan", ".inf", "1e999"])
def test_non_finite_numbers_in_a_config_are_refused_naming_the_key(tmp_path, key, value):
    with pytest.raises(ConfigError, match=rf"'{key}'.*expected (a finite number|an integer)"):
        make_cfg(tmp_path, f"{key}={value}")


def test_bound_errors_refuse_non_finite_numbers_of_unbounded_fields():
    import dataclasses

    from common.config_fields import bound_errors, num

    @dataclasses.dataclass
    class Section:
        scale: float = num(1.0)

    assert list(bound_errors(Section(2.5))) == []
    assert list(bound_errors(Section(float("nan")), "x.")) == ["bad value for 'x.scale': nan; expected a finite number"]


def test_an_infinite_hf_memory_budget_is_refused():
    from envs.openagi.hf.config import HFBackendConfig

    with pytest.raises(ValueError, match="memory_budget_gib=inf; expected a finite number"):
        HFBackendConfig.from_dict({"memory_budget_gib": float("inf")})
