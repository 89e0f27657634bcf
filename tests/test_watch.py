"""`gputui watch`: alerts from real recordings reach a real alert command as JSON on stdin,
rate-limited, never through a shell unless asked, never holding up the sampling."""

from __future__ import annotations

import json
import sys
import time
from pathlib import Path

from conftest import H200_X1, H200_X2, gputui

from gputui.export.alert_command import AlertCommand, command_argv
from gputui.telemetry.alerts import Alert, AlertEvent

RECORDER = """\
import json, os, sys, uuid
doc = json.loads(sys.stdin.read())
doc["env"] = {k: v for k, v in os.environ.items() if k.startswith("GPUTUI_ALERT_")}
with open(os.path.join(sys.argv[1], uuid.uuid4().hex + ".json"), "w") as f:
    json.dump(doc, f)
"""


def setup(tmp_path: Path, config: str) -> tuple[Path, Path, str]:
    cfg = tmp_path / "config.toml"
    cfg.write_text(config)
    out = tmp_path / "received"
    out.mkdir()
    script = tmp_path / "record_alert.py"
    script.write_text(RECORDER)
    return cfg, out, f"{sys.executable} {script} {out}"


def received(out: Path) -> list[dict]:
    docs = [json.loads(p.read_text()) for p in out.iterdir()]
    return sorted(docs, key=lambda d: (d["timestamp"], d["key"], d["state"]))


TEMPERATURE = "[alerts.temperature]\nabove = 55.0\nclear_below = 50.0\nfor_seconds = 0.0\n"


def test_alerts_of_a_real_recording_reach_the_command_as_json(tmp_path, x2_recording):
    header, _ = x2_recording
    cfg, out, cmd = setup(tmp_path, TEMPERATURE)
    r = gputui(
        "watch", "--config", str(cfg), "--replay", str(H200_X2), "--interval", "0.001", "--alert-cmd", cmd
    )
    assert r.returncode == 0, r.stderr
    printed = [json.loads(line) for line in r.stdout.splitlines()]
    docs = received(out)
    assert len(docs) == 4  # each GPU heats past 55 °C under DDP and cools below 50 after
    assert sorted((d["key"], d["state"]) for d in docs) == sorted((d["key"], d["state"]) for d in printed)
    for d in docs:
        assert d["format"] == "gputui-alert"
        assert d["version"] == 1
        assert d["kind"] == "temperature"
        assert d["hostname"] == "vm"
        assert d["gpu"]["uuid"] == header.machine.devices[d["gpu"]["index"]].uuid
        assert d["unit"] == "°C"
        assert (d["value"] >= 55) if d["state"] == "firing" else (d["value"] < 50)
        assert d["env"] == {
            "GPUTUI_ALERT_STATE": d["state"],
            "GPUTUI_ALERT_KIND": "temperature",
            "GPUTUI_ALERT_KEY": d["key"],
            "GPUTUI_ALERT_GPU": str(d["gpu"]["index"]),
            "GPUTUI_ALERT_MESSAGE": d["message"],
        }
    for gpu in (0, 1):
        mine = [d for d in docs if d["gpu"]["index"] == gpu]
        assert [d["state"] for d in mine] == ["firing", "resolved"]


def test_rate_limit_holds_per_alert(tmp_path):
    """x1: training with eval pauses: the power draw crosses 57 % of the limit three times."""
    config = "[alerts.power]\nenabled = true\nabove = 57.0\nclear_below = 40.0\nfor_seconds = 0.0\n"
    cfg, out, cmd = setup(tmp_path, config)
    base = [
        "watch",
        "--config",
        str(cfg),
        "--replay",
        str(H200_X1),
        "--interval",
        "0.001",
        "--alert-cmd",
        cmd,
    ]
    r = gputui(*base)
    assert r.returncode == 0, r.stderr
    printed = [json.loads(line) for line in r.stdout.splitlines()]
    assert [d["state"] for d in printed] == ["firing", "resolved"] * 3
    # one command for the first episode (and its clear); the next two fired within 15 minutes
    assert [d["state"] for d in received(out)] == ["firing", "resolved"]
    for f in out.iterdir():
        f.unlink()
    r = gputui(*base, "--rate-limit", "0")
    assert [d["state"] for d in received(out)] == ["firing", "resolved"] * 3
    for f in out.iterdir():
        f.unlink()
    r = gputui(*base, "--no-resolved")
    assert [d["state"] for d in received(out)] == ["firing"]


def test_no_shell_unless_asked(tmp_path):
    cfg, _, _ = setup(tmp_path, TEMPERATURE)
    pwned = tmp_path / "pwned"
    cmd = f"true; touch {pwned}"
    base = ["watch", "--config", str(cfg), "--replay", str(H200_X2), "--interval", "0.001", "--quiet"]
    r = gputui(*base, "--alert-cmd", cmd)
    assert r.returncode == 0
    assert not pwned.exists()  # argv was ["true;", "touch", ...]: no such program, no shell
    assert "cannot run the alert command 'true;'" in r.stderr
    r = gputui(*base, "--alert-cmd", cmd, "--shell")
    assert r.returncode == 0, r.stderr
    assert pwned.exists()
    assert command_argv("mail -s 'GPU alert' ops@example.com") == [
        "mail",
        "-s",
        "GPU alert",
        "ops@example.com",
    ]


def test_a_slow_command_never_holds_up_sampling(tmp_path):
    cfg, _, _ = setup(tmp_path, TEMPERATURE)
    t0 = time.monotonic()
    r = gputui(
        "watch", "--config", str(cfg), "--replay", str(H200_X2), "--interval", "0.001",
        "--alert-cmd", "sleep 60", "--timeout", "1",
        timeout=120,
    )  # fmt: skip
    took = time.monotonic() - t0
    assert r.returncode == 0, r.stderr
    assert len(r.stdout.splitlines()) == 4  # every tick was evaluated while the commands slept
    assert r.stderr.count("still running after 1 s: killed") == 4
    assert took < 30  # 4 commands of 60 s each were not waited for


def _event(key: str, state: str, since: float, ts: float) -> AlertEvent:
    a = Alert(key, "temperature", 0, 90.0, 85.0, "°C", "GPU 0: hot", since, ts)
    return AlertEvent(state, a, ts)


def test_submit_only_queues_and_suppressed_firings_are_counted(tmp_path):
    out = tmp_path / "o"
    out.mkdir()
    script = tmp_path / "r.py"
    script.write_text(RECORDER)
    now = [1000.0]
    runner = AlertCommand(
        [sys.executable, str(script), str(out)], rate_limit=600, timeout=10, clock=lambda: now[0]
    )
    runner.submit([_event("temperature:gpu0", "firing", 1, 1)])
    runner.submit([_event("temperature:gpu0", "resolved", 1, 2)])
    for k in range(3):  # three more episodes within 10 minutes: held back
        now[0] += 60
        runner.submit(
            [
                _event("temperature:gpu0", "firing", 10 + k, 10 + k),
                _event("temperature:gpu0", "resolved", 10 + k, 11 + k),
            ]
        )
    now[0] += 600
    runner.submit([_event("temperature:gpu0", "firing", 50, 50)])
    assert runner.wait_idle(30)
    runner.close()
    docs = received(out)
    assert [(d["state"], d["suppressed"]) for d in docs] == [("firing", 0), ("resolved", 0), ("firing", 3)]
    assert runner.stats.suppressed == 3


def test_submit_does_not_block_on_running_commands():
    runner = AlertCommand(["sleep", "60"], rate_limit=0, timeout=0.5)
    t0 = time.monotonic()
    for k in range(20):
        runner.submit([_event(f"temperature:gpu{k}", "firing", k, k)])
    assert time.monotonic() - t0 < 2.0  # 20 x 60 s of commands: submit only queued them
    assert runner.wait_idle(60)
    runner.close()
    assert runner.stats.timed_out == 20
    for worker in runner._workers:  # close() ends the worker threads
        worker.join(10)
        assert not worker.is_alive()
