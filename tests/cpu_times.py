"""Opt-in pytest plugin: each test's CPU seconds, to find where the suite's time goes.

``python -m pytest -q -n 2 -p tests.cpu_times`` (``RLTF_CPU_TIMES=<file>`` names the table; default
``/tmp/suite_cpu.txt``). Wall time is noisy on shared cores; CPU seconds are not: each test counts its
process's own CPU (user + system) plus that of the child processes it waited for (``RUSAGE_CHILDREN``:
recipe subprocesses, torchrun's workers), over setup + call + teardown, so a module- or session-scoped
fixture counts in the test that first asks for it. Each worker also counts its time outside tests
(start, imports, collection) as ``<worker …: outside tests>``. The controller merges every worker's rows
into one table, sorted by CPU seconds, and prints the total and the top 15."""

import os
import resource
import time
from pathlib import Path

import pytest

DEFAULT_TABLE = "/tmp/suite_cpu.txt"


def _cpu():
    own = resource.getrusage(resource.RUSAGE_SELF)
    kids = resource.getrusage(resource.RUSAGE_CHILDREN)
    return own.ru_utime + own.ru_stime, kids.ru_utime + kids.ru_stime


def _table_path():
    return Path(os.environ.get("RLTF_CPU_TIMES", DEFAULT_TABLE))


def _rows_path(config):
    worker = getattr(config, "workerinput", {}).get("workerid", "main")
    return _table_path().with_name(_table_path().name + f".{worker}.rows")


def pytest_configure(config):
    config._cpu_rows = []
    config._cpu_in_tests = 0.0
    if not hasattr(config, "workerinput"):  # the controller (or a run without -n): start clean
        for old in _table_path().parent.glob(_table_path().name + ".*.rows"):
            old.unlink()


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_protocol(item, nextitem):
    own0, kids0 = _cpu()
    wall0 = time.monotonic()
    yield
    own1, kids1 = _cpu()
    own, kids = own1 - own0, kids1 - kids0
    item.config._cpu_in_tests += own + kids
    item.config._cpu_rows.append((own + kids, own, kids, time.monotonic() - wall0, item.nodeid))


def pytest_sessionfinish(session):
    config = session.config
    worker = getattr(config, "workerinput", {}).get("workerid", "main")
    own, kids = _cpu()
    if not hasattr(config, "workerinput") and worker == "main" and config.getoption("numprocesses", None):
        kids = 0.0  # xdist's controller: its children are the workers, whose rows count them already
    rows = list(config._cpu_rows)
    rows.append((own + kids - config._cpu_in_tests, 0.0, 0.0, 0.0, f"<worker {worker}: outside tests>"))
    with open(_rows_path(config), "w") as f:
        for total, own_s, kids_s, wall, nodeid in rows:
            f.write(f"{total:.3f}\t{own_s:.3f}\t{kids_s:.3f}\t{wall:.3f}\t{nodeid}\n")
    if hasattr(config, "workerinput"):
        return
    rows = []
    for part in sorted(_table_path().parent.glob(_table_path().name + ".*.rows")):
        for line in part.read_text().splitlines():
            total, own_s, kids_s, wall, nodeid = line.split("\t", 4)
            rows.append((float(total), float(own_s), float(kids_s), float(wall), nodeid))
        part.unlink()
    rows.sort(reverse=True)
    grand = sum(r[0] for r in rows)
    by_file = {}
    for r in rows:
        key = r[4].split("::")[0]
        by_file[key] = by_file.get(key, 0.0) + r[0]
    lines = [f"total CPU s (tests + workers' own start/collection): {grand:.1f}", "",
             "   cpu_s   self_s  child_s   wall_s  test"]
    lines += [f"{t:8.2f} {o:8.2f} {k:8.2f} {w:8.2f}  {n}" for t, o, k, w, n in rows]
    lines += ["", "per file:"]
    lines += [f"{v:8.2f}  {k}" for k, v in sorted(by_file.items(), key=lambda kv: -kv[1])]
    _table_path().write_text("\n".join(lines) + "\n")
    reporter = config.pluginmanager.get_plugin("terminalreporter")
    if reporter is not None:
        reporter.write_sep("-", f"CPU seconds: {grand:.1f} in all ({_table_path()})")
        for t, o, k, w, n in rows[:15]:
            reporter.write_line(f"{t:8.2f}  {n}")
