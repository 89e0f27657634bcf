"""One job's nodes merged across exporters, worst first (issue 32, item 4): what identity is
safe to merge on, and the caps on what is held.

HAND-WRITTEN EXPORTER TEXT: the expositions here are written by the test in the shape the
exporters publish (INTERFACES.md: `gputui_job_stuck`, `gputui_job_verdict_info`, and the RAS
series `gputui_nccl_rank_problem`, `gputui_nccl_comm_ranks`, `gputui_nccl_comm_missing_ranks`,
`gputui_nccl_rank_problems_dropped` that the ras helper adds): no GPU and no real exporter is
claimed.  The verdicts of real exporters over a real recording are tests/test_cluster_fleet.py's.
"""

from __future__ import annotations

from collections.abc import Sequence

from gputui.cluster import expfmt
from gputui.cluster.jobs import (
    MAX_JOBS_PER_HOST,
    MAX_PROBLEMS_PER_HOST,
    RANKED,
    RAS_ONLY,
    SLOW,
    STUCK_ALL,
    FleetJob,
    HostJobs,
    host_jobs,
    merge,
)
from gputui.cluster.model import LabelMap, build_gpus, split_jobs


def _labels(**kw: str) -> str:
    return "{" + ",".join(f'{k}="{v}"' for k, v in kw.items()) + "}"


def verdict(
    host: str,
    job: str,
    kind: str,
    *,
    stuck: bool = True,
    rank: str = "",
    pid: str = "",
    gpu: str = "",
    slurm_job: str = "",
    pod: str = "",
    namespace: str = "",
    comm: str = "",
    summary: str = "",
    extra: dict[str, str] | None = None,
) -> str:
    """HAND-WRITTEN: one job's two series as `gputui export` writes them."""
    base = {
        "job": job,
        "launcher": job.split(":")[1] if job.startswith("launcher:") else "",
        "Hostname": host,
    }
    base.update(extra or {})
    info = {
        **base,
        "verdict": kind,
        "rank": rank,
        "pid": pid,
        "gpu": gpu,
        "slurm_job": slurm_job,
        "pod": pod,
        "namespace": namespace,
        "comm": comm,
        "summary": summary or f"{kind} ({host})",
    }
    out = f"gputui_job_stuck{_labels(**base, verdict=kind)} {1 if stuck else 0}\n"
    if kind:
        out += f"gputui_job_verdict_info{_labels(**info)} 1\n"
    return out


def ras_problem(host: str, job: str, comm: str, rank: str, where: str, pid: str, problem: str) -> str:
    """HAND-WRITTEN: one RAS finding as the ras helper's exporter series."""
    labels = _labels(
        comm=comm,
        rank=rank,
        host=where,
        pid=pid,
        problem=problem,
        collective="AllReduce",
        Hostname=host,
        job=job,
    )
    return f"gputui_nccl_rank_problem{labels} 1\n"


def ras_comm(host: str, job: str, comm: str, ranks: int, missing: int = 0) -> str:
    labels = _labels(comm=comm, Hostname=host, job=job)
    return f"gputui_nccl_comm_ranks{labels} {ranks}\ngputui_nccl_comm_missing_ranks{labels} {missing}\n"


def host_of(name: str, text: str) -> tuple[str, HostJobs]:
    samples = expfmt.parse(text).samples
    _, jobs = split_jobs((s.name, s.labels, s.value) for s in samples)
    return name, host_jobs(f"{name}:9400", name, jobs)


def fleet(hosts: dict[str, str]) -> tuple[FleetJob, ...]:
    merged, left_out = merge(host_of(name, text) for name, text in hosts.items())
    assert left_out == 0
    return merged


REAL_4242 = {"slurm_job": "4242"}


def test_one_job_on_two_nodes_is_one_line_naming_the_rank_host_and_pid():
    (job,) = fleet(
        {
            "node-a": verdict(
                "node-a", "launcher:943", "culprit", rank="1", pid="1129", gpu="1", **REAL_4242
            ),
            "node-b": verdict("node-b", "launcher:943", "stuck", **REAL_4242),
        }
    )
    assert job.title == "slurm 4242" and job.severity == RANKED and job.stuck
    assert [n.host_name for n in job.nodes] == ["node-a", "node-b"]  # the culprit's node first
    assert job.look_at() == ("1", "node-a", "1129", "1")


def test_a_claimed_slurm_id_never_merges_with_roots_job_of_that_id():
    """A user's own SLURM_JOB_ID=4242 (job key "slurm:4242:0:environment") on node-c, even from
    an exporter that (wrongly, or hostile) labels it slurm_job="4242": never root's 4242."""
    jobs = fleet(
        {
            "node-a": verdict(
                "node-a", "launcher:943", "culprit", rank="1", pid="1129", gpu="1", **REAL_4242
            ),
            "node-b": verdict("node-b", "launcher:943", "stuck", **REAL_4242),
            "node-c": verdict("node-c", "slurm:4242:0:environment", "culprit", pid="666", **REAL_4242),
            "node-d": verdict("node-d", "slurm:4242:0:unverified", "stuck", **REAL_4242),
        }
    )
    titles = sorted(j.title for j in jobs)
    assert titles == ["slurm 4242", "slurm 4242.0 (env) on node-c", "slurm 4242.0 (unverified) on node-d"]
    real = next(j for j in jobs if j.title == "slurm 4242")
    assert {n.host_name for n in real.nodes} == {"node-a", "node-b"}


def test_two_claims_of_one_id_are_not_merged_by_it_either():
    jobs = fleet(
        {
            "node-c": verdict("node-c", "slurm:555:0:environment", "culprit", pid="10"),
            "node-d": verdict("node-d", "slurm:555:0:environment", "stuck"),
        }
    )
    assert len(jobs) == 2


def test_slurm_ids_are_per_cluster():
    """Two Slurm clusters behind one Prometheus (its `cluster` target label): job 4242 of
    each is its own job."""
    jobs = fleet(
        {
            "a1": verdict("a1", "launcher:1", "culprit", pid="5", extra={"cluster": "alpha"}, **REAL_4242),
            "a2": verdict("a2", "launcher:1", "stuck", extra={"cluster": "alpha"}, **REAL_4242),
            "b1": verdict("b1", "launcher:1", "stuck", extra={"cluster": "beta"}, **REAL_4242),
        }
    )
    assert sorted((j.title, len(j.nodes)) for j in jobs) == [
        ("slurm 4242 (alpha)", 2),
        ("slurm 4242 (beta)", 1),
    ]


def test_a_pod_merges_by_namespace_and_name():
    jobs = fleet(
        {
            "n1": verdict("n1", "launcher:7", "culprit", pid="9", pod="train-0", namespace="ml"),
            "n1-dcgm": verdict("n1-dcgm", "launcher:7", "stuck", pod="train-0", namespace="ml"),
            "n2": verdict("n2", "launcher:7", "stuck", pod="train-0", namespace="other"),
        }
    )
    assert sorted((j.title, len(j.nodes)) for j in jobs) == [("pod ml/train-0", 2), ("pod other/train-0", 1)]


def test_jobs_without_an_identity_merge_by_their_nccl_communicator():
    """torchrun over two hosts outside Slurm: each host calls it "launcher:PID"; NCCL's RAS
    names the one communicator both hosts' ranks are in."""
    comm = "0xa466b1c2d3e4f506"
    (job,) = fleet(
        {
            "h1": verdict("h1", "launcher:100", "culprit", rank="1", pid="201", gpu="1")
            + ras_comm("h1", "launcher:100", comm, 4),
            "h2": verdict("h2", "launcher:300", "stuck") + ras_comm("h2", "launcher:300", comm, 4),
        }
    )
    assert len(job.nodes) == 2 and job.look_at() == ("1", "h1", "201", "1")
    assert {c.comm for c in job.comms} == {comm} and all(c.ranks == 4 for c in job.comms)


def test_a_communicator_never_joins_a_job_to_a_verified_one():
    """RAS's hash comes from the ranks' own RAS service (a user can answer in its place): a
    launcher job or a claimed one naming root's job's communicator stays apart, and so do two
    verified jobs that name one."""
    comm = "0x1111222233334444"
    jobs = fleet(
        {
            "node-a": verdict("node-a", "launcher:943", "culprit", pid="1129", comm=comm, **REAL_4242),
            "node-b": verdict("node-b", "launcher:943", "stuck", comm=comm, **REAL_4242),
            "node-u": verdict("node-u", "launcher:77", "culprit", pid="78", comm=comm),
            "node-e": verdict("node-e", "slurm:99:0:environment", "stuck", comm=comm),
            "node-x": verdict("node-x", "launcher:5", "stuck", comm=comm, slurm_job="5150"),
        }
    )
    by_title = {j.title: {n.host_name for n in j.nodes} for j in jobs}
    assert by_title["slurm 4242"] == {"node-a", "node-b"}
    assert by_title["slurm 5150"] == {"node-x"}
    # the two without a verified identity may join each other by the communicator
    assert by_title["launcher 77 on node-u"] == {"node-u", "node-e"}


def test_worst_first_and_healthy_jobs_are_not_listed():
    jobs = fleet(
        {
            "s": verdict("s", "launcher:1", "straggler", stuck=False, rank="3", pid="33"),
            "w": verdict("w", "launcher:2", "stuck"),
            "c": verdict("c", "launcher:3", "culprit", rank="0", pid="40"),
            "h": verdict("h", "launcher:4", "", stuck=False),  # healthy: gputui_job_stuck 0, no verdict
            "r": ras_problem("r", "launcher:5", "0xfeed", "5", "gpu-07", "4411", "missing")
            + verdict("r", "launcher:5", "", stuck=False),
        }
    )
    assert [(j.title, j.severity) for j in jobs] == [
        ("launcher 3 on c", RANKED),
        ("launcher 2 on w", STUCK_ALL),
        ("launcher 5 on r", RAS_ONLY),
        ("launcher 1 on s", SLOW),
    ]
    ras = jobs[2]
    assert ras.look_at() == ("5", "gpu-07", "4411", "")  # the rank on another node, as RAS says
    assert ras.problems[0].problem == "missing"


def test_a_node_whose_part_has_no_verdict_is_not_listed_in_the_job():
    """Node b's ranks of the job are fine (gputui_job_stuck 0, no verdict_info): it publishes
    no identity for them, so nothing joins them to the job, and nothing invents a verdict."""
    (job,) = fleet(
        {
            "a": verdict("a", "launcher:1", "culprit", pid="2", **REAL_4242),
            "b": verdict("b", "launcher:1", "", stuck=False),
        }
    )
    assert [n.host_name for n in job.nodes] == ["a"]


def test_what_is_not_a_number_is_never_shown_as_one():
    (job,) = fleet({"n": verdict("n", "launcher:1", "culprit", rank="1; kill -9", pid="12x", gpu="-1")})
    assert job.look_at() is None and (job.worst.rank, job.worst.pid, job.worst.gpu) == ("", "", "")


def test_an_exporter_with_too_many_jobs_is_cut_and_counted():
    text = "".join(verdict("n", f"launcher:{k}", "stuck") for k in range(MAX_JOBS_PER_HOST + 44))
    text += "".join(
        ras_problem("n", "launcher:1", "0xab", str(k), "n", str(k), "missing")
        for k in range(MAX_PROBLEMS_PER_HOST + 6)
    )
    text += "gputui_nccl_rank_problems_dropped 3\n"
    _, hj = host_of("n", text)
    assert len(hj.jobs) == MAX_JOBS_PER_HOST and len(hj.problems) == MAX_PROBLEMS_PER_HOST
    assert hj.dropped == 44 + 6 + 3


def test_prometheus_renamed_job_label_is_read():
    """Prometheus keeps its own `job` (the scrape job) and renames the exporter's to
    `exported_job` (honor_labels off)."""
    text = verdict("n", "launcher:943", "culprit", pid="1129").replace(
        '{job="launcher:943"', '{job="gpu",exported_job="launcher:943"'
    )
    (job,) = fleet({"n": text})
    assert job.worst.job == "launcher:943" and job.title == "launcher 943 on n"


def test_a_verdict_series_never_makes_a_gpu():
    """verdict_info carries the named rank's `gpu`: it must not add a GPU to the host."""
    text = verdict("n", "launcher:1", "culprit", rank="1", pid="2", gpu="7")
    text += 'DCGM_FI_DEV_GPU_UTIL{gpu="0",UUID="GPU-a",Hostname="n"} 5\n'
    samples = expfmt.parse(text).samples
    gpus = build_gpus("n", ((s.name, s.labels, s.value) for s in samples), LabelMap())
    assert [g.device.index for g in gpus] == [0]


def _hosts(n: int, per: int) -> Sequence[tuple[str, HostJobs]]:
    return [
        host_of(f"h{k}", "".join(verdict(f"h{k}", f"launcher:{j}", "stuck") for j in range(per)))
        for k in range(n)
    ]


def test_the_fleet_cap_counts_what_it_leaves_out():
    from gputui.cluster import jobs as jobs_module

    hosts = _hosts(4, 10)
    old = jobs_module.MAX_FLEET_JOBS
    jobs_module.MAX_FLEET_JOBS = 25
    try:
        merged, left_out = merge(hosts)
    finally:
        jobs_module.MAX_FLEET_JOBS = old
    assert len(merged) == 25 and left_out == 15


def test_what_the_caps_left_out_is_said_on_the_status_line():
    from gputui.cluster.model import ClusterState
    from gputui.ui.cluster.lines import status_line

    state = ClusterState(source="2 exporters (direct)", jobs_left_out=1234)
    text = "".join(t for t, _ in status_line(state, 160, "host", "all", None, 5.0))
    assert "1,234 job series over the caps left out" in text, text


def test_without_the_stuck_gauge_the_verdicts_kind_decides():
    """An exporter that sends verdict_info alone: stuck verdicts (alerts.STUCK_VERDICTS) are
    stuck, a straggler is slow; with the gauge, the exporter's word wins."""
    only_info = verdict("n", "launcher:1", "exited", rank="1", pid="7").split("\n", 1)[1]
    slow_info = verdict("m", "launcher:2", "straggler", rank="2", pid="8").split("\n", 1)[1]
    jobs = fleet({"n": only_info, "m": slow_info})
    assert [(j.title, j.severity) for j in jobs] == [("launcher 1 on n", RANKED), ("launcher 2 on m", SLOW)]
    said_not = verdict("k", "launcher:3", "culprit", stuck=False, pid="9")
    (job,) = fleet({"k": said_not})
    assert job.severity == SLOW and not job.stuck
