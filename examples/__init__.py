"""Examples built on rltf's pieces: a minimal env (``minimal_env.py``) and a one-page RL loop
(``rltf_minimal.py``). Plug-ins above the core: nothing in rltf imports them (tests/project/test_layout.py)."""
