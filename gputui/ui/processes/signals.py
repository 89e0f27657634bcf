"""The one signal path of the process lists (the Overview's and the Processes tab's):
T, K and I ask through the one confirmation dialog, which lists exactly the processes (PID
and start time) that will be signalled; the signal goes through `gputui.control.signals` on
a worker thread; the rows and the status line then show what happened.

What was sent, and what became of it, is kept in the app's one `SentSignals` record (in its
`PaneContext`), so a signal sent from one list shows on the other's rows too.  The desk knows
the list it serves through `SignalOwner` alone, and the list uses the desk's public methods.
"""

from __future__ import annotations

import dataclasses
import signal
import time
from collections.abc import Callable
from functools import partial
from typing import TYPE_CHECKING, Protocol

from gputui.ui.processes.lines import PS, RowNote
from gputui.ui.processes.rows import Ident, ProcessRow
from gputui.ui.processes.sent import SignalTarget, SignalWatch, signal_number
from gputui.ui.render import Line, S, clean
from gputui.untrusted import literal

if TYPE_CHECKING:
    from textual.app import App
    from textual.widget import Widget

    from gputui.control.jobs import JobMember, JobMembers
    from gputui.control.signals import PinnedProcess, ProcessIdentity, SignalResult
    from gputui.ui.context import SentSignals

# gputui.control.signals (psutil) and the dialogs are imported when first used: a replay
# never needs them, and the Overview's list is in the first frame.

WATCH_S = 120.0
"""How long after a signal gputui watches for the process to exit."""
FAILED_NOTE_S = 20.0
"""How long a refusal or failure stays on its row."""
EXITED_NOTE_S = 10.0


class SignalOwner(Protocol):
    """What the desk uses of the process list it serves (`ProcessList`)."""

    @property
    def all_rows(self) -> list[ProcessRow]:
        """The rows of the latest tick (the GPUs and memory a whole job's members hold)."""
        ...

    def check_signal(self) -> bool | None:
        """True: signals allowed; None: shown but disabled (a replay); False: --readonly."""
        ...

    def signals_changed(self, *, sent: bool) -> None:
        """Redraw the rows and status line; `sent`: a signal went out (the marks are done)."""
        ...


class SignalDesk:
    """A process list's way to signal: asks, pins, sends, watches, and notes the outcome
    in the app's shared record (`book`).  `widget` (the list itself) asks, notifies and runs
    the workers."""

    def __init__(self, owner: SignalOwner, widget: Widget, book: SentSignals) -> None:
        self.owner = owner
        self.widget = widget
        self.book = book

    # ---- the shared record and the list it serves --------------------------------------

    @property
    def watches(self) -> dict[Ident, SignalWatch]:
        return self.book.watches

    @property
    def status(self) -> dict[int, Line]:
        """The outcome of the latest signals, by PID (the line under the table)."""
        return self.book.status

    @status.setter
    def status(self, value: dict[int, Line]) -> None:
        self.book.status = value

    @property
    def job_batch(self) -> tuple[str, list[Ident]] | None:
        """The latest whole-job signal: its title and its members (the status line's summary)."""
        return self.book.job_batch

    @job_batch.setter
    def job_batch(self, value: tuple[str, list[Ident]] | None) -> None:
        self.book.job_batch = value

    @property
    def all_rows(self) -> list[ProcessRow]:
        return self.owner.all_rows

    @property
    def app(self) -> App[object]:
        return self.widget.app

    def notify(self, message: str, **kwargs: object) -> None:
        self.widget.notify(message, **kwargs)  # type: ignore[arg-type]

    def check_signal(self) -> bool | None:
        return self.owner.check_signal()

    def _refresh(self) -> None:
        self.owner.signals_changed(sent=False)

    # ---- the status line -----------------------------------------------------------------

    def status_lines(self) -> list[Line]:
        lines = list(self.status.values())[-4:]
        if self.job_batch is not None:
            lines = [self._job_summary(*self.job_batch), *lines[-3:]]
        return lines

    def _job_summary(self, title: str, members: list[Ident]) -> Line:
        """Which members of the latest signalled job exited, are still running, or were refused."""
        exited, running, refused = [], [], []
        for ident in members:
            w = self.watches.get(ident)
            if w is None or not w.result.sent:
                refused.append(ident[0])
            elif w.exited_after is not None:
                exited.append(ident[0])
            else:
                running.append(ident[0])
        parts = []
        if exited:
            parts.append((f"{len(exited)} exited ({', '.join(map(str, exited))})", PS.note_ok))
        if running:
            parts.append((f"{len(running)} still running ({', '.join(map(str, running))})", PS.note_warn))
        if refused:
            parts.append((f"{len(refused)} not signalled ({', '.join(map(str, refused))})", PS.note_bad))
        line: Line = [(f" {title}: ", S.title)]
        for i, part in enumerate(parts):
            line.append(("; " if i else "", S.label))
            line.append(part)
        return line

    # ---- signals: what happened ------------------------------------------------------

    def note_for(self, ident: Ident | None) -> RowNote | None:
        if ident is None:
            return None
        w = self.watches.get(ident)
        if w is None:
            return None
        name = _signal_name(w.result.signal)
        if not w.result.sent:
            return RowNote(f"✗ {name}: {_short(w.result)}", PS.note_bad)
        if w.exited_after is not None:
            return RowNote(f"✓ exited {w.exited_after:.1f} s after {name}", PS.note_ok)
        running = int(time.monotonic() - w.at)
        offer = " · K: SIGKILL" if w.result.signal != signal.SIGKILL else ""
        return RowNote(f"{name} sent · still running after {running} s{offer}", PS.note_warn)

    def notes(self) -> dict[Ident, RowNote]:
        """Each row's note (signalled, exited, refused), by process."""
        out = {}
        for ident in self.watches:
            note = self.note_for(ident)
            if note is not None:
                out[ident] = note
        return out

    def expire(self, present: set[Ident]) -> None:
        """Forget what no longer needs saying (`present`: the processes of the latest tick)."""
        now = time.monotonic()
        for ident, w in list(self.watches.items()):
            done = (not w.result.sent and now - w.at > FAILED_NOTE_S) or (
                w.exited_after is not None and now - w.at - w.exited_after > EXITED_NOTE_S
            )
            if done or (ident not in present and now - w.at > WATCH_S):
                del self.watches[ident]

    # ---- signals: asking and sending -------------------------------------------------

    def targets(self, rows: list[ProcessRow]) -> tuple[list[SignalTarget], list[str]]:
        """Merge rows into processes (one per PID and start time); say why others are left out."""
        targets: dict[Ident, SignalTarget] = {}
        problems: list[str] = []
        for r in rows:
            p = r.proc
            ident = r.ident
            if not p.visible:
                problems.append(f"PID {p.pid} is {r.command}: gputui cannot signal it")
                continue
            if ident is None:
                problems.append(f"PID {p.pid}: its start time could not be read, so it cannot be verified")
                continue
            t = targets.get(ident)
            if t is None:
                from gputui.control.signals import ProcessIdentity

                t = targets[ident] = SignalTarget(
                    ProcessIdentity(p.pid, ident[1], p.user, p.name), command=r.command
                )
            t.gpus.append(p.gpu_index)
            if p.gpu_memory is not None:
                t.gpu_memory = (t.gpu_memory or 0) + p.gpu_memory
        return list(targets.values()), problems

    def ask_to_signal(self, rows: list[ProcessRow], name: str) -> None:
        from gputui.ui.processes.screens import SignalDialog

        allowed = self.check_signal()
        if not allowed:
            why = (
                "gputui runs --readonly"
                if allowed is False
                else "this is a recording, not this machine's processes"
            )
            self.notify(f"Signals are disabled: {why}.", severity="warning")
            return
        if not rows:
            self.notify("No process selected.", severity="warning")
            return
        launcher = next((r for r in rows if r.launcher is not None), None)
        if launcher is not None:
            self._list_job(launcher, name)
            return
        from gputui.control.signals import pin

        targets, problems = self.targets(rows)
        sig = signal_number(name)
        # Pin each process now, while the user looks at it: what is sent later goes to
        # exactly these processes.  One already gone, reused or not ours is said now.
        ready: list[SignalTarget] = []
        for t in targets:
            t.pinned = pin(t.identity)
            if t.pinned.problem is not None:
                refused = dataclasses.replace(t.pinned.problem, signal=sig)
                problems.append(refused.message)
                self.record([refused], time.monotonic())
                continue
            ready.append(t)
        for problem in problems:
            self.notify(clean(problem), severity="warning", timeout=8, markup=False)
        if not ready:
            self._refresh()
            return

        def answered(yes: bool | None) -> None:
            if yes:
                self._send(ready, sig)
            else:
                for t in ready:
                    if t.pinned is not None:
                        t.pinned.close()

        self.app.push_screen(SignalDialog(ready, name), answered)

    # ---- a whole job ------------------------------------------------------------------

    def _list_job(self, row: ProcessRow, name: str) -> None:
        self.widget.run_worker(
            partial(self._list_job_thread, row, name), thread=True, exit_on_error=False, group="job-list"
        )

    def _list_job_thread(self, row: ProcessRow, name: str) -> None:
        """Off the UI thread: list the launcher's job (descendants, its own process group
        or session) and pin every member, then ask."""
        from gputui.control.jobs import job_members
        from gputui.control.signals import ProcessIdentity, pin

        lp = row.launcher
        assert lp is not None
        members = job_members(ProcessIdentity(lp.pid, lp.create_time, lp.user, lp.name))
        pinned = [(m, pin(m.identity)) for m in members.members]
        if not self._tell_ui(self._confirm_job, row, name, members, pinned):
            for _, p in pinned:
                p.close()

    def _confirm_job(
        self, row: ProcessRow, name: str, members: JobMembers, pinned: list[tuple[JobMember, PinnedProcess]]
    ) -> None:
        from gputui.telemetry.host.cmdline import readable_command
        from gputui.ui.processes.screens import SignalDialog

        lp = row.launcher
        assert lp is not None
        title = f"{lp.kind} (PID {lp.pid})"
        if members.problem is not None:
            self.notify(clean(members.problem), severity="warning", timeout=8, markup=False)
            return
        sig = signal_number(name)
        ready: list[SignalTarget] = []
        for m, p in pinned:
            if p.problem is not None:
                refused = dataclasses.replace(p.problem, signal=sig)
                self.notify(clean(refused.message), severity="warning", timeout=8, markup=False)
                self.record([refused], time.monotonic())
                continue
            rows = [r for r in self.all_rows if r.proc.pid == m.identity.pid]
            mems = [r.proc.gpu_memory for r in rows if r.proc.gpu_memory is not None]
            readable = readable_command(m.cmdline)
            role = m.why
            if members.group is not None and m.why.startswith("process group"):
                role = f"group {members.group}"
            ready.append(
                SignalTarget(
                    m.identity,
                    gpus=[r.key[0] for r in rows],
                    gpu_memory=sum(mems) if mems else None,
                    command=literal(readable) if readable else f"[{literal(m.identity.name or '?')}]",
                    pinned=p,
                    role=role,
                )
            )
        if not ready:
            self._refresh()
            return

        def answered(yes: bool | None) -> None:
            if yes:
                self.job_batch = (
                    f"job {title} after SIG{name}",
                    [(t.identity.pid, t.identity.create_time) for t in ready],
                )
                self._send(ready, sig)
            else:
                for t in ready:
                    if t.pinned is not None:
                        t.pinned.close()

        left_out = [f"PID {m.identity.pid} ({m.identity.name or '?'}) {m.why}" for m in members.left_out]
        self.app.push_screen(SignalDialog(ready, name, job=title, left_out=left_out), answered)

    def _send(self, targets: list[SignalTarget], sig: int) -> None:
        self.widget.run_worker(
            partial(self._send_thread, targets, sig), thread=True, exit_on_error=False, group="signals"
        )

    def _send_thread(self, targets: list[SignalTarget], sig: int) -> None:
        """Off the UI thread: send, then watch the processes that got it until they exit."""
        from gputui.control.signals import is_running, send_signal

        results = []
        for t in targets:
            if t.pinned is not None:
                with t.pinned:
                    results.append(send_signal(t.pinned, sig))
            else:
                results.append(send_signal(t.identity, sig))
        sent_at = time.monotonic()
        if not self._tell_ui(self._on_sent, results, sent_at):
            return
        pending = [r.identity for r in results if r.sent]
        deadline = sent_at + WATCH_S
        delay = 0.05
        while pending and time.monotonic() < deadline:
            time.sleep(delay)
            delay = min(0.5, delay * 1.5)
            for identity in list(pending):
                if not is_running(identity):
                    pending.remove(identity)
                    if not self._tell_ui(self._on_exited, identity, sig, time.monotonic()):
                        return

    def _tell_ui(self, callback: Callable[..., None], *args: object) -> bool:
        """Run `callback` on the UI thread; False once the app has gone (stop watching)."""
        try:
            self.app.call_from_thread(callback, *args)
        except RuntimeError:
            return False
        return True

    def record(self, results: list[SignalResult], at: float) -> None:
        """Remember each result for its row and the status line."""
        for r in results:
            self.watches[(r.identity.pid, r.identity.create_time)] = SignalWatch(r, at)
            style = PS.note_ok if r.sent else PS.note_bad
            self.status[r.identity.pid] = [(" " + r.message, style)]

    def _on_sent(self, results: list[SignalResult], at: float) -> None:
        self.status = {}
        if self.job_batch is not None and {(r.identity.pid, r.identity.create_time) for r in results} != set(
            self.job_batch[1]
        ):
            self.job_batch = None  # a later signal to other processes
        self.record(results, at)
        for r in results:
            if not r.sent:
                self.notify(clean(r.message), severity="warning", timeout=8, markup=False)
        self.owner.signals_changed(sent=True)

    def _on_exited(self, identity: ProcessIdentity, sig: int, at: float) -> None:
        """The process is gone (seen at monotonic time `at`): counted from the latest signal
        sent to it (a SIGKILL after an ignored SIGTERM counts from the SIGKILL)."""
        w = self.watches.get((identity.pid, identity.create_time))
        if w is not None and w.exited_after is None:
            after = max(0.0, at - w.at)
            w.exited_after = after
            name = _signal_name(w.result.signal)
            self.status[identity.pid] = [
                (f" PID {identity.pid} exited {after:.1f} s after {name}", PS.note_ok)
            ]
        self._refresh()


def _short(result: SignalResult) -> str:
    return {
        "gone": "already exited",
        "reused": "PID reused by another process, refused",
        "protected": "protected, refused",
        "denied": f"permission denied (owner {result.owner or '?'})",
    }.get(result.outcome.value, result.outcome.value)


def _signal_name(sig: int) -> str:
    try:
        return signal.Signals(sig).name
    except ValueError:
        return f"signal {sig}"
