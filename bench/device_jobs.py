"""On a real GPU machine: a torchrun-style job shown as one tree and stopped as one, and a
GPU process in its own cgroup shown with its job.  About 1-2 minutes.

    python3 bench/device_jobs.py OUTDIR [--ranks 3] [--gpu 0]

Starts, on one GPU: a launcher (a script named `torchrun`, in its own session, as a shell
or a Slurm step would start it) whose RANKS rank processes each hold 2 GiB and run bf16
matmuls, each with a worker child (a data-loader stand-in); a bystander holding 1 GiB
(not in the job); and a 1 GiB holder moved into a cgroup created as Slurm's cgroup plugin
lays it out (`slurm_gputui/uid_0/job_48213/step_0`).  Then:

1. `gputui record` for 8 s (real NVML; the recording carries the jobs and the launcher);
2. `gputui snapshot --processes --json`;
3. gputui's TUI on live NVML, driven by real key presses through Textual's pilot: `2`, `v`
   (tree), cursor on the launcher's row, `T`: the one confirmation must list every PID of
   the job (launcher, ranks, workers) and nothing else; `y`: every one must exit, the
   bystander and the cgroup'd holder must keep running, nvidia-smi must agree.

Writes OUTDIR/result.json (every check and its evidence), OUTDIR/screen-*.txt,
OUTDIR/recording.jsonl.gz, OUTDIR/snapshot.json.  Exit status 0 when all checks pass.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import os
import signal
import subprocess
import sys
import tempfile
import textwrap
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

RANK = textwrap.dedent(
    """
    import os, subprocess, sys, time, torch
    dev = torch.device("cuda", int(os.environ.get("GPU", "0")))
    block = torch.empty(2 * 2**30 // 2, dtype=torch.bfloat16, device=dev)
    a = torch.randn(2048, 2048, dtype=torch.bfloat16, device=dev)
    subprocess.Popen([sys.executable, "-c", "import time; time.sleep(600)", "dataloader-worker"])
    print("rank ready", flush=True)
    end = time.monotonic() + 600
    while time.monotonic() < end:
        for _ in range(20):
            a = (a @ a).clamp_(-1, 1)
        torch.cuda.synchronize(dev)
        time.sleep(0.05)
    """
)
LAUNCHER = textwrap.dedent(
    """
    import pathlib, subprocess, sys, time
    n = int(sys.argv[sys.argv.index("--nproc-per-node") + 1])
    train = str(pathlib.Path(__file__).with_name("train.py"))
    ranks = [subprocess.Popen([sys.executable, train, "--lr", "3e-4", "--rank", str(i)]) for i in range(n)]
    print(" ".join(str(r.pid) for r in ranks), flush=True)
    for r in ranks:
        r.wait()
    """
)


def smi_pids() -> set[int]:
    out = subprocess.run(
        ["nvidia-smi", "--query-compute-apps=pid", "--format=csv,noheader"],
        capture_output=True,
        text=True,
        check=False,
    ).stdout
    return {int(x) for x in out.split() if x.strip().isdigit()}


def own_cgroup_dir() -> Path | None:
    """This process's cgroup directory, where new child cgroups can be made (root)."""
    lines = Path("/proc/self/cgroup").read_text().splitlines()
    for line in lines:
        hid, controllers, path = line.split(":", 2)
        if hid == "0" and controllers == "":
            d = Path("/sys/fs/cgroup") / path.lstrip("/")
            if (d / "cgroup.procs").exists():
                return d
    for line in lines:
        _, controllers, path = line.split(":", 2)
        if "memory" in controllers.split(","):
            d = Path("/sys/fs/cgroup/memory") / path.lstrip("/")
            if (d / "cgroup.procs").exists():
                return d
    return None


async def drive_tui(out: Path, checks: dict[str, object], launcher_pid: int, job_pids: set[int]) -> None:
    from gputui.telemetry.nvml.source import NvmlSource
    from gputui.ui.app import GpuTuiApp
    from gputui.ui.processes.screens import SignalDialog
    from gputui.ui.processes.widgets import ProcessTable

    def screen(app: GpuTuiApp) -> str:
        return "\n".join(strip.text.rstrip() for strip in app.screen._compositor.render_strips())

    async def until(pilot, cond, timeout: float) -> bool:
        end = time.monotonic() + timeout
        while time.monotonic() < end:
            if cond():
                return True
            await pilot.pause(0.1)
        return False

    app = GpuTuiApp(source=NvmlSource(), interval=1.0, watch_terminal=False)
    async with app.run_test(size=(160, 50)) as pilot:
        await pilot.pause(2.0)
        await pilot.press("2")
        table = app.query_one("#processes ProcessTable", ProcessTable)
        await until(pilot, lambda: any(r.proc.launcher == launcher_pid for r in table.rows), 20)
        await pilot.press("v")
        ok = await until(pilot, lambda: any(r.key == (-1, launcher_pid) for r in table.rows), 10)
        text = screen(app)
        (out / "screen-1-tree.txt").write_text(text)
        checks["tree_has_the_launcher_row"] = ok
        rows = table.rows
        li = next((i for i, r in enumerate(rows) if r.key == (-1, launcher_pid)), -1)
        under = [r.key[1] for r in rows[li + 1 :] if r.prefix] if li >= 0 else []
        checks["ranks_under_the_launcher"] = sorted(set(under))
        checks["launcher_row_gpus_and_memory"] = (
            [list(rows[li].gpus), rows[li].proc.gpu_memory] if li >= 0 else None
        )
        await pilot.press("home")
        while table.cursor < li:
            await pilot.press("down")
        await pilot.press("T")
        await until(pilot, lambda: isinstance(app.screen, SignalDialog), 20)
        dialog = app.screen
        text = screen(app)
        (out / "screen-2-dialog.txt").write_text(text)
        listed = {t.identity.pid for t in dialog.targets} if isinstance(dialog, SignalDialog) else set()
        checks["dialog_lists"] = sorted(listed)
        checks["dialog_lists_exactly_the_job"] = listed == job_pids
        checks["dialog_shows_every_pid"] = all(str(p) in text for p in job_pids)
        checks["nothing_sent_before_yes"] = all(_alive(p) for p in job_pids)
        t0 = time.monotonic()
        await pilot.press("y")
        gone = await until(pilot, lambda: not any(_alive(p) for p in job_pids), 30)
        checks["all_job_processes_exited"] = gone
        checks["job_exit_seconds"] = round(time.monotonic() - t0, 2)
        await pilot.pause(3.0)
        text = screen(app)
        (out / "screen-3-after.txt").write_text(text)
        checks["tui_outcome_line"] = next(
            (ln.strip() for ln in text.splitlines() if "job torchrun" in ln), None
        )


def _alive(pid: int) -> bool:
    try:
        with open(f"/proc/{pid}/stat") as f:
            return f.read().rpartition(")")[2].split()[0] != "Z"
    except OSError:
        return False


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("out")
    ap.add_argument("--ranks", type=int, default=3)
    ap.add_argument("--gpu", type=int, default=0)
    a = ap.parse_args()
    out = Path(a.out)
    out.mkdir(parents=True, exist_ok=True)
    checks: dict[str, object] = {}
    tmp = Path(tempfile.mkdtemp(prefix="gputui-job-"))
    (tmp / "torchrun").write_text(LAUNCHER)
    (tmp / "train.py").write_text(RANK)
    env = dict(os.environ, GPU=str(a.gpu), PYTHONUNBUFFERED="1")
    hold = ROOT / "bench" / "load" / "hold_memory.py"
    started: list[subprocess.Popen[bytes]] = []
    cg_leaf = None
    try:
        launcher = subprocess.Popen(
            [sys.executable, str(tmp / "torchrun"), "--nproc-per-node", str(a.ranks), "train.py"],
            stdout=subprocess.PIPE,
            env=env,
            start_new_session=True,
        )
        started.append(launcher)
        assert launcher.stdout is not None
        ranks = [int(x) for x in launcher.stdout.readline().split()]
        hold_args = ["--gib", "1", "--seconds", "600", "--device", str(a.gpu)]
        bystander = subprocess.Popen([sys.executable, str(hold), *hold_args], stdout=subprocess.DEVNULL)
        started.append(bystander)
        cgrouped = subprocess.Popen([sys.executable, str(hold), *hold_args], stdout=subprocess.DEVNULL)
        started.append(cgrouped)
        base = own_cgroup_dir()
        checks["own_cgroup"] = str(base)
        if base is not None:
            cg_leaf = base / "slurm_gputui" / "uid_0" / "job_48213" / "step_0"
            try:
                cg_leaf.mkdir(parents=True, exist_ok=True)
                (cg_leaf / "cgroup.procs").write_text(str(cgrouped.pid))
                checks["moved_into_cgroup"] = Path(f"/proc/{cgrouped.pid}/cgroup").read_text().strip()
            except OSError as exc:
                checks["moved_into_cgroup"] = f"failed: {exc}"
        want = {*ranks, bystander.pid, cgrouped.pid}
        deadline = time.monotonic() + 120
        while time.monotonic() < deadline and not want <= smi_pids():
            time.sleep(1)
        time.sleep(3)
        checks["all_on_gpu"] = want <= smi_pids()
        job_pids = {launcher.pid}
        for line in subprocess.run(
            ["ps", "-eo", "pid=,sid="], capture_output=True, text=True, check=False
        ).stdout.splitlines():
            pid, sid = (int(x) for x in line.split())
            if sid == launcher.pid:
                job_pids.add(pid)
        checks["job_pids"] = sorted(job_pids)
        checks["ranks"] = ranks

        rec = out / "recording.jsonl.gz"
        note = f"device_jobs.py: torchrun-like job of {a.ranks} ranks, a bystander, a holder in a Slurm-like cgroup"
        subprocess.run(
            [
                sys.executable,
                "-m",
                "gputui",
                "record",
                str(rec),
                "--duration",
                "8",
                "--note",
                note,
                "--force",
            ],
            check=False,
            cwd=ROOT,
        )
        snap = subprocess.run(
            [sys.executable, "-m", "gputui", "snapshot", "--processes", "--json"],
            capture_output=True,
            text=True,
            check=False,
            cwd=ROOT,
        )
        (out / "snapshot.json").write_text(snap.stdout + snap.stderr)
        try:
            procs = json.loads(snap.stdout)["processes"]
            by_pid = {p["pid"]: p for p in procs}
            checks["cgroup_holder_job"] = by_pid.get(cgrouped.pid, {}).get("job")
            checks["rank_launcher_pids"] = sorted(
                {by_pid.get(r, {}).get("launcher_pid") for r in ranks}, key=str
            )
            checks["rank_jobs"] = sorted({str(by_pid.get(r, {}).get("job")) for r in ranks})
        except (ValueError, KeyError) as exc:
            checks["snapshot_error"] = repr(exc)

        asyncio.run(drive_tui(out, checks, launcher.pid, job_pids))
        time.sleep(2)
        after = smi_pids()
        checks["nvidia_smi_after"] = sorted(after)
        checks["no_rank_on_gpu_after"] = not (set(ranks) & after)
        checks["bystander_untouched"] = bystander.poll() is None and bystander.pid in after
        checks["cgroup_holder_untouched"] = cgrouped.poll() is None and cgrouped.pid in after
    finally:
        for p in started:
            with contextlib.suppress(ProcessLookupError, PermissionError):
                if p is started[0]:
                    os.killpg(p.pid, signal.SIGKILL)
                else:
                    p.kill()
        for p in started:
            with contextlib.suppress(subprocess.TimeoutExpired):
                p.wait(timeout=10)
        if cg_leaf is not None:
            time.sleep(0.5)
            for d in (cg_leaf, *list(cg_leaf.parents)[:3]):
                with contextlib.suppress(OSError):
                    d.rmdir()
    must = [
        "tree_has_the_launcher_row",
        "dialog_lists_exactly_the_job",
        "dialog_shows_every_pid",
        "nothing_sent_before_yes",
        "all_job_processes_exited",
        "no_rank_on_gpu_after",
        "bystander_untouched",
        "cgroup_holder_untouched",
    ]
    failed = [k for k in must if checks.get(k) is not True]
    if checks.get("cgroup_holder_job") != "slurm 48213.0":
        failed.append("cgroup_holder_job")
    result = {"passed": not failed, "failed": failed, "checks": checks}
    (out / "result.json").write_text(json.dumps(result, indent=2, default=str) + "\n")
    print(json.dumps(result, indent=2, default=str))
    return 0 if not failed else 1


if __name__ == "__main__":
    sys.exit(main())
