"""The metric registry (gputui/telemetry/metrics.py): every consumer is derived from it, so
a quantity is declared once; and the memory temperature, added through it alone, reaches
every consumer.

The memory temperature read runs on `ScriptedNvmlLib` (tests/test_nvml.py: pynvml's real
structures and errors, not a GPU).  Its value, 33 °C, is what nvidia-smi -q printed as
"Memory Current Temp" on the real H200 (/work/shared/reference/h200-nvidia-smi-q.txt); the
rest of the machine is the real 2x H200 recording.
"""

from __future__ import annotations

import dataclasses
import typing
from typing import Any

import pynvml
import pytest
from conftest import H200_X2
from test_nvml import Fail, ScriptedNvmlLib

from gputui.config import CARD_INFO, CARD_SPARKLINES, SORT_KEYS, CardConfig, UiConfig
from gputui.export import snapshot as snapshot_fmt
from gputui.export import snapshot_fields
from gputui.export.prometheus import build_families
from gputui.telemetry import metrics
from gputui.telemetry.history import History
from gputui.telemetry.metric_types import Unit
from gputui.telemetry.metrics import GPU_METRICS
from gputui.telemetry.model import GpuProcess, GpuSample
from gputui.telemetry.nvml.source import Nvml, NvmlSource
from gputui.telemetry.process_metrics import PROCESS_METRICS
from gputui.telemetry.recording import read_recording
from gputui.ui.processes.lines import CELL_TEXT, cell_text
from gputui.ui.processes.rows import RowBuilder
from gputui.ui.render import UNIT_TEXT
from gputui.ui.widgets.card import gpu_card

#: GpuSample fields that are not one quantity: identity, structure (MIG devices; the per-link
#: NVLink rates the topology tab draws).
NOT_QUANTITIES = {
    "index",
    "lost",
    "mig_devices",
    "nvlink_link_rx",
    "nvlink_link_tx",
    "gpm",  # GPM's figures: each is an entry with a GpmRead (read from GpuSample.activity)
}
MEMORY_TEMP_H200 = 33


def test_every_measured_gpu_field_has_one_entry() -> None:
    fields = {f.name for f in dataclasses.fields(GpuSample)}
    declared = [m.field for m in GPU_METRICS]
    assert len(declared) == len(set(declared)), "a field (a history series) with two entries"
    plain = {m.field for m in GPU_METRICS if m.read is None}
    assert plain <= fields, plain - fields  # read straight off the sample
    assert fields - set(declared) == NOT_QUANTITIES


def test_every_column_reads_a_process_field_or_says_how() -> None:
    fields = {f.name for f in dataclasses.fields(GpuProcess)}
    for m in PROCESS_METRICS:
        assert m.read is not None or m.attr in fields, m.key


def test_names_are_unique() -> None:
    for names in (
        [m.key for m in GPU_METRICS],
        [m.prometheus.name for m in GPU_METRICS if m.prometheus],
        [m.snapshot.name for m in GPU_METRICS if m.snapshot],
        [m.card for m in GPU_METRICS if m.card],
        [m.key for m in PROCESS_METRICS],
        SORT_KEYS,
    ):
        assert len(names) == len(set(names)), names


def test_a_chart_needs_history() -> None:
    for m in GPU_METRICS:
        assert m.history or not m.chart, m.key


def test_every_unit_has_a_card_text_and_a_cell_text() -> None:
    units = set(typing.get_args(Unit))
    assert set(UNIT_TEXT) == units
    assert set(CELL_TEXT) == units


def test_config_choices_are_the_registrys() -> None:
    assert tuple(m.key for m in GPU_METRICS if m.chart) == CARD_SPARKLINES
    assert set(CARD_INFO) == {m.card for m in GPU_METRICS if m.card}
    assert tuple(n for m in PROCESS_METRICS for n in m.config_names) == SORT_KEYS
    doc = dataclasses.fields(UiConfig)[3].metadata["doc"]
    assert ", ".join(SORT_KEYS) in doc


def test_each_column_shows_its_own_value_not_the_command() -> None:
    """Before the registry, a column missing from the hand-written cell function silently
    showed the command line; now a column's cell comes from its unit."""
    _, snaps = read_recording(H200_X2)
    rows = RowBuilder().rows(next(s for s in snaps if s.processes))
    assert rows
    for col in PROCESS_METRICS:
        if col.key != "command":
            assert all(cell_text(r, col) != r.command for r in rows), col.key


# --------------------------------------------------------------------------------------
# the memory temperature, end to end
# --------------------------------------------------------------------------------------


def _field_values(handle: Any, ids: list[int]) -> Any:
    out = (pynvml.c_nvmlFieldValue_t * len(ids))()
    for k, fid in enumerate(ids):
        out[k].fieldId = fid
        if fid == pynvml.NVML_FI_DEV_MEMORY_TEMP:
            out[k].valueType, out[k].value.uiVal = pynvml.NVML_VALUE_TYPE_UNSIGNED_INT, MEMORY_TEMP_H200
        else:
            out[k].nvmlReturn = pynvml.NVML_ERROR_NOT_SUPPORTED
    return out


def _source(lib: ScriptedNvmlLib) -> NvmlSource:
    source = NvmlSource(nvml=Nvml(lib=lib), slow=False)
    source._handles = ["handle-0"]
    return source


def test_memory_temperature_is_read_from_nvml_field_82() -> None:
    source = _source(ScriptedNvmlLib(nvmlDeviceGetFieldValues=_field_values))
    assert source._gpu_sample(0, "handle-0").memory_temperature == MEMORY_TEMP_H200


def test_memory_temperature_not_reported_is_none_and_not_asked_again() -> None:
    def no_sensor(handle: Any, ids: list[int]) -> Any:
        out = (pynvml.c_nvmlFieldValue_t * len(ids))()
        out[0].fieldId, out[0].nvmlReturn = ids[0], pynvml.NVML_ERROR_NOT_SUPPORTED
        return out

    lib = ScriptedNvmlLib(nvmlDeviceGetFieldValues=no_sensor)
    source = _source(lib)
    for _ in range(3):
        assert source._gpu_sample(0, "handle-0").memory_temperature is None
    assert lib.calls[("nvmlDeviceGetFieldValues", "handle-0")] == 1
    failing = _source(ScriptedNvmlLib(nvmlDeviceGetFieldValues=Fail(pynvml.NVML_ERROR_NOT_SUPPORTED)))
    assert failing._gpu_sample(0, "handle-0").memory_temperature is None


@pytest.fixture
def h200_with_memory_temp() -> tuple[Any, Any]:
    header, snaps = read_recording(H200_X2)
    snap = snaps[-1]
    gpus = tuple(dataclasses.replace(g, memory_temperature=MEMORY_TEMP_H200 + g.index) for g in snap.gpus)
    return header.machine, dataclasses.replace(snap, gpus=gpus)


def test_memory_temperature_in_snapshots_and_on_metrics(h200_with_memory_temp: tuple[Any, Any]) -> None:
    info, snap = h200_with_memory_temp
    doc = snapshot_fmt.document(info, snap)
    assert [g["temperature.memory"] for g in doc["gpus"]] == [33, 34]
    fields = snapshot_fields.select(["temperature.memory"], snapshot_fields.GPU_BY_NAME, "GPU")
    assert snapshot_fmt.csv_text(info, snap, fields) == "temperature.memory\n33\n34\n"
    fam = next(f for f in build_families(info, snap) if f.name == "DCGM_FI_DEV_MEMORY_TEMP")
    assert fam.type == "gauge"
    assert [(s.labels["gpu"], s.value) for s in fam.samples] == [("0", 33.0), ("1", 34.0)]


def test_memory_temperature_in_history_and_on_the_card(h200_with_memory_temp: tuple[Any, Any]) -> None:
    info, snap = h200_with_memory_temp
    history = History(capacity=8)
    for k in range(3):  # three ticks (history keeps one sample per sample time)
        history.append(dataclasses.replace(snap, seq=snap.seq + k, timestamp=snap.timestamp + k))
    assert history.series(1, "memory_temperature") == [34.0] * 3
    card = CardConfig(sparklines=("mem_temp",), info=("mem_temp", "pstate"))
    lines = gpu_card(info.devices[0], snap.gpus[0], [], history.series, 80, 2, card=card)
    text = ["".join(t for t, _ in line) for line in lines]
    assert any("MTEMP 33°C" in t for t in text), text  # the info line
    assert any(t.startswith("│ MTEMP") and t.rstrip(" │").endswith("33°C") for t in text), text  # chart
    assert metrics.GPU_METRIC["mem_temp"].snapshot is not None
