"""A run's ``env:`` section: which env (``name``) and its settings.

OpenAGI's keys sit at the top of the section (``env.suite``, ``env.backend``, ...: the section
predates the second env, and every OpenAGI config keeps working); the travel sandbox's are under
``env.travel`` (:class:`envs.travel.config.TravelEnvConfig`)::

    env:
      name: travel            # openagi (default) | travel
      travel: {days: [3, 5]}

:func:`envs.make` / :func:`envs.make_train_and_held_out` build what ``name`` says.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Literal

from envs.openagi.config import EnvConfigError, OpenAGIEnvConfig
from envs.travel.config import TravelConfigError, TravelEnvConfig

ENV_NAMES = ("openagi", "travel")
GYM_IDS = {"openagi": "OpenAGI-Lite-v0", "travel": "TravelPlanner-Sandbox-v0"}


@dataclass
class EnvConfig(OpenAGIEnvConfig):
    name: Literal["openagi", "travel"] = "openagi"
    travel: TravelEnvConfig = field(default_factory=TravelEnvConfig)

    def validate(self, section: str = "env") -> None:
        if self.name not in ENV_NAMES:
            raise EnvConfigError(f"bad value for '{section}.name': {self.name!r}; expected one of "
                                 f"{', '.join(repr(n) for n in ENV_NAMES)}")
        if self.name == "travel":
            try:
                self.travel.validate(f"{section}.travel")
            except TravelConfigError as e:
                raise EnvConfigError(str(e)) from None
        else:
            super().validate(section)
