"""What a LineWidget repaints when a line changes: exactly the cells that differ (in text or in
style), a span taking in gaps of fewer than MERGE_GAP unchanged cells, in one refresh."""

from __future__ import annotations

import asyncio

from conftest import H100_GPM, replay_app, run_to_tick
from rich.style import Style
from textual.app import App, ComposeResult
from textual.geometry import Region

from gputui.ui.render import Line, S, pad_line
from gputui.ui.widgets.lines import MERGE_GAP, LineWidget, changed_spans, line_key

WIDTH = 40


def reference_spans(old: Line, new: Line) -> list[tuple[int, int]]:
    """Cell by cell, the plain way: the spans of cells whose character or style differ."""
    a = [(ch, st) for text, st in old for ch in text]
    b = [(ch, st) for text, st in new for ch in text]
    changed = [x for x in range(len(b)) if a[x] != b[x]]
    spans: list[tuple[int, int]] = []
    for x in changed:
        if spans and x - spans[-1][1] < MERGE_GAP:
            spans[-1] = (spans[-1][0], x + 1)
        else:
            spans.append((x, x + 1))
    return spans


def spans(old: Line, new: Line) -> list[tuple[int, int]]:
    ids: dict[Style | None, str] = {}
    return changed_spans(line_key(pad_line(old, WIDTH), ids), line_key(pad_line(new, WIDTH), ids))


class Lines(LineWidget):
    def __init__(self) -> None:
        super().__init__()
        self.lines: list[Line] = [[("GPU 0  99%   61°C", S.value)], [("second line", S.label)]]
        self.refreshed: list[list[Region]] = []

    def build(self, width: int, height: int) -> list[Line]:
        return self.lines

    def refresh(self, *regions: Region, **kwargs: bool):  # type: ignore[no-untyped-def, override]
        if regions:
            self.refreshed.append(list(regions))
        return super().refresh(*regions, **kwargs)


class One(App[None]):
    def compose(self) -> ComposeResult:
        yield Lines()


def repaint(changes: list[list[Line]]) -> list[tuple[list[list[Region]], int]]:
    """Show each list of lines in turn; per step, the refresh calls and the cells sent."""

    async def go():
        app = One()
        out = []
        async with app.run_test(size=(WIDTH, 5)) as pilot:
            widget = app.query_one(Lines)
            while widget.size.height != 2:
                await pilot.pause(0.01)
            for lines in changes:
                widget.refreshed.clear()
                sent = widget.cells_sent
                widget.lines = lines
                widget.update_lines()
                out.append((list(widget.refreshed), widget.cells_sent - sent))
                await pilot.pause()
        return out

    return asyncio.run(go())


def test_a_changed_figure_repaints_its_cells_in_one_refresh():
    second = [("second line", S.label)]
    (one, sent1), (two, sent2), (same, sent3) = repaint(
        [
            [[("GPU 0  98%   61°C", S.value)], second],  # one cell
            [[("GPU 0  12%   75°C", S.value)], [("second LINE", S.label)]],  # spans on two lines
            [[("GPU 0  12%   75°C", S.value)], [("second LINE", S.label)]],  # nothing
        ]
    )
    assert one == [[Region(8, 0, 1, 1)]] and sent1 == 1
    # 7-8 and 13-14 are four cells apart: two spans; one refresh for every span of the update
    assert two == [[Region(7, 0, 2, 1), Region(13, 0, 2, 1), Region(7, 1, 4, 1)]] and sent2 == 8
    assert same == [] and sent3 == 0


def test_a_style_change_alone_repaints_its_cells():
    plain = [("load ", S.label), ("42%", S.ok)]
    warned = [("load ", S.label), ("42%", S.warn)]
    assert spans(plain, warned) == [(5, 8)]
    # an equal style built anew is not a change; None (no style) is one
    assert spans(plain, [("load ", Style(color=S.label.color)), ("42%", Style(color=S.ok.color))]) == []
    assert spans(plain, [("load ", None), ("42%", S.ok)]) == [(0, 5)]
    # a run split in two, same cells: nothing to send
    assert spans(plain, [("lo", S.label), ("ad ", S.label), ("42%", S.ok)]) == []


def test_changes_fewer_than_merge_gap_cells_apart_are_one_span():
    base = [("x" * 30, S.value)]

    def with_changes(*xs: int) -> Line:
        text = list("x" * 30)
        for x in xs:
            text[x] = "y"
        return [("".join(text), S.value)]

    gap = MERGE_GAP - 1  # unchanged cells between the two changes: still one span
    assert spans(base, with_changes(2, 2 + gap + 1)) == [(2, 2 + gap + 2)]
    gap = MERGE_GAP  # one more: two spans
    assert spans(base, with_changes(2, 2 + gap + 1)) == [(2, 3), (2 + gap + 1, 2 + gap + 2)]
    # the first and the last cell of the line
    assert spans(base, with_changes(0)) == [(0, 1)]
    assert spans(base, with_changes(29)) == [(29, 30)]
    assert spans([("x" * WIDTH, None)], [("y" * WIDTH, None)]) == [(0, WIDTH)]


def test_characters_that_differ_only_above_their_lowest_byte_are_changes():
    # U+0040 "@", U+0140 "ŀ", U+10040: the same lowest byte
    for a, b in [("@", "ŀ"), ("@", "\U00010040"), ("ŀ", "\U00010140"), ("\x00", "\U00100000")]:
        assert spans([("ab" + a + "cd", None)], [("ab" + b + "cd", None)]) == [(2, 3)], ascii(b)


def test_a_lone_surrogate_from_untrusted_text_is_a_cell_like_any_other():
    assert spans([("ab\ud800cd", None)], [("ab\udc00cd", None)]) == [(2, 3)]
    assert spans([("ab\ud800cd", None)], [("ab\ud800cd", S.value)]) == [(0, 5)]


def test_styles_numbered_past_the_surrogate_block_still_tell_cells_apart():
    ids: dict[Style | None, str] = {Style(color=f"#{n:06x}"): chr(n + 1) for n in range(0xD7FE)}
    ids[None] = chr(0xD7FF)
    first, second = Style(color="red"), Style(color="blue")  # numbered 0xD800 and 0xD801: skipped
    old = line_key(pad_line([("abc", first)], WIDTH), ids)
    new = line_key(pad_line([("abc", second)], WIDTH), ids)
    assert ids[first] == chr(0xE000) and ids[second] == chr(0xE001)
    assert changed_spans(old, new) == [(0, 3)]


def test_the_spans_of_a_real_replay_are_those_of_a_cell_by_cell_comparison():
    """Every line of the Overview's GPU card, tick after tick of the H100 GPM recording."""

    async def go():
        app = replay_app(H100_GPM)
        pairs = []
        async with app.run_test(size=(160, 50)) as pilot:
            await run_to_tick(pilot, 2)
            board = app.query_one("GpuBoard")
            width, height = board.size.width, board.size.height
            old = board.build(width, height)
            for tick in range(3, 40):
                await run_to_tick(pilot, tick)
                new = board.build(width, height)
                pairs += [(pad_line(a, width), pad_line(b, width)) for a, b in zip(old, new, strict=True)]
                old = new
        return pairs

    pairs = asyncio.run(go())
    ids: dict[Style | None, str] = {}
    changed = 0
    for old, new in pairs:
        expected = reference_spans(old, new)
        assert changed_spans(line_key(old, ids), line_key(new, ids)) == expected
        changed += bool(expected)
    assert changed > 100  # (the charts scroll: most of those lines change)
