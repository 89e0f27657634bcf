"""What `gputui export` writes into label values (issue 24, item 3 and the device label).

One rule for every label value: the untrusted-text filter (gputui/untrusted.py `escaped`),
then the Prometheus text format's own escaping (backslash, quote, newline).  Tested through a
real `gputui export --replay` of a real recording whose job, process and host fields were
replaced by hostile text, scraped over HTTP as bytes."""

from __future__ import annotations

import gzip
import json
import re
import urllib.request
from pathlib import Path

import pytest
from cluster_support import exporters
from conftest import FIXTURES, H200_X2_V2
from prometheus_client.parser import text_string_to_metric_families

from gputui.untrusted import escaped

JOB_REC = FIXTURES / "h100-x1-job" / "recording.jsonl.gz"

OSC52 = "\x1b]52;c;cHduZWQ=\x07"
"""An OSC 52 clipboard write: a terminal that shows it puts "pwned" on the clipboard."""
CSI_C1 = "\x9b2J"
"""A C1 CSI (one code point): clears the screen on terminals that take 8-bit controls."""

HOSTILE = {
    "slurm": {"kind": "slurm", "id": "555" + OSC52, "step": "0", "array": "48200_3" + CSI_C1 + "\x7f"},
    "pod": {
        "kind": "pod",
        "id": "0f0e0d0c-aaaa-bbbb-cccc-000000000001",
        "name": "train\x1b[2J" + CSI_C1,
        "namespace": "ns\u202e\x1b]0;title\x07",
        "container": 'c"\\\n' + OSC52,
    },
    "docker": {"kind": "docker", "id": "3f2a" + "\x1b[31m" * 3, "name": None},
}


def read_lines(path: Path) -> list[str]:
    with gzip.open(path, "rt") as f:
        return f.read().splitlines()


def hostile_recording(tmp_path: Path) -> tuple[Path, dict[int, dict[str, object]]]:
    """The real job recording with each process's job (and name, user, host) made hostile."""
    lines = read_lines(JOB_REC)
    header = json.loads(lines[0])
    header["machine"]["system"]["hostname"] = "node\x1b]2;PWNED\x07"
    header["machine"]["devices"][0]["name"] = "H100" + CSI_C1
    jobs: dict[int, dict[str, object]] = {}
    out = [json.dumps(header)]
    kinds = list(HOSTILE.values())
    for line in lines[1:]:
        tick = json.loads(line)
        for k, p in enumerate(tick.get("processes", [])):
            job = {key: v for key, v in kinds[k % len(kinds)].items() if v is not None}
            p["job"] = job
            p["name"] = "py\x1b[8m" + CSI_C1
            p["user"] = "u\x07"
            jobs[p["pid"]] = job
        out.append(json.dumps(tick))
    path = tmp_path / "hostile.jsonl.gz"
    with gzip.open(path, "wt") as f:
        f.write("\n".join(out) + "\n")
    return path, jobs


def scrape(target: str) -> bytes:
    with urllib.request.urlopen(f"http://{target}/metrics", timeout=10) as resp:
        return bytes(resp.read())


RAW_CONTROL = re.compile("[\x00-\x09\x0b-\x1f\x7f-\x9f\u202e]")


def test_hostile_job_fields_reach_metrics_escaped(tmp_path):
    path, jobs = hostile_recording(tmp_path)
    with exporters((path,)) as (exp,):
        body = scrape(exp.target)
    text = body.decode("utf-8")
    raw = RAW_CONTROL.findall(text)
    assert raw == [], f"{len(raw)} raw controls reach /metrics: {sorted(set(raw))!r}"
    seen = 0
    for fam in text_string_to_metric_families(text):
        for s in fam.samples:
            for value in s.labels.values():
                assert escaped(value) == value, (s.name, value)  # nothing a terminal would obey
            pid = s.labels.get("pid")
            if not pid or int(pid) not in jobs:
                continue
            seen += 1
            job = jobs[int(pid)]
            kind = job["kind"]
            assert s.labels["process_name"] == escaped("py\x1b[8m" + CSI_C1)
            assert s.labels["user"] == escaped("u\x07")
            assert s.labels["Hostname"] == escaped("node\x1b]2;PWNED\x07")
            if kind == "slurm":  # the array task, as Slurm writes it, escaped
                assert s.labels["slurm_job"] == escaped(str(job["array"]))
                assert "\\x9b" in s.labels["slurm_job"]
            if kind == "pod":
                assert s.labels["pod"] == escaped(str(job["name"]))
                assert s.labels["namespace"] == escaped(str(job["namespace"]))
                assert s.labels["container"] == escaped(str(job["container"]))  # quote, backslash, newline
            if kind == "docker":
                assert s.labels["container"] == escaped(str(job["id"])[:12])
    assert seen >= len(jobs)
    assert 'modelName="H100\\\\x9b2J"' in text  # the text format's own backslash escaping on top


def _with_minor_numbers(tmp_path: Path, minors: list[int | None]) -> Path:
    """The real 2x H200 recording as on a node whose GPUs are /dev/nvidia{minors} (a GPU
    taken out of service, or PCI order unlike the minor numbers): everything else recorded."""
    lines = read_lines(H200_X2_V2)
    header = json.loads(lines[0])
    for d, minor in zip(header["machine"]["devices"], minors, strict=True):
        d["minor_number"] = minor
    path = tmp_path / "minors.jsonl.gz"
    with gzip.open(path, "wt") as f:
        f.write("\n".join([json.dumps(header), *lines[1:]]) + "\n")
    return path


@pytest.mark.parametrize(
    ("minors", "devices"), [([3, 1], ["nvidia3", "nvidia1"]), ([None, 0], ["", "nvidia0"])]
)
def test_device_label_is_the_minor_number_not_the_index(tmp_path, minors, devices):
    """dcgm-exporter's `device` is the /dev/nvidiaN file: the minor number, which need not be
    the index; unknown (None) is an empty label, never the index passed off as one."""
    path = _with_minor_numbers(tmp_path, minors)
    with exporters((path,)) as (exp,):
        text = scrape(exp.target).decode()
    got = {}
    for fam in text_string_to_metric_families(text):
        for s in fam.samples:
            if s.name == "DCGM_FI_DEV_GPU_TEMP":
                got[int(s.labels["gpu"])] = s.labels["device"]
    assert got == dict(enumerate(devices))
