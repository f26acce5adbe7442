"""The secrets a run holds (an API key read from the environment), kept out of what it prints and writes.

Code that reads a secret calls :func:`hold` with it (the openai flow backend does with its API key);
:func:`redact` replaces every held secret in a text by ``[redacted $NAME]``. The openai backend
redacts what its server sends back (an error echoing the request's ``Authorization`` header, an
answer) before anything else sees it, so neither the ``error:`` line nor a flow trace can carry the
key; :func:`rltf.run.cli.run_cli` redacts its error line too.

Values shorter than :data:`MIN_LENGTH` characters are not held: a placeholder key for a local server
that checks none ("x", "none") would otherwise blank out every such word; real API keys are far longer.
"""

from __future__ import annotations

MIN_LENGTH = 8
"""The shortest value :func:`hold` keeps (shorter ones are no secret worth the collateral redaction)."""

_HELD: dict[str, str] = {}  # secret value -> the name it was read under (an environment variable)


def hold(value: str | None, name: str) -> None:
    """Remember ``value`` (read from ``name``, e.g. ``OPENAI_API_KEY``) as a secret of this process."""
    if isinstance(value, str) and len(value.strip()) >= MIN_LENGTH:
        _HELD[value.strip()] = name


def redact(text: str) -> str:
    """``text`` with every held secret replaced by ``[redacted $NAME]`` (longest first)."""
    for value in sorted(_HELD, key=len, reverse=True):
        if value in text:
            text = text.replace(value, f"[redacted ${_HELD[value]}]")
    return text


def forget_all() -> None:
    """Drop every held secret (a test's own, when it is done)."""
    _HELD.clear()
