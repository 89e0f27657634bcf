"""Parsers for nvidia-smi's text output, to check what gputui shows against what nvidia-smi
printed on the same machine (the tests, and `bench/device_report.py topo-check` on a GPU machine).

Formats as printed by driver 580 (`tests/fixtures/h200-x2/nvidia-smi-*.txt`); each parser
reads what it recognises and skips the rest.
"""

from __future__ import annotations

import re

_ESC = re.compile(r"\x1b\[[0-9;]*m")
_GPU = re.compile(r"GPU\d+")


def _lines(text: str) -> list[str]:
    return [_ESC.sub("", line) for line in text.splitlines()]


def parse_topo_m(text: str) -> tuple[list[str], dict[str, dict[str, str]], list[tuple[str, str]]]:
    """`nvidia-smi topo -m` -> (GPU names, {row GPU: {column title: cell}}, legend [(code, text)]).

    Columns are tab-separated; an empty cell (between NUMA Affinity and GPU NUMA ID) is
    dropped, so the cells line up with the non-empty titles."""
    lines = _lines(text)
    if not lines:
        return [], {}, []
    header = [c.strip() for c in lines[0].split("\t") if c.strip()]
    gpus = [c for c in header if _GPU.fullmatch(c)]
    rows: dict[str, dict[str, str]] = {}
    legend: list[tuple[str, str]] = []
    for line in lines[1:]:
        cells = [c.strip() for c in line.split("\t")]
        if cells and _GPU.fullmatch(cells[0]):
            values = [c for c in cells[1:] if c]
            rows[cells[0]] = dict(zip(header, values, strict=False))
        m = re.match(r"\s+(\S+)\s+= (.*)", line)
        if m:
            legend.append((m.group(1), m.group(2)))
    return gpus, rows, legend


def parse_topo_p2p(text: str) -> dict[str, dict[str, str]]:
    """`nvidia-smi topo -p2p rw` -> {row GPU: {column GPU: code}}."""
    lines = _lines(text)
    if not lines:
        return {}
    header = [c.strip() for c in lines[0].split("\t") if c.strip()]
    rows = {}
    for line in lines[1:]:
        cells = [c.strip() for c in line.split("\t") if c.strip()]
        if cells and _GPU.fullmatch(cells[0]):
            rows[cells[0]] = dict(zip(header, cells[1:], strict=False))
    return rows


def parse_nvlink_status(text: str) -> dict[int, list[tuple[int, str]]]:
    """`nvidia-smi nvlink -s` -> {GPU: [(link, "26.562 GB/s" or "<inactive>")]}."""
    out: dict[int, list[tuple[int, str]]] = {}
    gpu = -1
    for line in _lines(text):
        m = re.match(r"GPU (\d+):", line)
        if m:
            gpu = int(m.group(1))
            out[gpu] = []
            continue
        m = re.match(r"\s+Link (\d+): (.*)", line)
        if m and gpu >= 0:
            out[gpu].append((int(m.group(1)), m.group(2).strip()))
    return out


def parse_nvlink_throughput(text: str) -> dict[int, dict[tuple[int, str], int]]:
    """`nvidia-smi nvlink -gt d` -> {GPU: {(link, "tx" | "rx"): KiB}}."""
    out: dict[int, dict[tuple[int, str], int]] = {}
    gpu = -1
    for line in _lines(text):
        m = re.match(r"GPU (\d+):", line)
        if m:
            gpu = int(m.group(1))
            out[gpu] = {}
            continue
        m = re.search(r"Link (\d+): Data (Tx|Rx): (\d+) KiB", line, re.I)
        if m and gpu >= 0:
            out[gpu][(int(m.group(1)), m.group(2).lower())] = int(m.group(3))
    return out


def parse_query(text: str) -> list[dict[str, str]]:
    """`nvidia-smi -q` (any -d section) -> per GPU, {"Section/Sub/Key": value}."""
    gpus: list[dict[str, str]] = []
    stack: list[tuple[int, str]] = []
    for line in _lines(text):
        if re.match(r"GPU [0-9A-Fa-f]{4,8}:", line):
            gpus.append({})
            stack = []
            continue
        if not gpus or not line.strip():
            continue
        indent = len(line) - len(line.lstrip())
        key, sep, value = line.strip().partition(":")
        key = key.strip()
        while stack and stack[-1][0] >= indent:
            stack.pop()
        path = "/".join([s for _, s in stack] + [key])
        if sep and value.strip():
            gpus[-1][path] = value.strip()
        elif not sep or not value.strip():
            stack.append((indent, key))
    return gpus
