"""The sandbox database's files: :class:`SandboxDB` (the five tables in the official columns) and
their export to / load from the public TravelPlanner repository's ``database/`` layout
(:func:`export_database`, :func:`load_database`; the package docstring says how, generated flights
included).
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
import pandas as pd

from envs.travel.flights import generate_flights
from envs.travel.schema import COLUMNS, DATABASE_FILES, FILE_COLUMNS, FILE_HAS_INDEX

# pandas < 3 parses floats with a fast, not always round-trip parser unless asked
_READ_KW = {"float_precision": "round_trip"} if int(pd.__version__.split(".")[0]) < 3 else {}
TABLES = ("flights", "accommodations", "restaurants", "attractions", "distances")


@dataclass
class SandboxDB:
    """The five tables (official columns, DB order) and the city -> state map."""

    cities: dict[str, str]
    flights: pd.DataFrame
    accommodations: pd.DataFrame
    restaurants: pd.DataFrame
    attractions: pd.DataFrame
    distances: pd.DataFrame
    source: str = "synthetic"
    meta: dict = field(default_factory=dict)

    def table(self, name: str) -> pd.DataFrame:
        return getattr(self, name)

    def states(self) -> dict[str, list[str]]:
        out: dict[str, list[str]] = {}
        for city, state in self.cities.items():
            out.setdefault(state, []).append(city)
        return out

    def sizes(self) -> dict[str, int]:
        return {"cities": len(self.cities), **{t: len(self.table(t)) for t in TABLES}}

    def equals(self, other: "SandboxDB") -> bool:
        return self.cities == other.cities and all(
            self.table(t).reset_index(drop=True).equals(other.table(t).reset_index(drop=True)) for t in TABLES
        )

    def first_difference(self, other: "SandboxDB") -> str | None:
        if self.cities != other.cities:
            return "cities differ"
        for t in TABLES:
            a, b = self.table(t).reset_index(drop=True), other.table(t).reset_index(drop=True)
            if list(a.columns) != list(b.columns) or len(a) != len(b):
                return f"{t}: shape/columns {a.shape} {list(a.columns)} vs {b.shape} {list(b.columns)}"
            for c in a.columns:
                if not a[c].equals(b[c]):
                    bad = (a[c] != b[c]).to_numpy().nonzero()[0]
                    i = int(bad[0]) if len(bad) else 0
                    return f"{t}.{c} ({a[c].dtype} vs {b[c].dtype}) row {i}: {a[c].iloc[i]!r} vs {b[c].iloc[i]!r}"
        return None


# ------------------------------------------------------------------------------ export / load
GENERATED_FLIGHTS = "flights/generated_Flights_seed{seed}.csv"
"""Where generated flights are exported, relative to a ``database/`` folder: a name that says they are
generated, never the official ``flights/clean_Flights_2022.csv``."""
_GENERATED_FLIGHTS_GLOB = "generated_Flights_seed*.csv"


def generated_flights_file(seed: int) -> str:
    """The file name generated flights of ``seed`` are exported under (:data:`GENERATED_FLIGHTS`)."""
    return GENERATED_FLIGHTS.format(seed=int(seed))


def flights_are_generated(db: SandboxDB) -> bool:
    """Whether ``db``'s flights are made up (the synthetic sandbox, or flights generated for real tables)
    rather than read from the official file."""
    kind = db.meta.get("flights")
    return kind == "generated" if kind is not None else db.source == "synthetic"


def seed_of_flights(db: SandboxDB) -> int:
    """The seed ``db``'s generated flights were made with (``flights_seed``, else the synthetic sandbox's seed)."""
    seed = db.meta.get("flights_seed")
    return int(seed if seed is not None else db.meta.get("seed") or 0)


def generated_mark(db: SandboxDB, queries_generated: bool, seed: int | None = None) -> str:
    """What of an exported query row is made up (its ``generated`` column): the query itself
    (``queries_generated``: the project's generator, ``seed``), its reference information when the
    database is the synthetic sandbox or its flights are generated; ``none`` for a benchmark query
    whose reference information comes from real tables and the official flights."""
    parts = []
    if queries_generated:
        parts.append("query" + (f" (generated, seed {seed})" if seed is not None else " (generated)"))
    if db.source == "synthetic":
        parts.append(f"reference_information (the generated sandbox, seed {seed_of_flights(db)})")
    elif flights_are_generated(db):
        parts.append(f"reference_information's flights (generated, seed {seed_of_flights(db)})")
    return "; ".join(parts) or "none"


def export_database(db: SandboxDB, out_dir: str | Path) -> Path:
    """Write ``out_dir/database/...`` in the public repository's layout; returns the database dir.
    Generated flights go to ``flights/generated_Flights_seed<seed>.csv`` with a JSON note beside it
    (what made them), never to the official file name (module docstring)."""
    root = Path(out_dir) / "database"
    generated = flights_are_generated(db)
    for table in TABLES:
        rel = generated_flights_file(seed_of_flights(db)) if table == "flights" and generated else DATABASE_FILES[table]
        path = root / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        df = db.table(table).copy()
        if table == "distances":
            df.insert(2, "cost", np.nan)
        df = df[FILE_COLUMNS[table]]
        df.to_csv(path, index=FILE_HAS_INDEX[table])
        if table == "flights" and generated:
            note = {"generated": True, "seed": seed_of_flights(db),
                    "generator": ("the synthetic sandbox (envs/travel/sandbox)" if db.source == "synthetic"
                                  else "envs/travel/flights.py"),
                    "model": db.meta.get("flights_model"), "rows": len(df),
                    "note": "made-up flights in the official columns; not the benchmark's flights table"}
            path.with_suffix(".json").write_text(json.dumps(note, indent=1, default=str) + "\n")
    path = root / DATABASE_FILES["cities"]
    path.parent.mkdir(parents=True, exist_ok=True)
    # no trailing newline: the official evaluator splits this file on '\n' and unpacks every line
    path.write_text("\n".join(f"{c}\t{s}" for c, s in db.cities.items()))
    return root


def _database_root(path: Path) -> Path:
    if (path / "database").is_dir() and not (path / "flights").exists():
        return path / "database"
    return path


def exported_generated_flights(root: Path, seed: int | None = None) -> Path | None:
    """The generated flights file an export left in ``root`` (:data:`GENERATED_FLIGHTS`): the one of
    ``seed``, or with ``seed=None`` the only one (None when there is none, or several to choose from)."""
    if seed is not None:
        path = root / generated_flights_file(seed)
        return path if path.is_file() else None
    found = sorted((root / "flights").glob(_GENERATED_FLIGHTS_GLOB)) if (root / "flights").is_dir() else []
    return found[0] if len(found) == 1 else None


FLIGHTS_MODES = ("file", "generated", "auto")


def load_database(database_dir: str | Path, flights: str = "file", flights_seed: int = 0) -> SandboxDB:
    """Load a database directory in the public repository's layout (the real one or an export).

    ``database_dir`` is the ``database/`` folder or a folder containing it. Tables are read like
    the official tools read them: rows with any empty cell dropped (except the distance matrix),
    then the tool's columns. ``flights``: ``"file"`` -- the folder's official flights table
    (``flights/clean_Flights_2022.csv`` only; an error names it when missing); ``"generated"`` --
    the generated flights an export wrote (``flights/generated_Flights_seed<flights_seed>.csv``)
    when the folder has them, else flights generated over the folder's cities
    (:func:`envs.travel.flights.generate_flights` with ``flights_seed``); the official file is
    ignored; ``"auto"`` -- the official file when present, else as ``"generated"`` (an export's
    generated file of ``flights_seed``, or its only one). Generated flights are stated in ``source``
    (``"<dir> (flights generated, seed 0)"``) and ``meta["flights"]``; read from an export, also
    ``meta["flights_file"]``."""
    if flights not in FLIGHTS_MODES:
        raise ValueError(f"flights={flights!r}; expected one of {list(FLIGHTS_MODES)}")
    root = _database_root(Path(database_dir))
    if not root.is_dir():
        raise FileNotFoundError(f"database directory {root} does not exist")
    flights_file = root / DATABASE_FILES["flights"]
    generate = flights == "generated" or (flights == "auto" and not flights_file.is_file())
    exported = None
    if generate:
        exported = exported_generated_flights(root, flights_seed)
        if exported is None and flights == "auto":
            exported = exported_generated_flights(root)
    tables = {}
    for table in TABLES:
        if table == "flights" and generate:
            if exported is not None:
                tables[table] = _read_table(exported, table)
            continue
        path = root / DATABASE_FILES[table]
        if not path.is_file():
            extra = (f" (generated flights of an export are read with flights='generated' or 'auto': "
                     f"{exported_generated_flights(root).relative_to(root)})"
                     if table == "flights" and exported_generated_flights(root) is not None else "")
            raise FileNotFoundError(
                f"missing {DATABASE_FILES[table]} under {root} (the {table} table of the TravelPlanner database)"
                + extra)
        tables[table] = _read_table(path, table)
    path = root / DATABASE_FILES["cities"]
    if not path.is_file():
        raise FileNotFoundError(f"missing {DATABASE_FILES['cities']} under {root} (city<TAB>state lines)")
    cities: dict[str, str] = {}
    for i, line in enumerate(path.read_text(encoding="utf-8").split("\n"), 1):
        if not line.strip():
            continue
        parts = line.split("\t")
        if len(parts) != 2:
            raise ValueError(f"{path} line {i}: expected 'city<TAB>state', got {line!r}")
        cities[parts[0]] = parts[1]
    if not generate:
        return SandboxDB(cities, source=str(root), meta={"root": str(root), "flights": "file"}, **tables)
    if exported is not None:
        rel = exported.relative_to(root).as_posix()
        seed = int(exported.stem.rsplit("seed", 1)[1]) if exported.stem.rsplit("seed", 1)[-1].isdigit() else None
        meta = {"root": str(root), "flights": "generated", "flights_seed": seed, "flights_file": rel}
        note = exported.with_suffix(".json")
        if note.is_file():
            meta["flights_note"] = json.loads(note.read_text())
        return SandboxDB(cities, source=f"{root} (flights generated, seed {seed}, read from {rel})", meta=meta,
                         **tables)
    tables["flights"], model = generate_flights(cities, tables["attractions"], tables["distances"], flights_seed)
    meta = {"root": str(root), "flights": "generated", "flights_seed": flights_seed, "flights_model": model}
    return SandboxDB(cities, source=f"{root} (flights generated, seed {flights_seed})", meta=meta, **tables)


def _read_table(path: Path, table: str) -> pd.DataFrame:
    """One table file as the official tools read it (``dropna`` but for the distances), its tool's columns."""
    df = pd.read_csv(path, **_READ_KW)
    missing = [c for c in COLUMNS[table] if c not in df.columns]
    if missing:
        raise ValueError(f"{path}: missing column(s) {missing}; expected {COLUMNS[table]}")
    if table != "distances":
        df = df.dropna()
    return df[COLUMNS[table]].reset_index(drop=True)
