"""Environments. Importing this package registers ``OpenAGI-Lite-v0`` with Gymnasium."""

from gymnasium.envs.registration import register, registry

if "OpenAGI-Lite-v0" not in registry:
    register(id="OpenAGI-Lite-v0", entry_point="envs.openagi.env:OpenAGIEnv",
             kwargs={"suite": "lite", "backend": "lite"})
