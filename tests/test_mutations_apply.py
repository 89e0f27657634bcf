"""bench/mutate.py breaks each safety guard on purpose and checks that the tests notice.  A
mutation whose code moved no longer applies and silently guards nothing: every one must
still find its code, exactly once, and name test files that exist."""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def _mutations():
    spec = importlib.util.spec_from_file_location("gputui_bench_mutate", ROOT / "bench" / "mutate.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module  # (its dataclass looks itself up there)
    spec.loader.exec_module(module)
    return module.MUTATIONS


def test_every_mutation_finds_its_code_once_and_its_tests_exist():
    problems = []
    mutations = _mutations()
    assert len({m.id for m in mutations}) == len(mutations), "two mutations share an id"
    for m in mutations:
        path = ROOT / m.file
        text = path.read_text(encoding="utf-8") if path.is_file() else ""
        if text.count(m.old) != 1:
            problems.append(f"{m.id}: {m.file} holds its code {text.count(m.old)} times")
        for t in m.tests:
            if not (ROOT / t.split("::", 1)[0]).is_file():
                problems.append(f"{m.id}: no test file {t}")
    assert not problems, "\n".join(problems)
