"""The one untrusted-text rule (gputui/untrusted.py), checked over every code point and at
every place untrusted text leaves gputui: the TUI's lines, CSV, JSON, `watch`, notifications."""

from __future__ import annotations

import csv
import dataclasses
import io
import json
import sys

import pytest
from conftest import H200_X2, gputui

from gputui.telemetry.recording import read_recording
from gputui.untrusted import csv_cell, escaped, json_text, label, literal, one_cell, visible

HOSTILE = (
    "\x1b]52;c;ZXZpbA==\x07"  # OSC 52: write the clipboard
    "\x1b]0;pwned\x07"  # OSC 0: the window title
    "\x1b[2J"  # clear the screen
    "\x9b31m"  # C1 CSI (U+009B)
    "\u202e"  # right-to-left override
    + "\u034f"
    * 60  # combining grapheme joiner: zero width, passes combining()
    + "\u3164"  # Hangul filler: default-ignorable, looks like a space of zero width
    "[link=https://evil.example]x[/link]"
)
RAW = ["\x1b", "\x07", "\x9b", "\u202e", "\u034f", "\u3164"]


def test_one_cell_agrees_with_terminal_widths_over_every_code_point():
    """A character shown as itself in a cell is one cell wide for Textual (rich's cell
    width) and for a terminal emulator (wcwidth, as pyte uses it); a visible character is
    one or two cells wide for both.  Every code point, so no zero-width or combining one
    can slip through (the old filter let about 1,500 through, e.g. U+034F)."""
    wcwidth = pytest.importorskip("wcwidth")
    from rich.cells import cell_len

    bad_one: list[str] = []
    bad_visible: list[str] = []
    for code in range(sys.maxunicode + 1):
        ch = chr(code)
        if one_cell(ch) and (cell_len(ch) != 1 or wcwidth.wcwidth(ch) != 1):
            bad_one.append(f"U+{code:04X}")
        if visible(ch) and (cell_len(ch) not in (1, 2) or wcwidth.wcwidth(ch) not in (1, 2)):
            bad_visible.append(f"U+{code:04X}")
        if one_cell(ch) and not visible(ch):
            bad_one.append(f"U+{code:04X} (not visible)")
    assert bad_one == [], f"{len(bad_one)} one-cell characters are not one cell: {bad_one[:20]}"
    assert bad_visible == [], f"{len(bad_visible)} visible characters take no cell: {bad_visible[:20]}"


def test_the_renderers_use_the_one_rule():
    from gputui.ui import render
    from gputui.ui.processes import lines as process_lines
    from gputui.ui.processes import rows as process_rows

    assert process_lines.literal is literal and process_rows.literal is literal
    assert render.clean(HOSTILE) == label(HOSTILE)
    for ch in ("\u034f", "\u3164", "\u200b", "\x9b", "\u0301", "\u0903", "\U0001f1e6"):
        assert not one_cell(ch) and not visible(ch), ascii(ch)
    assert visible("漢") and not one_cell("漢")
    assert one_cell("é") and one_cell("Ж") and one_cell("█")


def test_each_form_keeps_nothing_raw():
    for form in (literal, escaped, label, csv_cell):
        out = form(HOSTILE)
        assert not any(ch in out for ch in RAW), (form.__name__, ascii(out))
    # printable (str.isprintable) yet not one cell: no fast path may let these through
    for sneaky in ("\u034f" * 60 + "cmd", "\u3164x", "a\u0301b", "\U000e0041"):
        assert sneaky.isprintable() or sneaky == "\U000e0041"
        for form in (literal, label):
            assert all(one_cell(ch) for ch in form(sneaky)), (form.__name__, ascii(form(sneaky)))
        assert all(visible(ch) for ch in escaped(sneaky)), ascii(escaped(sneaky))
    assert literal("漢") == "\\u6f22" and label("漢") == "?"  # wide: not one cell
    assert "[link=https://evil.example]" in literal(HOSTILE)  # markup is text
    assert literal("a\x1bb") == "a\\x1bb"
    assert escaped("漢\x9b") == "漢\\x9b"  # wide stays outside cell layouts
    assert len(label(HOSTILE)) == len(HOSTILE)  # one cell per character


def test_json_text_escapes_what_json_dumps_leaves_raw_and_round_trips():
    doc = {"name": HOSTILE + "\x7f漢\U0001f600\U000e0001"}
    out = json_text(json.dumps(doc, ensure_ascii=False, indent=2))
    assert not any(ch in out for ch in [*RAW, "\x7f", "\U000e0001"]), ascii(out)
    assert "漢" in out and "\U0001f600" in out  # visible characters stay readable
    assert json.loads(out) == doc


@pytest.mark.parametrize(
    ("cell", "expected"),
    [
        ('=HYPERLINK("http://x")', '\'=HYPERLINK("http://x")'),
        ("+1", "'+1"),
        ("-cmd|' /C calc'!A0", "'-cmd|' /C calc'!A0"),
        ("@SUM(A1)", "'@SUM(A1)"),
        ("\t=1", "'\\x09=1"),
        ("\r=1", "'\\x0d=1"),
        ("python train.py", "python train.py"),
    ],
)
def test_csv_cells_are_neutralised_for_spreadsheets(cell, expected):
    assert csv_cell(cell) == expected


def _hostile_recording(tmp_path, **system):
    """The real 2x H200 recording with hostile process names, command lines, users and
    (optionally) system fields: what a local user can put in a process's name."""
    from gputui.telemetry.recording import RecordingWriter

    header, ticks = read_recording(H200_X2)
    machine = header.machine
    if system:
        machine = dataclasses.replace(machine, system=dataclasses.replace(machine.system, **system))
    path = tmp_path / "hostile.jsonl"
    with RecordingWriter(path, machine, header.interval) as w:
        for snap in ticks[55:60]:
            procs = tuple(
                dataclasses.replace(p, name="=" + HOSTILE, cmdline=("python", HOSTILE), user="@" + HOSTILE)
                for p in snap.processes
            )
            w.write(dataclasses.replace(snap, processes=procs))
    return path


def test_snapshot_csv_processes_prints_no_escape_and_no_formula(tmp_path):
    path = _hostile_recording(tmp_path)
    r = gputui("snapshot", "--replay", str(path), "--csv", "--processes")
    assert r.returncode == 0, r.stderr
    assert not any(ch in r.stdout for ch in RAW), ascii(r.stdout[:400])
    rows = list(csv.reader(io.StringIO(r.stdout), skipinitialspace=True))
    head = rows[0]
    for row in rows[1:]:
        cells = dict(zip(head, row, strict=True))
        assert cells["process_name"].startswith("'=")
        assert cells["user"].startswith("'@")
        assert "\\x1b]52;c;" in cells["command"]  # shown, not obeyed


def test_snapshot_json_and_watch_escape_c1_and_round_trip(tmp_path):
    path = _hostile_recording(tmp_path)
    r = gputui("snapshot", "--replay", str(path), "--json", "--processes")
    assert r.returncode == 0, r.stderr
    assert not any(ch in r.stdout for ch in RAW), ascii(r.stdout[:400])
    doc = json.loads(r.stdout)
    assert doc["processes"][0]["process_name"] == "=" + HOSTILE  # exact, once decoded


def test_header_detail_and_banner_draw_recording_fields_and_file_name_inertly(tmp_path):
    import asyncio

    from conftest import screen_lines, wait_for

    from gputui.telemetry.recording import ReplaySource
    from gputui.ui.app import GpuTuiApp

    evil_dir = tmp_path / "d"
    evil_dir.mkdir()
    src = _hostile_recording(
        tmp_path, driver_version="\x1b[2J580\x1b]0;t\x07", cuda_driver_version="\x9b2J13"
    )
    target = evil_dir / "rec\x1b]0;title\x07|9x.jsonl"
    target.write_bytes(src.read_bytes())

    async def go():
        app = GpuTuiApp(source=ReplaySource(target), interval=3600.0, watch_terminal=False)
        async with app.run_test(size=(200, 50)) as pilot:
            await wait_for(pilot, lambda: app.snapshot is not None)
            await pilot.pause()
            widgets = list(app.query("HeaderBar")) + list(app.query("Banner"))
            drawn = "".join(
                seg.text for w in widgets for y in range(w.size.height) for seg in w.render_line(y)
            )
            assert not any(ch in drawn for ch in RAW), ascii(drawn)
            assert "580" in drawn and "rec?]0;title?" in drawn
            text = "\n".join(screen_lines(app))
            assert "9x.jsonl" in text  # the "|" of the name did not split the banner
            await pilot.press("enter")  # the detail view: Driver, CUDA
            await pilot.pause(0.3)
            text = "\n".join(screen_lines(app))
            assert not any(ch in text for ch in RAW)

    asyncio.run(go())


def test_line_widgets_never_send_a_control_character():
    """Defence in depth: whatever a caller forgot to clean, a LineWidget's strips carry no
    C0, DEL or C1 control and no bidirectional override."""
    from gputui.ui.widgets.lines import LineWidget

    class W(LineWidget):
        def build(self, width, height):
            return [[("a\x1b[2J\x9b\u202e\x07b", None)]]

    w = W()
    w._base = None
    strip = w._strip(w.build(10, 1)[0], 10)
    text = "".join(seg.text for seg in strip)
    assert not any(ch in text for ch in RAW), ascii(text)
    assert len(text) == 10


def test_a_telemetry_error_quoting_markup_is_shown_as_text(tmp_path):
    """A recording value holding `[link=...]` ends in the telemetry-error notice: it is text,
    not markup (Textual raised MarkupError and the monitor died)."""
    import asyncio

    from conftest import wait_for

    from gputui.telemetry.recording import ReplaySource
    from gputui.ui.app import GpuTuiApp

    lines = _lines(H200_X2)[:4]
    tick = json.loads(lines[2])
    tick["gpus"][0]["temperature"] = "[link=https://evil.example]x[/link] [bold"
    lines[2] = json.dumps(tick)
    path = tmp_path / "markup.jsonl"
    path.write_text("\n".join(lines) + "\n")

    async def go():
        app = GpuTuiApp(source=ReplaySource(path), interval=3600.0, watch_terminal=False)
        async with app.run_test(size=(120, 40), notifications=True) as pilot:  # toasts drawn
            await wait_for(pilot, lambda: app.snapshot is not None)
            app.poller.step(1)
            await wait_for(pilot, lambda: app.error is not None)
            await pilot.pause(0.2)
            assert app.is_running
            toasts = list(app.screen.query("Toast"))
            assert toasts
            drawn = "".join(str(t.render()) for t in toasts)
            assert "[link=https://evil.example]" in drawn, drawn

    asyncio.run(go())


def _lines(path):
    import gzip

    with gzip.open(path, "rt", encoding="utf-8") as f:
        return f.read().splitlines()


def test_watch_alerts_quoting_a_process_name_carry_no_raw_control(tmp_path):
    """The process-age alert quotes the process name and user: on stdout as JSON with every
    non-visible character escaped (decoding gives the exact name back)."""
    path = _hostile_recording(tmp_path)
    cfg = tmp_path / "c.toml"
    cfg.write_text("[alerts.process_age]\nenabled = true\nhours = 0.0\nmin_memory_mib = 0\n")
    r = gputui("watch", "--replay", str(path), "--interval", "0.1", "--config", str(cfg))
    assert r.returncode == 0, r.stderr
    assert r.stdout.strip(), r.stderr
    assert not any(ch in r.stdout for ch in RAW), ascii(r.stdout[:400])
    events = [json.loads(line) for line in r.stdout.splitlines()]
    assert any(e["kind"] == "process_age" and HOSTILE in e["message"] for e in events)


def test_exporter_labels_carry_no_raw_control(tmp_path):
    """/metrics names every process: a `curl` of it in a terminal must not obey its name."""
    from prometheus_client.exposition import generate_latest
    from prometheus_client.parser import text_string_to_metric_families
    from prometheus_client.registry import Collector, CollectorRegistry

    from gputui.export.prometheus import build_families

    path = _hostile_recording(tmp_path, hostname="node\x1b]0;x\x07", driver_version="\x9b2J")
    header, ticks = read_recording(path)

    class Fixed(Collector):
        def collect(self):
            return iter(build_families(header.machine, ticks[-1]))

    registry = CollectorRegistry(auto_describe=False)
    registry.register(Fixed())
    text = generate_latest(registry).decode()
    assert not any(ch in text for ch in RAW), ascii(text[:300])
    names = {
        s.labels["process_name"]
        for fam in text_string_to_metric_families(text)
        for s in fam.samples
        if "process_name" in s.labels
    }
    assert names == {escaped("=" + HOSTILE)}
