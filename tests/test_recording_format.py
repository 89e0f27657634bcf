"""The recording format's version follows the sample's fields: a field added to (or removed
from) anything a recording holds without a FORMAT_VERSION bump fails here.

Readers refuse fields they do not know (telemetry/recording.py), so a new field in a file of
an old version number would make older gputuis refuse it with a confusing error; a bump makes
them say "upgrade gputui".  To change the fields: bump FORMAT_VERSION (and READABLE_VERSIONS),
say what changed in recording.py's docstring, and add the new version's list below (the
failure prints it)."""

from __future__ import annotations

import dataclasses
import json
import sys
import typing
from pathlib import Path

from gputui.telemetry import model
from gputui.telemetry.recording import FORMAT_VERSION, READABLE_VERSIONS

FIELDS_FILE = Path(__file__).parent / "fixtures" / "recording-fields.json"


def recorded_fields() -> dict[str, list[str]]:
    """Class name -> field names of every dataclass a recording holds (reached from Snapshot
    and MachineInfo through their type hints)."""
    out: dict[str, list[str]] = {}
    todo: list[type] = [model.Snapshot, model.MachineInfo]
    while todo:
        cls = todo.pop()
        if cls.__name__ in out:
            continue
        out[cls.__name__] = [f.name for f in dataclasses.fields(cls)]
        for hint in typing.get_type_hints(cls, vars(sys.modules[cls.__module__])).values():
            stack = [hint]
            while stack:
                t = stack.pop()
                stack.extend(typing.get_args(t))
                if isinstance(t, type) and dataclasses.is_dataclass(t):
                    todo.append(t)
    return dict(sorted(out.items()))


def test_the_fields_of_this_format_version_are_the_committed_ones():
    committed = json.loads(FIELDS_FILE.read_text())
    now = recorded_fields()
    assert str(FORMAT_VERSION) in committed, (
        f"no field list for format version {FORMAT_VERSION}: add it to {FIELDS_FILE.name}:\n"
        + json.dumps(now, indent=1)
    )
    assert now == committed[str(FORMAT_VERSION)], (
        "the recorded fields changed without a FORMAT_VERSION bump: bump it in "
        "gputui/telemetry/recording.py and add this list under the new version:\n" + json.dumps(now, indent=1)
    )


def test_every_committed_version_is_readable():
    committed = json.loads(FIELDS_FILE.read_text())
    assert {int(v) for v in committed} <= set(READABLE_VERSIONS)
    assert max(READABLE_VERSIONS) == FORMAT_VERSION
