"""Check gputui's topology, NVLink throughput and memory-health readings against nvidia-smi
of the same run (the output directory of bench/device_topo.sh).

    python bench/topo_check.py OUTDIR

Prints one line per check, "OK" or "MISMATCH", with the numbers, and exits 1 on a mismatch.
Needs only gputui's telemetry package (no Textual).
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from gputui.telemetry.recording import read_recording
from gputui.telemetry.smi_text import (
    parse_nvlink_status,
    parse_nvlink_throughput,
    parse_query,
    parse_topo_m,
)
from gputui.telemetry.topology import affinity, link_matrix

TOLERANCE = 0.15
"""NVLink bytes from gputui's rates vs nvidia-smi's counters: the windows differ by up to one
slow-cadence pass at each end."""

FAILURES: list[str] = []


def report(ok: bool, what: str) -> None:
    if not ok:
        FAILURES.append(what)
    print(f"{'OK      ' if ok else 'MISMATCH'} {what}")


def main(out: Path) -> int:
    header, ticks = read_recording(out / "recording.jsonl.gz")
    info = header.machine
    n = len(info.devices)

    # 1. the matrix, affinity and NUMA columns against nvidia-smi topo -m
    gpus, rows, _ = parse_topo_m((out / "nvidia-smi-topo.txt").read_text())
    matrix = link_matrix(info)
    for i, name in enumerate(gpus):
        got = matrix[i]
        want = [rows[name][g] for g in gpus]
        report(got == want, f"topo -m row {name}: gputui {got} nvidia-smi {want}")
        a = affinity(info.devices[i])
        for col, value in (
            ("CPU Affinity", a.cpus),
            ("NUMA Affinity", a.numa),
            ("GPU NUMA ID", a.gpu_numa_id),
        ):
            mine = "N/A" if value is None else str(value)
            report(
                mine == rows[name].get(col),
                f"topo -m {name} {col}: gputui {mine!r} nvidia-smi {rows[name].get(col)!r}",
            )

    # 2. NVLink state, and the remote type NVML reports now
    status = parse_nvlink_status((out / "nvidia-smi-nvlink.txt").read_text())
    topo = info.topology
    if topo is not None:
        for i, links in enumerate(topo.nvlinks):
            mine = [(lk.link, bool(lk.active)) for lk in links]
            theirs = [(k, "inactive" not in s) for k, s in status.get(i, [])]
            report(mine == theirs, f"GPU{i} NVLink states ({len(mine)} links) vs nvidia-smi nvlink -s")
            types = sorted({str(lk.remote_type) for lk in links})
            print(f"         GPU{i} NVLink remote types: {types}")

    # 3. NVLink throughput: bytes gputui's rates add up to vs nvidia-smi's counters
    before = parse_nvlink_throughput((out / "nvlink-gt-before.txt").read_text())
    after = parse_nvlink_throughput((out / "nvlink-gt-after.txt").read_text())
    t0 = float((out / "nvlink-gt-before.time").read_text())
    t1 = float((out / "nvlink-gt-after.time").read_text())
    if not before or not after:
        report(False, "could not parse nvidia-smi nvlink -gt d (see nvlink-gt-*.txt)")
    copy = json.loads((out / "p2p_copy.json").read_text()) if (out / "p2p_copy.json").exists() else None
    window = [s for s in ticks if t0 <= s.timestamp <= t1]
    interval = header.interval
    for i in range(n):
        for direction in ("tx", "rx"):
            smi_bytes = 1024 * sum(
                v - before.get(i, {}).get(k, 0) for k, v in after.get(i, {}).items() if k[1] == direction
            )
            rates = [getattr(s.gpus[i], f"nvlink_{direction}") for s in window]
            known = [r for r in rates if r is not None]
            mine = sum(known) * interval
            ok = bool(known) and abs(mine - smi_bytes) <= TOLERANCE * max(smi_bytes, 1e9)
            report(
                ok,
                f"GPU{i} NVLink {direction.upper()} over {t1 - t0:.1f} s: gputui {mine / 1e9:.2f} GB "
                f"({len(known)}/{len(rates)} ticks with a rate), "
                f"nvidia-smi counters {smi_bytes / 1e9:.2f} GB",
            )
            peak = max(known, default=None)
            peak_text = "N/A" if peak is None else f"{peak / 1e9:.1f} GB/s"
            print(f"         GPU{i} peak NVLink {direction.upper()} rate {peak_text}")
    if copy:
        print(
            f"         p2p_copy: {copy['bytes'] / 1e9:.1f} GB GPU{copy['src']} -> GPU{copy['dst']} in "
            f"{copy['seconds']:.1f} s = {copy['bytes_per_s'] / 1e9:.1f} GB/s "
            f"(peer access {copy['peer_access']})"
        )

    # 4. memory health and PCIe replays against nvidia-smi -q
    rr = parse_query((out / "nvidia-smi-q-row-remapper.txt").read_text())
    full = parse_query((out / "nvidia-smi-q.txt").read_text())
    last = ticks[-1]
    for i, g in enumerate(last.gpus):
        q = rr[i] if i < len(rr) else {}
        for key, mine in (
            ("Remapped Rows/Correctable Error", g.remapped_rows_corrected),
            ("Remapped Rows/Uncorrectable Error", g.remapped_rows_uncorrected),
            ("Remapped Rows/Pending", g.remapped_rows_pending),
            ("Remapped Rows/Remapping Failure Occurred", g.remapped_rows_failure),
        ):
            theirs = q.get(key)
            mine_text = (
                "N/A" if mine is None else ("Yes" if mine is True else "No" if mine is False else str(mine))
            )
            report(mine_text == theirs, f"GPU{i} {key}: gputui {mine_text!r} nvidia-smi {theirs!r}")
        replays = full[i].get("PCI/Replays Since Reset") if i < len(full) else None
        mine_replays = "N/A" if g.pcie_replay_counter is None else str(g.pcie_replay_counter)
        report(
            mine_replays == replays, f"GPU{i} PCIe replays: gputui {mine_replays!r} nvidia-smi {replays!r}"
        )
    print(f"{len(FAILURES)} mismatch(es)")
    return 1 if FAILURES else 0


if __name__ == "__main__":
    sys.exit(main(Path(sys.argv[1])))
