"""NvmlSource's slow-cadence additions for the topology tab and the detail view: NVLink
throughput counters, PCIe replays, row remapping, retired pages and MIG devices.

NVML itself is absent here, so these run on `ScriptedNvmlLib` (tests/test_nvml.py): a
stand-in for pynvml that raises pynvml's real errors and returns pynvml's real structures.
Values come from the real 2x H200 probe (tests/fixtures/h200-x2/nvml-links.json: NVLink
link count 18, TX counter of link 0 = 124263205 KiB, remapped rows (0, 0, 0, 0), retired
pages not supported); the MIG answers follow NVML's API (no MIG capture exists: MIG cannot
be enabled on the machines we record without a GPU reset).
"""

from __future__ import annotations

import json
from typing import Any

import pynvml
import pytest
from conftest import FIXTURES
from test_nvml import Fail, ScriptedNvmlLib

from gputui.telemetry.model import MigDevice
from gputui.telemetry.nvml.slow import SlowValues
from gputui.telemetry.nvml.source import Nvml, NvmlSource, counter_rate, field_int

PROBE = json.loads((FIXTURES / "h200-x2" / "nvml-links.json").read_text())
LINK0_TX_KIB = next(f["ull"] for f in PROBE["gpus"][0]["fields"] if f["field"].endswith("DATA_TX"))
LINK_COUNT = next(f["ull"] for f in PROBE["gpus"][0]["fields"] if f["field"].endswith("LINK_COUNT"))
ALL = 0xFFFFFFFF


class Counters:
    """Scripted NVLink counters: KiB per (field, scope), advanced by the test."""

    def __init__(self) -> None:
        self.time_us = 1_795_299_800_000_000
        self.kib: dict[tuple[int, int], int] = {}
        for link in range(LINK_COUNT):
            self.kib[(pynvml.NVML_FI_DEV_NVLINK_THROUGHPUT_DATA_TX, link)] = LINK0_TX_KIB
            self.kib[(pynvml.NVML_FI_DEV_NVLINK_THROUGHPUT_DATA_RX, link)] = LINK0_TX_KIB
        self._sum()

    def _sum(self) -> None:
        for fid in (
            pynvml.NVML_FI_DEV_NVLINK_THROUGHPUT_DATA_TX,
            pynvml.NVML_FI_DEV_NVLINK_THROUGHPUT_DATA_RX,
        ):
            self.kib[(fid, ALL)] = sum(v for (f, s), v in self.kib.items() if f == fid and s != ALL)

    def advance(self, seconds: float, kib_per_link: int, links: range) -> None:
        self.time_us += int(seconds * 1e6)
        for link in links:
            self.kib[(pynvml.NVML_FI_DEV_NVLINK_THROUGHPUT_DATA_TX, link)] += kib_per_link
            self.kib[(pynvml.NVML_FI_DEV_NVLINK_THROUGHPUT_DATA_RX, link)] += 2 * kib_per_link
        self._sum()

    def field_values(self, handle: Any, ids: list[Any]) -> Any:
        out = (pynvml.c_nvmlFieldValue_t * len(ids))()
        for k, wanted in enumerate(ids):
            fid, scope = wanted if isinstance(wanted, tuple) else (wanted, 0)
            out[k].fieldId, out[k].scopeId, out[k].timestamp = fid, scope, self.time_us
            if fid == pynvml.NVML_FI_DEV_NVLINK_LINK_COUNT:
                out[k].valueType, out[k].value.uiVal = pynvml.NVML_VALUE_TYPE_UNSIGNED_INT, LINK_COUNT
            elif (fid, scope) in self.kib:
                out[k].valueType = pynvml.NVML_VALUE_TYPE_UNSIGNED_LONG_LONG
                out[k].value.ullVal = self.kib[(fid, scope)]
            else:
                out[k].nvmlReturn = pynvml.NVML_ERROR_NOT_SUPPORTED
        return out


def make_source(lib: ScriptedNvmlLib, gpus: int = 1) -> NvmlSource:
    """An NvmlSource on the stand-in with its handles set, without the background threads."""
    source = NvmlSource(slow_interval=2.0, nvml=Nvml(lib=lib))
    source._handles = [f"handle-{i}" for i in range(gpus)]
    source._slow = {i: SlowValues() for i in range(gpus)}
    return source


def test_nvlink_throughput_from_the_counters() -> None:
    counters = Counters()
    lib = ScriptedNvmlLib(nvmlDeviceGetFieldValues=counters.field_values)
    source = make_source(lib)
    source.want_link_rates()  # the Topology tab (or a recording) shows each link
    first = source._slow_sample(0, "handle-0").fields
    # one reading of a cumulative counter is no rate yet: unknown, not 0
    assert first["nvlink_tx"] is None
    assert first["nvlink_link_tx"] == (None,) * LINK_COUNT
    counters.advance(2.0, kib_per_link=1_000_000, links=range(4))  # links 0-3 carry traffic
    fields = source._slow_sample(0, "handle-0").fields
    per_link = 1_000_000 * 1024 // 2  # KiB over 2 s, in bytes/s
    assert fields["nvlink_tx"] == 4 * per_link
    assert fields["nvlink_rx"] == 8 * per_link
    assert fields["nvlink_link_tx"] == (per_link,) * 4 + (0,) * (LINK_COUNT - 4)
    assert fields["nvlink_link_rx"][:5] == (2 * per_link,) * 4 + (0,)
    # the link count is read once; every later pass is one call for all counters
    assert lib.calls[("nvmlDeviceGetFieldValues", "handle-0")] == 3


def test_only_the_totals_are_read_until_a_link_is_shown() -> None:
    """NVML reads field values one by one (~170 µs each on an H100): the totals and 18 links
    each way cost 6.6 ms of CPU a GPU a pass, 0.33 % of a core a GPU (issue 33, live on 4x
    H100). Until something shows a link (the Topology tab, a recording), a pass asks for the
    two totals alone; then for every link as well, and the links' rates follow a pass later."""
    counters = Counters()
    asked: list[int] = []

    def field_values(handle: Any, ids: list[Any]) -> Any:
        asked.append(len(ids))
        return counters.field_values(handle, ids)

    source = make_source(ScriptedNvmlLib(nvmlDeviceGetFieldValues=field_values))
    source._slow_sample(0, "handle-0")
    counters.advance(2.0, kib_per_link=1_000_000, links=range(4))
    fields = source._slow_sample(0, "handle-0").fields
    assert asked == [1, 2, 2]  # the link count once, then the two totals a pass
    per_link = 1_000_000 * 1024 // 2
    assert fields["nvlink_tx"] == 4 * per_link  # the totals are exact without the links
    assert fields["nvlink_rx"] == 8 * per_link
    assert fields["nvlink_link_tx"] == ()  # not read: unknown, not 0
    assert fields["nvlink_link_rx"] == ()
    source.want_link_rates()
    counters.advance(2.0, kib_per_link=0, links=range(4))
    fields = source._slow_sample(0, "handle-0").fields
    assert asked[-1] == 2 + 2 * LINK_COUNT
    assert fields["nvlink_link_tx"] == (None,) * LINK_COUNT  # one reading is no rate yet
    assert fields["nvlink_tx"] == 0  # the totals go on without a gap
    counters.advance(2.0, kib_per_link=1_000_000, links=range(4))
    fields = source._slow_sample(0, "handle-0").fields
    assert fields["nvlink_link_tx"] == (per_link,) * 4 + (0,) * (LINK_COUNT - 4)
    assert fields["nvlink_tx"] == 4 * per_link


def test_reading_the_topology_asks_for_the_links() -> None:
    """The Topology tab and `gputui record` read the topology first: from then on each pass
    reads every link."""
    counters = Counters()
    source = make_source(ScriptedNvmlLib(nvmlDeviceGetFieldValues=counters.field_values))
    source._nvml = None  # (no topology to read here: only what asking for it turns on)
    assert source.read_topology() is None
    source._nvml = Nvml(lib=ScriptedNvmlLib(nvmlDeviceGetFieldValues=counters.field_values))
    source._slow_sample(0, "handle-0")
    counters.advance(2.0, kib_per_link=1_000_000, links=range(4))
    assert source._slow_sample(0, "handle-0").fields["nvlink_link_tx"][:5] == (512_000_000,) * 4 + (0,)


def test_nvlink_counters_going_backwards_are_not_a_rate() -> None:
    counters = Counters()
    source = make_source(ScriptedNvmlLib(nvmlDeviceGetFieldValues=counters.field_values))
    source.want_link_rates()
    source._slow_sample(0, "handle-0")
    counters.time_us += 2_000_000
    counters.kib = dict.fromkeys(counters.kib, 0)  # the driver reloaded: counters restart
    fields = source._slow_sample(0, "handle-0").fields
    assert fields["nvlink_tx"] is None
    assert fields["nvlink_link_rx"] == (None,) * LINK_COUNT


def test_a_gpu_without_nvlink_is_asked_once() -> None:
    lib = ScriptedNvmlLib(nvmlDeviceGetFieldValues=Fail(pynvml.NVML_ERROR_NOT_SUPPORTED))
    source = make_source(lib)
    for _ in range(3):
        fields = source._slow_sample(0, "handle-0").fields
        assert fields["nvlink_rx"] is None
        assert fields["nvlink_link_rx"] == ()
    assert lib.calls[("nvmlDeviceGetFieldValues", "handle-0")] == 1


def test_memory_health_and_replays() -> None:
    lib = ScriptedNvmlLib(
        nvmlDeviceGetRemappedRows=(0, 0, 0, 0),  # the real H200 answer
        nvmlDeviceGetRetiredPages=Fail(pynvml.NVML_ERROR_NOT_SUPPORTED),  # Hopper: no page retirement
        nvmlDeviceGetRetiredPagesPendingStatus=Fail(pynvml.NVML_ERROR_NOT_SUPPORTED),
        nvmlDeviceGetPcieReplayCounter=0,
    )
    source = make_source(lib)
    fields = source._slow_sample(0, "handle-0").fields
    assert fields["remapped_rows_corrected"] == 0
    assert fields["remapped_rows_uncorrected"] == 0
    assert fields["remapped_rows_pending"] is False
    assert fields["remapped_rows_failure"] is False
    assert fields["retired_pages_sbe"] is None
    assert fields["retired_pages_dbe"] is None
    assert fields["retired_pages_pending"] is None
    assert fields["pcie_replay_counter"] == 0
    assert fields["mig_devices"] == ()


def test_retired_pages_are_counted() -> None:
    def pages(handle: Any, cause: int) -> list[int]:
        return [0x1000, 0x2000] if cause == 0 else [0x3000]

    source = make_source(
        ScriptedNvmlLib(
            nvmlDeviceGetRetiredPages=pages,
            nvmlDeviceGetRetiredPagesPendingStatus=1,
            nvmlDeviceGetRemappedRows=(3, 1, 1, 0),
        )
    )
    fields = source._slow_sample(0, "handle-0").fields
    assert (fields["retired_pages_sbe"], fields["retired_pages_dbe"], fields["retired_pages_pending"]) == (
        2,
        1,
        True,
    )
    assert fields["remapped_rows_corrected"] == 3
    assert fields["remapped_rows_pending"] is True


class MigNvml:
    """NVML's MIG API answering for one GPU with two MIG devices in slots 0 and 2 (slot 1
    empty): what nvmlDeviceGetMigDeviceHandleByIndex & co. return, per their documentation."""

    def __init__(self) -> None:
        attrs = {
            "mig-0": {
                "multiprocessorCount": 60,
                "gpuInstanceSliceCount": 3,
                "computeInstanceSliceCount": 3,
                "memorySizeMB": 71_424,
            },
            "mig-2": {
                "multiprocessorCount": 16,
                "gpuInstanceSliceCount": 1,
                "computeInstanceSliceCount": 1,
                "memorySizeMB": 17_920,
            },
        }

        def attributes(h: str) -> Any:
            out = pynvml.c_nvmlDeviceAttributes()
            for k, v in attrs[h].items():
                setattr(out, k, v)
            return out

        self.lib = ScriptedNvmlLib(
            nvmlDeviceGetMigMode=(1, 1),
            nvmlDeviceGetMaxMigDeviceCount=3,
            nvmlDeviceGetMigDeviceHandleByIndex=lambda h, i: (
                Fail(pynvml.NVML_ERROR_NOT_FOUND) if i == 1 else f"mig-{i}"
            ),
            nvmlDeviceGetGpuInstanceId=lambda h: {"mig-0": 2, "mig-2": 9}[h],
            nvmlDeviceGetComputeInstanceId=0,
            nvmlDeviceGetUUID=lambda h: f"MIG-{h}-uuid",
            nvmlDeviceGetName=lambda h: {
                "mig-0": "NVIDIA H200 MIG 3g.71gb",
                "mig-2": "NVIDIA H200 MIG 1g.18gb",
            }[h],
            nvmlDeviceGetAttributes=attributes,
            nvmlDeviceGetMemoryInfo=lambda h, *v: (
                Fail(pynvml.NVML_ERROR_NOT_SUPPORTED)
                if h == "mig-2"
                else type("Mem", (), {"total": 74_893_000_000, "used": 9_300_000_000})()
            ),
            nvmlDeviceGetComputeRunningProcesses=lambda h: [
                type(
                    "P",
                    (),
                    {"pid": 650, "usedGpuMemory": 9_000_000_000, "gpuInstanceId": 2, "computeInstanceId": 0},
                )()
            ],
            nvmlDeviceGetProcessUtilization=Fail(pynvml.NVML_ERROR_NOT_SUPPORTED),
        )


def test_mig_devices_are_read_per_slot() -> None:
    mig = MigNvml()
    source = make_source(mig.lib)
    devices = source._slow_sample(0, "handle-0").fields["mig_devices"]
    assert devices == (
        MigDevice(
            index=0,
            gpu_instance_id=2,
            compute_instance_id=0,
            uuid="MIG-mig-0-uuid",
            name="NVIDIA H200 MIG 3g.71gb",
            sm_count=60,
            gpu_slices=3,
            compute_slices=3,
            memory_total=74_893_000_000,
            memory_used=9_300_000_000,
        ),
        MigDevice(
            index=2,
            gpu_instance_id=9,
            compute_instance_id=0,
            uuid="MIG-mig-2-uuid",
            name="NVIDIA H200 MIG 1g.18gb",
            sm_count=16,
            gpu_slices=1,
            compute_slices=1,
            memory_total=17_920 * 2**20,  # from the attributes when memory info is not supported
            memory_used=None,
        ),
    )
    assert devices[0].profile == "3g.71gb"
    # "not supported" for one MIG device is not remembered for the GPU or the other slot
    assert source._nvml is not None
    assert source._nvml.query("nvmlDeviceGetMemoryInfo", "mig-0", device=0, scope=("mig", 0)) is not None


def test_processes_on_a_mig_gpu_have_no_utilization_not_zero() -> None:
    mig = MigNvml()
    source = make_source(mig.lib)
    source._slow[0] = source._slow_sample(0, "handle-0")
    procs = source._gpu_processes(0, "handle-0")
    assert len(procs) == 1
    p = procs[0]
    assert (p.pid, p.gpu_instance_id, p.compute_instance_id) == (650, 2, 0)
    assert (p.sm_util, p.mem_util, p.enc_util, p.dec_util) == (None, None, None, None)


def test_without_mig_an_unsampled_process_is_zero_after_the_first_pass() -> None:
    lib = ScriptedNvmlLib(
        nvmlDeviceGetMigMode=(0, 0),
        nvmlDeviceGetComputeRunningProcesses=lambda h: [type("P", (), {"pid": 7, "usedGpuMemory": 1})()],
        nvmlDeviceGetProcessUtilization=Fail(pynvml.NVML_ERROR_NOT_FOUND),
    )
    source = make_source(lib)
    assert source._gpu_processes(0, "handle-0")[0].sm_util is None  # no slow pass yet
    source._slow[0] = source._slow_sample(0, "handle-0")
    assert source._gpu_processes(0, "handle-0")[0].sm_util == 0  # sampled: it did not run


@pytest.mark.parametrize(
    ("previous", "now", "rate"),
    [
        (None, (1e6, 10), None),
        ((0.0, 0), (1e6, 1), 1024),
        ((0.0, 0), (2e6, 1000), 512_000),
        ((1e6, 5), (1e6, 9), None),  # no time passed
        ((0.0, 9), (1e6, 5), None),  # went backwards
    ],
)
def test_counter_rate(previous: tuple[float, int] | None, now: tuple[float, int], rate: int | None) -> None:
    assert counter_rate(previous, now) == rate


def test_field_int_reads_each_value_type_and_errors() -> None:
    value = pynvml.c_nvmlFieldValue_t()
    value.valueType, value.value.uiVal = pynvml.NVML_VALUE_TYPE_UNSIGNED_INT, 18
    assert field_int(value) == 18
    value.valueType, value.value.ullVal = pynvml.NVML_VALUE_TYPE_UNSIGNED_LONG_LONG, 124263205
    assert field_int(value) == 124263205
    value.valueType = pynvml.NVML_VALUE_TYPE_DOUBLE
    assert field_int(value) is None
    value.valueType, value.nvmlReturn = pynvml.NVML_VALUE_TYPE_UNSIGNED_INT, pynvml.NVML_ERROR_NOT_SUPPORTED
    assert field_int(value) is None
    assert field_int(None) is None


def test_mig_mode_is_asked_on_the_rare_cadence_until_it_is_on() -> None:
    """nvmlDeviceGetMigMode costs up to 1.8 ms (REFERENCE.md), and MIG mode changes only with
    no process on the GPU: a GPU not in MIG mode is asked every RARE_EVERY-th pass (10 s),
    not every pass; one in MIG mode has its instances read every pass; a GPU that turns MIG
    on is found at the next rare pass."""
    from gputui.telemetry.nvml.slow import RARE_EVERY

    lib = ScriptedNvmlLib(nvmlDeviceGetMigMode=(0, 0))
    source = make_source(lib)
    for _ in range(2 * RARE_EVERY):
        assert source._slow_sample(0, "handle-0").fields["mig_devices"] == ()
        source.slow_passes += 1
    assert lib.calls[("nvmlDeviceGetMigMode", "handle-0")] == 2
    mig = MigNvml()
    source = make_source(mig.lib)
    source.slow_passes = 1  # not a rare pass: MIG is not known yet
    assert source._slow_sample(0, "handle-0").fields["mig_devices"] == ()
    source.slow_passes = RARE_EVERY  # the rare pass finds it on
    assert len(source._slow_sample(0, "handle-0").fields["mig_devices"]) == 2
    for k in range(1, RARE_EVERY):  # and from then on every pass reads the instances
        source.slow_passes = RARE_EVERY + k
        assert len(source._slow_sample(0, "handle-0").fields["mig_devices"]) == 2


def test_a_gpu_without_processes_is_not_asked_for_per_process_utilization() -> None:
    """Per-process utilization (2-3 ms of CPU a GPU a pass) is read only for a GPU that had a
    process at the last tick: nothing to show on one without.  A process that appears after
    a skipped pass has its utilization unknown (None), not 0, until the next pass reads it."""
    running: list[Any] = []
    asked: list[int] = []

    def utilization(h: str, since: int) -> list[Any]:
        asked.append(since)
        return [
            type(
                "S",
                (),
                {"pid": 7, "timeStamp": since + 1, "smUtil": 55, "memUtil": 9, "encUtil": 0, "decUtil": 0},
            )()
        ]

    lib = ScriptedNvmlLib(
        nvmlDeviceGetMigMode=(0, 0),
        nvmlDeviceGetComputeRunningProcesses=lambda h: list(running),
        nvmlDeviceGetProcessUtilization=utilization,
    )
    source = make_source(lib)
    assert source._gpu_processes(0, "handle-0") == []  # the tick: no process on GPU 0
    source._slow[0] = source._slow_sample(0, "handle-0")
    assert asked == []
    running.append(type("P", (), {"pid": 7, "usedGpuMemory": 1})())
    assert source._gpu_processes(0, "handle-0")[0].sm_util is None  # not read: unknown
    source._slow[0] = source._slow_sample(0, "handle-0")
    assert len(asked) == 1
    assert source._gpu_processes(0, "handle-0")[0].sm_util == 55


def test_a_gpu_lost_in_a_one_shot_read_is_left_out_and_the_others_kept() -> None:
    """`gputui snapshot` reads every GPU's slow values at once (one_shot._read): a GPU that
    falls off the bus meanwhile is marked lost and has no slow values; the other GPU's are
    kept, and nothing is raised."""
    from gputui.telemetry.nvml.one_shot import _read

    counters = Counters()

    def field_values(handle: Any, ids: list[Any]) -> Any:
        if handle == "handle-1":
            raise pynvml.NVMLError(pynvml.NVML_ERROR_GPU_IS_LOST)
        return counters.field_values(handle, ids)

    source = make_source(ScriptedNvmlLib(nvmlDeviceGetFieldValues=field_values), gpus=2)
    source._slow = {}
    _read(source, None, {}, {})
    assert source._lost == {1}
    assert set(source._slow) == {0}
    assert "nvlink_rx" in source._slow[0].fields  # GPU 0 read in full
