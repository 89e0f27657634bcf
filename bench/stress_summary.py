"""Helper of device_stress.sh: the stress figures against the plain-torch references, and
monitor sampling on vs off."""

from __future__ import annotations

import json
import sys
from pathlib import Path

out = Path(sys.argv[1])
ref = {r["gpu"]: r for r in json.loads((out / "reference.json").read_text())}
runs = {}
for tag in ("on", "off"):
    try:
        runs[tag] = json.loads((out / f"stress-monitor-{tag}.json").read_text())
    except (OSError, ValueError) as exc:
        print(f"stress-monitor-{tag}.json unreadable: {exc}")
on = runs.get("on", {}).get("stress") or {}
off = runs.get("off", {}).get("stress") or {}
print(f"verdict (monitor on): {on.get('status')}   (monitor off): {off.get('status')}")
for g in on.get("gpus", []):
    i = g["index"]
    r = ref.get(i, {})
    bf16 = (g["matmul"].get("bf16") or {}).get("tflops")
    d2d = (g.get("memory") or {}).get("d2d")
    print(f"\nGPU {i} {g['name']}: {g['status']} {'; '.join(g['reasons'])}")
    if bf16 and r:
        print(
            f"  bf16 stress {bf16:.0f} TFLOP/s vs plain loop {r['bf16_tflops_1s']:.0f} (1 s) "
            f"/ {r['bf16_tflops_10']:.0f} (10 it): {100 * bf16 / r['bf16_tflops_10']:.1f} % of the 10-product loop (target >= 95 %; the stress "
            f"figure is a 10-product burst, its ~1 s sustained figure is in the report)"
        )
    if d2d and r:
        print(
            f"  D2D stress {d2d:.0f} GB/s vs plain 2 GiB copy_ {r['d2d_gbps']:.0f}: {100 * d2d / r['d2d_gbps']:.1f} %"
        )
    for p, m in g["matmul"].items():
        pct = f" ({m['percent']:.0f} % of datasheet)" if m.get("percent") is not None else ""
        print(
            f"  {p:5} {m.get('tflops')!s:>8} TFLOP/s{pct}{'  skipped: ' + m['skipped'] if m.get('skipped') else ''}"
        )
    print(f"  memory GB/s: {g.get('memory')}")
    burn = g.get("burn") or {}
    print(
        f"  burn: {burn.get('iterations')} it, {burn.get('mismatches')} miscompares, {burn.get('nonfinite')} NaN/Inf, "
        f"{burn.get('reference_mismatches')} off reference, {burn.get('tflops')} TFLOP/s mean"
    )
    print(f"  monitor: {g.get('monitor')}")
    g_off = next((x for x in off.get("gpus", []) if x["index"] == i), None)
    if g_off:
        print("  monitor on vs off:")
        for p, m in g["matmul"].items():
            t_on, t_off = m.get("tflops"), (g_off["matmul"].get(p) or {}).get("tflops")
            if t_on and t_off:
                print(
                    f"    {p:5} {t_on:8.1f} vs {t_off:8.1f} TFLOP/s ({100 * (t_on - t_off) / t_off:+.1f} %)"
                )
        b_on, b_off = burn.get("tflops"), (g_off.get("burn") or {}).get("tflops")
        if b_on and b_off:
            print(f"    burn  {b_on:8.1f} vs {b_off:8.1f} TFLOP/s ({100 * (b_on - b_off) / b_off:+.1f} %)")
for p in on.get("p2p", []):
    print(f"P2P {p['from']}->{p['to']}: {p.get('gbps')} GB/s")
print(
    f"\nGPU processes left after the runs: {(on.get('child') or {}).get('gpu_processes_left')}, "
    f"group leftovers {(on.get('child') or {}).get('leftover_pids')}"
)
