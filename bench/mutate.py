"""Break the dangerous code on purpose and check that the tests notice (issue 13, item 9).

    python bench/mutate.py [--only ID] [--list] [--keep]

Each mutation is (file, exact old text, new text) plus the tests that guard it.  The
repository's files (tracked and untracked, not ignored) are copied to a temporary directory
once; for each mutation the copy gets the one change, the tests run there (`python -m
pytest -x -q`, with PYTHONPATH pointing at the copy, checked), and the file is put back.
The checkout itself is never modified.

Outcomes, one line each, then a summary:
  killed                          a test failed: the guard is pinned
  SURVIVED                        every test passed with the code broken
  not applied: snippet not found  the old text is not in the file (moved or rewritten: the
                                  mutation must be updated; never counted as killed)
  not applied: file not found     the file itself is gone (moved)
  not applied: snippet ambiguous  the old text occurs more than once
  error                           pytest could not run (exit status 2-5)
Exit status: 0 when every mutation was applied and killed, else 1.
"""

from __future__ import annotations

import argparse
import os
import shutil
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


@dataclass(frozen=True)
class Mutation:
    id: str
    file: str
    old: str
    new: str
    tests: tuple[str, ...]
    why: str


GUARDS = "tests/test_safety_guards.py"
CHILDREN = "tests/test_children.py"
LIFELINE = "tests/test_child_lifeline.py"
DIAG_MEMORY = "tests/test_diag_memory.py"
DIAG_STARTVARS = "tests/test_diag_startvars.py"
HOSTILE = "tests/test_cluster_hostile.py"
PRIVATE = "tests/test_private_files.py"
BAD_FILES = "tests/test_bad_files.py"
NAMED = "tests/test_named_files.py"
JOB_GUARDS = "tests/test_job_kill_guards.py"
ATTRIBUTION = "tests/test_job_attribution.py"
CPU_WINDOW = "tests/test_health_cpu_window.py"
NCCL = "tests/test_health_nccl.py"
RAS_CLIENT = "tests/test_nccl_client.py"
RAS_FINDINGS = "tests/test_nccl_findings.py"
UNTRUSTED_TESTS = ("tests/test_untrusted.py", "tests/test_render.py", "tests/test_process_lines.py")

MUTATIONS: list[Mutation] = [
    # ---- the exporter's bind -----------------------------------------------------------
    Mutation(
        "export-bind-all",
        "gputui/export/prometheus.py",
        "httpd = make_server(host, port, app,",
        'httpd = make_server("", port, app,',
        (f"{GUARDS}::test_the_server_binds_the_loopback_address_it_was_given", "tests/test_export.py"),
        "binds every interface while printing 127.0.0.1",
    ),
    Mutation(
        "export-loopback-any",
        "gputui/export/address.py",
        "return bool(addresses) and all(",
        "return bool(addresses) and any(",
        (GUARDS, "tests/test_export.py"),
        "a name with a loopback and a routable address passes as loopback",
    ),
    Mutation(
        "export-loopback-empty",
        "gputui/export/address.py",
        "return bool(addresses) and all(",
        "return not addresses or all(",
        (GUARDS, "tests/test_export.py"),
        "a name that resolves to nothing passes as loopback",
    ),
    Mutation(
        "export-refusal-off",
        "gputui/commands/export.py",
        "host, port = checked_listen(listen, args.allow_remote, exposes)",
        "host, port = checked_listen(listen, True, exposes)",
        ("tests/test_export.py",),
        "a public bind is no longer refused",
    ),
    # ---- the untrusted-text filter (one rule, gputui/untrusted.py: the fast paths of
    # ui/render.py and ui/process_lines.py moved there) ------------------------------------
    Mutation(
        "untrusted-fast-path",
        "gputui/untrusted.py",
        "    return text.isascii() and text.isprintable()\n",
        "    return text.isprintable()\n",
        (GUARDS, *UNTRUSTED_TESTS),
        "any isprintable() text (wide, combining) passes every filter as it is",
    ),
    Mutation(
        "untrusted-one-cell-wide",
        "gputui/untrusted.py",
        "    if not visible(ch) or unicodedata.east_asian_width(ch) in _WIDE:",
        "    if not visible(ch):",
        (GUARDS, *UNTRUSTED_TESTS),
        "double-width characters count as one cell",
    ),
    Mutation(
        "untrusted-zero-width",
        "gputui/untrusted.py",
        "    if unicodedata.category(ch) in _ZERO_WIDTH_CATEGORIES:\n        return False\n",
        "",
        (GUARDS, *UNTRUSTED_TESTS),
        "combining and zero-width characters count as visible",
    ),
    # ---- the stress and diagnosis verdicts ----------------------------------------------
    Mutation(
        "stress-ecc-threshold",
        "gputui/diag/verdicts/stress.py",
        "    if new_ecc > 0:",
        "    if new_ecc > 1:",
        ("tests/test_stress.py",),
        "one new uncorrected ECC error passes",
    ),
    Mutation(
        "stress-remapped-rows-threshold",
        "gputui/diag/verdicts/stress.py",
        "if new_unc_rows > 0 or",
        "if new_unc_rows > 1 or",
        ("tests/test_stress.py",),
        "one new uncorrectable remapped row passes",
    ),
    Mutation(
        "stress-xid-ignored",
        "gputui/diag/verdicts/stress.py",
        "    if xids:\n",
        "    if False:\n",
        ("tests/test_stress.py",),
        "Xid events during the burn pass",
    ),
    Mutation(
        "stress-miscompare-ignored",
        "gputui/diag/verdicts/stress.py",
        'if _count(burn.get("reference_mismatches")):',
        "if False:",
        ("tests/test_stress.py",),
        "results off the float64 reference pass",
    ),
    Mutation(
        "stress-exit-after-done",
        "gputui/diag/session.py",
        "or (result.returncode not in (0, None) and not result.cancelled)",
        "or False",
        (f"{GUARDS}::test_stress_child_exiting_non_zero_after_done_fails", "tests/test_stress.py"),
        "a stress child exiting non-zero after its done event passes",
    ),
    Mutation(
        "diag-exit-after-done",
        "gputui/diag/verdicts/diagnosis.py",
        'if not self.done or child.get("returncode"):',
        "if not self.done:",
        (f"{GUARDS}::test_diagnosis_child_exiting_non_zero_after_done_fails", "tests/test_diag.py"),
        "a diagnosis child exiting non-zero after its done event passes",
    ),
    Mutation(
        "diag-leftover-unreported",
        "gputui/diag/session.py",
        '    left = leftover_message(result, "diagnosis")\n',
        "    left = None\n",
        (f"{CHILDREN}::test_a_survivor_is_reported_and_the_diagnosis_fails",),
        "processes that survived the kill are not reported",
    ),
    # ---- the kill path: the Processes tab's signals ----------------------------------------
    Mutation(
        "signal-os-kill",
        "gputui/control/signals.py",
        "            signal.pidfd_send_signal(pidfd, sig)\n",
        "            os.kill(pid, sig)\n",
        (GUARDS, "tests/test_signals.py"),
        "the signal goes by PID (kill(2)), not through the pidfd checked against the start time",
    ),
    Mutation(
        "signal-pid-reuse",
        "gputui/control/signals.py",
        "    if abs(started - identity.create_time) > START_TIME_TOLERANCE:\n        return result(",
        "    if False:\n        return result(",
        ("tests/test_signals.py",),
        "a PID now naming another process is signalled",
    ),
    Mutation(
        "signal-pid-1",
        "gputui/control/signals.py",
        "    if pid == 1:\n",
        "    if pid == -1:\n",
        ("tests/test_signals.py",),
        "PID 1 may be signalled",
    ),
    Mutation(
        "signal-self",
        "gputui/control/signals.py",
        "    if pid == os.getpid():\n",
        "    if pid == -1:\n",
        (GUARDS, "tests/test_signals.py"),
        "gputui may signal itself",
    ),
    Mutation(
        "signal-parent",
        "gputui/control/signals.py",
        "    if pid == os.getppid():\n",
        "    if pid == -1:\n",
        (GUARDS, "tests/test_signals.py"),
        "gputui may signal its parent (the shell)",
    ),
    Mutation(
        "signal-thread",
        "gputui/control/signals.py",
        'if os.path.exists(f"/proc/self/task/{pid}"):',
        "if False:",
        ("tests/test_signals.py",),
        "gputui may signal one of its own threads",
    ),
    Mutation(
        "signal-zombie",
        "gputui/control/signals.py",
        "    if status == psutil.STATUS_ZOMBIE:\n        return result(",
        "    if False:\n        return result(",
        ("tests/test_signals.py",),
        "a zombie is reported as signalled",
    ),
    # ---- issue 24 item 16: memory held by others, the start variables ---------------------
    Mutation(
        "diag-memory-threshold",
        "gputui/diag/probe/memory.py",
        "LOW_FREE_FRACTION = 0.10",
        "LOW_FREE_FRACTION = 0.02",
        (DIAG_MEMORY,),
        "a GPU with 3 of 80 GiB free passes",
    ),
    Mutation(
        "diag-memory-own-pid",
        "gputui/diag/probe/memory.py",
        'others = [p for p in (processes or []) if p.get("pid") not in own_pids]',
        "others = list(processes or [])",
        (DIAG_MEMORY,),
        "the probe's own process named as another holder",
    ),
    Mutation(
        "diag-memory-invisible-warns",
        "gputui/diag/probe/memory.py",
        "    if not low or not visible:",
        "    if not low:",
        (DIAG_MEMORY,),
        "a full GPU hidden by CUDA_VISIBLE_DEVICES warns",
    ),
    Mutation(
        "diag-memory-none-is-zero",
        "gputui/diag/probe/memory.py",
        'gib(used) if used is not None else "(memory not reported)"',
        "gib(used or 0)",
        (DIAG_MEMORY,),
        "a process whose memory NVML cannot report shows 0.0 GiB",
    ),
    Mutation(
        "diag-memory-unplanned",
        "gputui/diag/probe/main.py",
        "    memory.memory,  # before anything here starts CUDA: the probe holds no GPU memory yet\n",
        "",
        (DIAG_MEMORY, "tests/test_diag_probe.py::test_every_declared_check_is_planned_after_what_it_needs"),
        "the memory check never runs",
    ),
    Mutation(
        "diag-memory-after-cuda",
        "gputui/diag/probe/main.py",
        "    visibility.visibility,\n    memory.memory,",
        '    visibility.visibility,\n    ("start", system.start_cuinit),\n    memory.memory,',
        (f"{DIAG_MEMORY}::test_the_memory_check_runs_before_the_probe_starts_cuda",),
        "cuInit starts before the memory check (the probe's own context counted as used)",
    ),
    Mutation(
        "diag-start-unplanned",
        "gputui/diag/probe/main.py",
        "    environment.start_variables,  # before any CUDA call: a malformed value named, not a crash\n",
        "",
        (DIAG_STARTVARS,),
        "malformed start variables are never named",
    ),
    Mutation(
        "diag-start-fail-is-warn",
        "gputui/diag/probe/environment.py",
        '"FAIL" if stops else "WARN",',
        '"WARN",',
        (DIAG_STARTVARS,),
        "a PYTORCH_CUDA_ALLOC_CONF torch refuses is only a warning",
    ),
    Mutation(
        "diag-alloc-conf-bool",
        "gputui/startvars.py",
        '_PY_BOOL = _in(("True", "False"))',
        '_PY_BOOL = _in(("True", "False", "true", "false", "maybe"))',
        (DIAG_STARTVARS,),
        "expandable_segments:maybe passes as well formed",
    ),
    Mutation(
        "diag-alloc-conf-minimum",
        "gputui/startvars.py",
        '"max_split_size_mb": _alloc_size(20),',
        '"max_split_size_mb": _alloc_size(),',
        (f"{DIAG_STARTVARS}::test_alloc_conf_agrees_with_torchs_own_parser",),
        "max_split_size_mb below torch's minimum passes",
    ),
    Mutation(
        "diag-alloc-conf-brackets",
        "gputui/startvars.py",
        r'pairs = re.findall(r"[^,\[]*(?:\[[^\]]*\]?)?[^,]*", value)',
        'pairs = value.split(",")',
        (f"{DIAG_STARTVARS}::test_alloc_conf_agrees_with_torchs_own_parser",),
        "roundup_power2_divisions' [..] list split at its commas",
    ),
    Mutation(
        "diag-crash-no-suspects",
        "gputui/diag/verdicts/diagnosis.py",
        '+ (f"; suspects, set when it died: {suspects_text(suspects)}" if suspects else ""),',
        '+ "",',
        (DIAG_STARTVARS,),
        "a crash does not name the variables set",
    ),
    Mutation(
        "diag-crash-suspects-raw",
        "gputui/diag/verdicts/diagnosis.py",
        """f"{literal(name)}='{literal(value)}'\"""",
        """f"{name}='{value}'\"""",
        (DIAG_STARTVARS,),
        "a suspect's value reaches the terminal raw (escape sequences obeyed)",
    ),
    Mutation(
        "diag-crash-suspects-malformed-last",
        "gputui/diag/verdicts/diagnosis.py",
        "    return sorted(out, key=lambda t: (t[2] is None, t[0]))",
        "    return sorted(out, key=lambda t: t[0])",
        (DIAG_STARTVARS,),
        "a malformed suspect is listed among the rest, not first",
    ),
    Mutation(
        "diag-crash-suspects-gputui-own",
        "gputui/diag/runner.py",
        "start_suspects(self.env, skip=own_settings(self.env))",
        "start_suspects(self.env)",
        (DIAG_STARTVARS,),
        "gputui's own NVLink-multicast switches named as the user's suspects",
    ),
    Mutation(
        "diag-cli-raw-summary",
        "gputui/commands/diag.py",
        'lines = [f"{status:<4}  {literal(f.title)}: {literal(f.summary)}"]',
        'lines = [f"{status:<4}  {f.title}: {f.summary}"]',
        (DIAG_MEMORY,),
        "a process name with escapes reaches the terminal from `gputui diag`",
    ),
    Mutation(
        "diag-loaded-maps",
        "gputui/diag/probe/environment.py",
        'maps = read_text("/proc/self/maps") or ""',
        'maps = read_text("/proc/p/maps") or ""',
        ("tests/test_diag_probe.py::test_the_libraries_really_loaded_are_read_from_this_process",),
        "the libraries really loaded are read from a file that never exists (the bug 9d2057c made)",
    ),
    # ---- the kill path: the diagnosis and stress children -------------------------------
    Mutation(
        "runner-kill-reuse",
        "gputui/diag/reaper.py",
        "        if start_ticks(pid) != ticks:\n            return False\n",
        "",
        (f"{GUARDS}::test_kill_exact_refuses_another_start_time_and_gputui_itself",),
        "the runner kills a PID whatever process has it now",
    ),
    Mutation(
        "runner-kill-self",
        "gputui/diag/reaper.py",
        "    if pid <= 1 or pid == os.getpid():\n        return False\n",
        "",
        (f"{GUARDS}::test_kill_exact_refuses_another_start_time_and_gputui_itself",),
        "the runner may kill PID 1 or gputui itself",
    ),
    Mutation(
        "runner-no-orphans",
        "gputui/diag/runner.py",
        "if row.pgrp == proc.pid or (orphan and has_token(pid, self.token)):",
        "if row.pgrp == proc.pid:",
        (CHILDREN,),
        "a grandchild that left the group and lost its parent before a scan is not found",
    ),
    Mutation(
        "runner-no-subreaper",
        "gputui/diag/reaper.py",
        "libc.prctl(PR_SET_CHILD_SUBREAPER, 1 if on else 0, 0, 0, 0)",
        "libc.prctl(PR_SET_CHILD_SUBREAPER, 0, 0, 0, 0)",
        (CHILDREN,),
        "orphans go to init, out of reach",
    ),
    Mutation(
        "runner-subreaper-for-life",
        "gputui/diag/reaper.py",
        "            _set_subreaper(False)\n",
        "            pass\n",
        ("tests/test_children.py::test_after_a_diagnosis_a_daemonising_command_leaves_no_zombie",),
        "the child of a daemonising alert command stays gputui's zombie",
    ),
    Mutation(
        "runner-no-descendants",
        "gputui/diag/runner.py",
        "            todo += children.get(pid, [])\n",
        "",
        (CHILDREN,),
        "descendants outside the group are not tracked",
    ),
    Mutation(
        "runner-leftovers-unchecked",
        "gputui/diag/runner.py",
        "            result.leftover_pids = self._leftovers()\n",
        "            result.leftover_pids = []\n",
        (f"{CHILDREN}::test_a_survivor_is_reported_and_the_diagnosis_fails",),
        "survivors are never looked for",
    ),
    Mutation(
        "runner-unbounded-lines",
        "gputui/diag/runner.py",
        "raw = stream.readline(MAX_LINE_BYTES)",
        "raw = stream.readline()",
        (
            f"{CHILDREN}::test_an_endless_line_is_cut_and_what_was_dropped_is_counted",
            f"{CHILDREN}::test_the_reader_never_holds_more_than_a_line_cap_of_one_line",
        ),
        "one endless line of child output is read whole",
    ),
    Mutation(
        "runner-recursion",
        "gputui/diag/runner.py",
        "except (ValueError, RecursionError):",
        "except ValueError:",
        (f"{CHILDREN}::test_a_line_nested_too_deep_is_stray_output_not_a_crash",),
        "a deeply nested line kills the reader thread",
    ),
    Mutation(
        "command-signals-default",
        "gputui/commands/common.py",
        "            previous[sig] = signal.signal(sig, raise_it)\n",
        "            pass\n",
        (f"{CHILDREN}::test_the_command_killed_by_a_signal_kills_its_children",),
        "SIGTERM/SIGHUP end gputui diag/stress with their children left running",
    ),
    Mutation(
        "tui-sigterm-in-loop",
        "gputui/ui/app.py",
        "        for sig in (signal.SIGHUP, signal.SIGTERM):\n",
        "        for sig in (signal.SIGHUP,):\n",
        (
            "tests/test_terminal.py::test_sigterm_is_honoured_while_the_terminal_is_not_read",
            f"{CHILDREN}::test_leaving_the_tui_while_a_diagnosis_runs_kills_it",
        ),
        "SIGTERM handled only by the event loop (ignored while output blocks)",
    ),
    Mutation(
        "child-lifeline-no-pdeathsig",
        "gputui/rules.py",
        "            libc.prctl(PR_SET_PDEATHSIG, int(signal.SIGKILL), 0, 0, 0)",
        "            pass",
        (f"{LIFELINE}::test_a_child_dies_with_gputui_killed_by_sigkill",),
        "a stress run outlives a gputui killed by SIGKILL, loading the GPUs for its whole duration",
    ),
    Mutation(
        "child-lifeline-not-named",
        "gputui/diag/runner.py",
        "            self.env[PARENT_VAR] = str(os.getpid())",
        "            pass",
        (f"{LIFELINE}::test_a_child_dies_with_gputui_killed_by_sigkill",),
        "the child is never told which gputui to die with",
    ),
    Mutation(
        "child-lifeline-var-inherited",
        "gputui/rules.py",
        '    value = os.environ.pop(PARENT_VAR, "")',
        '    value = os.environ.get(PARENT_VAR, "")',
        (f"{LIFELINE}::test_a_child_dies_with_gputui_killed_by_sigkill",),
        "the child's own children (NCCL workers) inherit the variable and exit at their start",
    ),
    Mutation(
        "nccl-worker-untied",
        "gputui/diag/probe/compute.py",
        "    if not rules.tie_to_parent():  # the probe that started it is gone already\n        os._exit(0)\n",
        "",
        (f"{LIFELINE}::test_an_nccl_worker_whose_probe_is_gone_exits_at_once",),
        "an NCCL worker whose probe is gone runs on (torch import, a rendezvous nobody joins)",
    ),
    Mutation(
        "child-lifeline-parent-gone-runs-on",
        "gputui/diag/probe/protocol.py",
        "    if not rules.tie_to_parent():\n        os._exit(0)",
        "    rules.tie_to_parent()",
        (f"{LIFELINE}::test_a_child_whose_gputui_is_gone_already_exits_at_hello",),
        "a child whose gputui died before it asked runs on, unwatched",
    ),
    Mutation(
        "watch-interval-overwrites-global",
        "gputui/commands/watch.py",
        "        default=argparse.SUPPRESS,  # absent: the global -i/--interval stands",
        "        default=None,",
        ("tests/test_cli.py::test_the_global_interval_reaches_every_command",),
        "`gputui -i 5 watch` samples every second: the subcommand's default overwrites the global option",
    ),
    Mutation(
        "record-through-hard-link",
        "gputui/safefile.py",
        "        if os.fstat(fd).st_nlink > 1:",
        "        if False:",
        (f"{NAMED}::test_replace_never_writes_through_a_hard_link",),
        "`record --force` over a hard link planted in /tmp overwrites the file it names",
    ),
    # ---- saved reports --------------------------------------------------------------------
    Mutation(
        "report-follows-links",
        "gputui/safefile.py",
        "os.link(temp, target, follow_symlinks=False)  # EEXIST if anything is there",
        "os.replace(temp, target)",
        ("tests/test_diag_ui.py::test_save_never_follows_a_planted_symlink_and_is_private",),
        "a planted link or an existing report is replaced",
    ),
    Mutation(
        "report-world-readable",
        "gputui/safefile.py",
        "        os.fchmod(fd, 0o600)  # whatever the umask\n",
        "        os.fchmod(fd, 0o644)\n",
        ("tests/test_diag_ui.py::test_save_never_follows_a_planted_symlink_and_is_private",),
        "reports readable by every user",
    ),
    # ---- the cluster view against hostile exporters (issue 24, item 1) ------------------
    Mutation(
        "cluster-deadline-per-read",
        "gputui/cluster/wire.py",
        "            self.sock.settimeout(self.deadline.left())\n            got = self.sock.recv(READ)",
        "            self.sock.settimeout(self.deadline.seconds)\n            got = self.sock.recv(READ)",
        (HOSTILE,),
        "a per-read timeout again: a server dripping bytes is never cut off",
    ),
    Mutation(
        "cluster-max-headers",
        "gputui/cluster/wire.py",
        "for _ in range(MAX_HEADERS + 1):",
        "while True:",
        (HOSTILE,),
        "any number of headers is read",
    ),
    Mutation(
        "cluster-max-line",
        "gputui/cluster/wire.py",
        "MAX_LINE = 8192\n",
        "MAX_LINE = 1 << 24\n",
        (HOSTILE,),
        "header lines of any length are read",
    ),
    Mutation(
        "cluster-bad-chunk-ends",
        "gputui/cluster/wire.py",
        '                raise WireError("a bad chunk (its size line is not hexadecimal)")',
        "                return bytes(out)",
        (HOSTILE,),
        "a bad chunk is taken for the end of the body",
    ),
    Mutation(
        "cluster-short-body",
        "gputui/cluster/wire.py",
        '                raise WireError(f"the server closed the connection in the {what}")\n        out = bytes',
        "                break\n        out = bytes",
        (HOSTILE,),
        "a body shorter than its Content-Length is accepted",
    ),
    Mutation(
        "cluster-scrape-threads-joined",
        "gputui/cluster/sources.py",
        'threading.Thread(target=self._work, name="gputui-scrape", daemon=True)',
        'threading.Thread(target=self._work, name="gputui-scrape", daemon=False)',
        (f"{HOSTILE}::test_q_quits_at_once_while_a_target_drips_its_headers",),
        "quitting waits for a scrape of a slow target",
    ),
    Mutation(
        "cluster-message-long-url",
        "gputui/cluster/http.py",
        'return f"{short_url(self.url, room)}: {self.reason}"',
        'return f"{self.url}: {self.reason}"',
        (HOSTILE,),
        "a long URL pushes the reason out of sight",
    ),
    Mutation(
        "cluster-prometheus-error-url",
        "gputui/cluster/sources.py",
        "error=exc.reason if isinstance(exc, FetchError) else str(exc),",
        "error=str(exc),",
        (HOSTILE,),
        "Prometheus mode's reason is cut off at 80 columns",
    ),
    Mutation(
        "cluster-status-source-whole",
        "gputui/ui/cluster/lines.py",
        "room = max(12, width - line_len(tail))",
        "room = len(source)",
        (HOSTILE,),
        "a long source URL pushes the error's reason out of the status line",
    ),
    Mutation(
        "cluster-server-reason-raw",
        "gputui/cluster/http.py",
        "        phrase = http.HTTPStatus(status).phrase  # the standard words, not the server's\n"
        "    except ValueError:\n        phrase = _reason(server_said.strip())[:30]",
        "        phrase = server_said\n    except ValueError:\n        phrase = server_said",
        (HOSTILE,),
        "the server's own status words (controls, any length) reach the message",
    ),
    # ---- what the exporter writes (issue 24, item 3) -----------------------------------
    Mutation(
        "export-label-raw",
        "gputui/export/prometheus.py",
        "    return escaped(text)\n",
        "    return text\n",
        ("tests/test_export_labels.py",),
        "job, process and host labels reach /metrics raw (ESC, C1 CSI, OSC 52)",
    ),
    Mutation(
        "export-device-index",
        "gputui/export/prometheus.py",
        '"device": f"nvidia{d.minor_number}" if d.minor_number is not None else "",',
        '"device": f"nvidia{d.index}",',
        ("tests/test_export_labels.py",),
        "the device label is the index, not the minor number",
    ),
    Mutation(
        "export-device-guess",
        "gputui/export/prometheus.py",
        '"device": f"nvidia{d.minor_number}" if d.minor_number is not None else "",',
        '"device": f"nvidia{d.minor_number if d.minor_number is not None else d.index}",',
        ("tests/test_export_labels.py",),
        "an unknown minor number is passed off as the index",
    ),
    # ---- the drill-in and host identity (issue 24, item 9 and test gaps) ---------------
    Mutation(
        "cluster-drill-count",
        "gputui/ui/cluster/app.py",
        "process_count=g.process_count,",
        "process_count=len(g.procs),",
        ("tests/test_cluster_drill.py",),
        "the drill-in counts only listed processes: 0 in Prometheus mode",
    ),
    Mutation(
        "cluster-drill-hints",
        "gputui/ui/cluster/app.py",
        "hints=published_hints(g),",
        "hints=(),",
        ("tests/test_cluster_drill.py",),
        "the exporter's efficiency hints are dropped",
    ),
    Mutation(
        "cluster-prom-host-matcher",
        "gputui/cluster/sources.py",
        '            out.append(f"{self.labels.host}={promql_string(hostname)}")',
        "            pass",
        ("tests/test_cluster_drill.py",),
        "a host's view asks for every host behind its Prometheus target",
    ),
    Mutation(
        "cluster-host-label-config",
        "gputui/commands/cluster.py",
        "labels = LabelMap(**vars(cfg.labels))",
        "labels = LabelMap()",
        ("tests/test_cluster_drill.py",),
        "[cluster.labels] is ignored",
    ),
    Mutation(
        "cluster-direct-host-label",
        "gputui/cluster/sources.py",
        'hostname = next((s.labels[lm.host] for s in got if s.labels.get(lm.host)), "")',
        'hostname = next((s.labels["Hostname"] for s in got if s.labels.get("Hostname")), "")',
        ("tests/test_cluster_drill.py",),
        "direct mode reads dcgm-exporter's Hostname whatever the configured host label",
    ),
    # ---- snapshot documents --------------------------------------------------------------
    Mutation(
        "snapshot-host-bytes",
        "gputui/export/snapshot.py",
        '"memory.used": mib(host.mem_used),',
        '"memory.used": host.mem_used,',
        ("tests/test_snapshot_host.py",),
        "the host block's memory in bytes where the schema says MiB",
    ),
    Mutation(
        "snapshot-host-cpu-count-ours",
        "gputui/export/snapshot.py",
        '"cpu_count": len(host.per_cpu) or (os.cpu_count() if doc_source["kind"] == "live" else None),',
        '"cpu_count": len(host.per_cpu) or os.cpu_count(),',
        ("tests/test_snapshot_host.py",),
        "a replay reports this machine's CPU count as the recorded one",
    ),
    Mutation(
        "snapshot-host-uptime-minutes",
        "gputui/export/snapshot.py",
        '"uptime": host.uptime,',
        '"uptime": host.uptime / 60,',
        ("tests/test_snapshot_host.py",),
        "the host's uptime in minutes where the schema says seconds",
    ),
    Mutation(
        "json-fast-path-del",
        "gputui/untrusted.py",
        'if dumped.isascii() and "\\x7f" not in dumped:',
        "if dumped.isascii():",
        ("tests/test_snapshot_host.py",),
        "DEL passes the all-ASCII fast path raw into JSON documents",
    ),
    # ---- files in directories others can write; bad files (issue 24, items 4, 5, 8, 14) --
    Mutation(
        "files-owner-any",
        "gputui/safefile.py",
        "    return uid in (os.geteuid(), 0)\n",
        "    return True\n",
        (PRIVATE,),
        "another user's config, state or secret is used (the tests need root to chown)",
    ),
    Mutation(
        "files-others-writable",
        "gputui/safefile.py",
        "if mode & stat.S_IWOTH and not (is_dir and mode & stat.S_ISVTX):",
        "if False:",
        (PRIVATE,),
        "a file or directory anyone can write is trusted",
    ),
    Mutation(
        "files-sticky-refused",
        "gputui/safefile.py",
        "if mode & stat.S_IWOTH and not (is_dir and mode & stat.S_ISVTX):",
        "if mode & stat.S_IWOTH:",
        (PRIVATE,),
        "a sticky directory like /tmp refuses everything below it",
    ),
    Mutation(
        "files-group-writable",
        "gputui/safefile.py",
        "if mode & stat.S_IWGRP and not _private_group(st.st_gid, st.st_uid):",
        "if False:",
        (PRIVATE,),
        "a file its (shared) group can write is trusted",
    ),
    Mutation(
        "files-dirs-unchecked",
        "gputui/safefile.py",
        "            self.problem = _dir_problem(self.where, os.fstat(self.fd))\n",
        "            pass\n",
        (PRIVATE,),
        "the directories on the way are not checked",
    ),
    Mutation(
        "files-read-ignores-dir",
        "gputui/safefile.py",
        "        if walk.problem is not None:\n            raise Refused(path, walk.problem)\n        if not stat",
        "        if not stat",
        (PRIVATE,),
        "a config in a world-writable $XDG_CONFIG_HOME is read (its alert_cmd runs)",
    ),
    Mutation(
        "files-write-ignores-dir",
        "gputui/safefile.py",
        "        if walk.problem is not None:\n            raise Refused(path, walk.problem)\n        tmp =",
        "        tmp =",
        (PRIVATE,),
        "saving follows a link planted in a world-writable $XDG_STATE_HOME",
    ),
    Mutation(
        "files-state-follows-link",
        "gputui/safefile.py",
        "with _Walk(path, create=False, follow_last=follow_symlinks) as walk:",
        "with _Walk(path, create=False, follow_last=True) as walk:",
        (PRIVATE, "tests/test_state.py"),
        "the state file is read through a symbolic link",
    ),
    Mutation(
        "files-state-int-unbounded",
        "gputui/state.py",
        'json.loads(raw.decode("utf-8"), parse_int=_bounded_int)',
        'json.loads(raw.decode("utf-8"))',
        (BAD_FILES,),
        "a 5000-digit integer in the state file: a ValueError traceback at every start",
    ),
    Mutation(
        "files-toml-deep",
        "gputui/toml_bounds.py",
        "if depth > MAX_NESTING:",
        "if False:",
        (BAD_FILES,),
        "a deeply nested config reaches tomllib's recursion",
    ),
    Mutation(
        "files-toml-long-number",
        "gputui/toml_bounds.py",
        'len(token) - token.count("_") > MAX_NUMBER_CHARS',
        "False",
        (BAD_FILES,),
        "a 5000-digit number reaches int() (ValueError), a 400-digit one float() (OverflowError)",
    ),
    Mutation(
        "files-toml-strings-counted",
        "gputui/toml_bounds.py",
        """    r"|'[^'\\n]*'?"  # literal string\n""",
        "",
        (BAD_FILES,),
        "brackets inside a string count as nesting",
    ),
    Mutation(
        "files-config-key-raw",
        "gputui/config.py",
        "    text = escaped(text)\n    return text if len(text) <= limit",
        "    return text if len(text) <= limit",
        (BAD_FILES,),
        "escapes in config keys and values reach stderr raw",
    ),
    Mutation(
        "files-recording-name-raw",
        "gputui/telemetry/recording.py",
        'super().__init__(escaped(f"{where}: {message}"))',
        'super().__init__(f"{where}: {message}")',
        (BAD_FILES,),
        "a recording's file name with escapes reaches stderr raw",
    ),
    Mutation(
        "files-diag-pipe-thread",
        "gputui/commands/diag.py",
        "                out(format_finding(f, colour))\n",
        "                print(format_finding(f, colour), flush=True)\n",
        ("tests/test_broken_pipe.py::test_diag_stops_quietly_when_the_reader_leaves",),
        "`gputui diag | head -1`: BrokenPipeError tracebacks from the runner's threads",
    ),
    Mutation(
        "files-cli-pipe",
        "gputui/cli.py",
        "    except BrokenPipeError:  # `gputui ... | head -1`",
        "    except ZeroDivisionError:  # `gputui ... | head -1`",
        ("tests/test_broken_pipe.py",),
        "`gputui --print-config | head -1`: a traceback and 'Exception ignored'",
    ),
    Mutation(
        "files-global-replay-ignored",
        "gputui/commands/common.py",
        "default=argparse.SUPPRESS,  # absent: the global",
        "default=None,  # absent: the global",
        ("tests/test_cli_honesty.py",),
        "`gputui --replay F snapshot` silently reads NVML",
    ),
    # ---- files named on the command line: targets file, recordings ----------------------
    Mutation(
        "named-targets-follows-link",
        "gputui/cluster/targets.py",
        "text = read_private_text(path, MAX_TARGETS_FILE_BYTES, follow_symlinks=False)",
        "text = read_private_text(path, MAX_TARGETS_FILE_BYTES, follow_symlinks=True)",
        (NAMED,),
        "--targets-file reads through a symbolic link",
    ),
    Mutation(
        "named-targets-no-line",
        "gputui/cluster/targets.py",
        '        if problem:\n            raise ValueError(escaped(f"{path}:{lineno}: {problem}"))',
        '        if False:\n            raise ValueError(escaped(f"{path}:{lineno}: {problem}"))',
        (NAMED,),
        "a bad target in --targets-file is reported without its file and line",
    ),
    Mutation(
        "named-data-fifo-opened",
        "gputui/safefile.py",
        "    _regular(path, os.stat(path))\n    fd = os.open(path, _DATA_READ_FLAGS)\n"
        "    return _regular_blocking(path, fd)\n",
        "    fd = os.open(path, _DATA_READ_FLAGS)\n    os.set_blocking(fd, True)\n    return fd\n",
        (NAMED,),
        "--replay FIFO or /dev/zero is opened and read (a hang, or 8 MiB of zeros)",
    ),
    Mutation(
        "named-recording-line-unbounded",
        "gputui/telemetry/recording.py",
        "line = f.readline(MAX_LINE_CHARS + 1)",
        "line = f.readline()",
        ("tests/test_hostile_input.py",),
        "a recording's line is read whole before its length is checked (a gzip bomb fills memory)",
    ),
    Mutation(
        "named-recording-total-unbounded",
        "gputui/telemetry/recording.py",
        "if total > MAX_TOTAL_CHARS:",
        "if False:",
        (NAMED,),
        "a gzip bomb of many short lines is read to the end (memory, or hours)",
    ),
    Mutation(
        "named-record-checks-through-link",
        "gputui/safefile.py",
        "        st = os.lstat(path)\n    except FileNotFoundError:\n        pass\n",
        "        st = os.stat(path)\n    except FileNotFoundError:\n        pass\n",
        (NAMED,),
        "`gputui record OUT` checks what a link planted at OUT points to, not the link",
    ),
    Mutation(
        "named-record-exists-follows",
        "gputui/commands/record.py",
        "if os.path.lexists(path) and not args.force:",
        "if path.exists() and not args.force:",
        (f"{NAMED}::test_record_refuses_a_planted_link_before_touching_the_gpu",),
        "`gputui record OUT`: a dangling link at OUT counts as no file",
    ),
    Mutation(
        "named-tls-ca-plain-open",
        "gputui/cluster/http.py",
        "cadata = read_private_text(self.ca_file, MAX_TLS_FILE_BYTES) if self.ca_file else None",
        "cadata = open(self.ca_file).read() if self.ca_file else None",
        (f"{NAMED}::test_a_tls_file_that_is_not_a_safe_regular_file_is_refused_at_once",),
        "[cluster] tls_ca_file read with open(): a FIFO hangs, a CA others could write is trusted",
    ),
    # ---- GPM figures out of range (issue 24 item 6) -------------------------------------
    Mutation(
        "gpm-range-percent",
        "gputui/telemetry/gpm_check.py",
        'ok = 0.0 <= v <= 100.0 if m.unit == "%" else',
        'ok = True if m.unit == "%" else',
        ("tests/test_gpm_range.py",),
        "an activity of -50 % or 1e18 % is drawn and exported",
    ),
    Mutation(
        "gpm-range-rate",
        "gputui/telemetry/gpm_check.py",
        "else (math.isfinite(v) and v >= 0)",
        "else True",
        ("tests/test_gpm_range.py",),
        "a negative or infinite byte rate is published",
    ),
    Mutation(
        "gpm-range-recording",
        "gputui/telemetry/recording.py",
        "    return _checked_gpm(snap)\n",
        "    return snap\n",
        ("tests/test_gpm_range.py",),
        "a recording's impossible GPM figures reach the cards, the hints and the exporter",
    ),
    Mutation(
        "gpm-range-live",
        "gputui/telemetry/nvml/gpm.py",
        "return checked(GpmSample(window=round(window, 3), gpu_instance_id=gi, **values))",
        "return GpmSample(window=round(window, 3), gpu_instance_id=gi, **values)",
        ("tests/test_gpm_range.py",),
        "NVML's impossible GPM figures are shown",
    ),
    Mutation(
        "gpm-range-cluster",
        "gputui/cluster/model.py",
        'fields["gpm"] = checked(GpmSample(**gpm))',
        'fields["gpm"] = GpmSample(**gpm)',
        ("tests/test_gpm_range.py",),
        "a scraped exporter's impossible GPM ratios reach the cluster view",
    ),
    # ---- efficiency hints at their thresholds (issue 24) ---------------------------------
    Mutation(
        "hint-busy-strict",
        "gputui/telemetry/hints.py",
        "util >= cfg.busy_util",
        "util > cfg.busy_util",
        ("tests/test_hint_boundaries.py",),
        "fp32_no_tensor misses a GPU exactly at the busy threshold",
    ),
    Mutation(
        "hint-tensor-idle-inclusive",
        "gputui/telemetry/hints.py",
        "tensor < cfg.tensor_idle_below",
        "tensor <= cfg.tensor_idle_below",
        ("tests/test_hint_boundaries.py",),
        "tensor cores exactly at the limit count as idle",
    ),
    Mutation(
        "hint-fp32-strict",
        "gputui/telemetry/hints.py",
        "fp32 >= cfg.fp32_active_above",
        "fp32 > cfg.fp32_active_above",
        ("tests/test_hint_boundaries.py",),
        "FP32 exactly at the threshold does not count as the work",
    ),
    Mutation(
        "hint-tiny-min-util-strict",
        "gputui/telemetry/hints.py",
        "util >= cfg.tiny_kernels_min_util",
        "util > cfg.tiny_kernels_min_util",
        ("tests/test_hint_boundaries.py",),
        "tiny_kernels misses utilization exactly at its minimum",
    ),
    Mutation(
        "hint-tiny-ratio-inclusive",
        "gputui/telemetry/hints.py",
        "sm < cfg.tiny_kernels_sm_ratio * util",
        "sm <= cfg.tiny_kernels_sm_ratio * util",
        ("tests/test_hint_boundaries.py",),
        "SM activity exactly at the ratio reads as tiny kernels",
    ),
    Mutation(
        "hint-dram-strict",
        "gputui/telemetry/hints.py",
        "dram >= cfg.dram_bound_above",
        "dram > cfg.dram_bound_above",
        ("tests/test_hint_boundaries.py",),
        "DRAM exactly at the threshold is not memory-bound",
    ),
    Mutation(
        "hint-idle-minutes-strict",
        "gputui/telemetry/hints.py",
        "idle_seconds >= cfg.idle_minutes * 60",
        "idle_seconds > cfg.idle_minutes * 60",
        ("tests/test_hint_boundaries.py",),
        "idle_memory waits past its idle time",
    ),
    Mutation(
        "hint-idle-util-strict",
        "gputui/telemetry/hints.py",
        "g.gpu_util <= max_util",
        "g.gpu_util < max_util",
        ("tests/test_hint_boundaries.py",),
        "utilization exactly at idle_max_util does not count as idle",
    ),
    Mutation(
        "hint-idle-memory-strict",
        "gputui/telemetry/hints.py",
        "g.mem_used >= min_memory",
        "g.mem_used > min_memory",
        ("tests/test_hint_boundaries.py",),
        "memory exactly at idle_min_memory_mib does not count as held",
    ),
    Mutation(
        "hint-none-is-zero",
        "gputui/telemetry/hints.py",
        "tensor, fp32, sm, dram = w.tensor_active, w.fp32_active, w.sm_active, w.dram_active",
        "tensor, fp32, sm, dram = w.tensor_active or 0.0, w.fp32_active, w.sm_active or 0.0, w.dram_active",
        ("tests/test_hint_boundaries.py",),
        "a figure NVML did not give reads as 0: hints fire on missing evidence",
    ),
    # ---- gputui snapshot --json and GPM (issue 24 item 15) ------------------------------
    Mutation(
        "snapshot-json-waits-for-nothing",
        "gputui/commands/snapshot.py",
        "if names else sel.reads\n",
        "if names else []\n",
        ("tests/test_snapshot_gpm.py",),
        "the whole JSON document never waits for a GPM window (every gpm.* null on an H100)",
    ),
    Mutation(
        "snapshot-gpm-no-second-pass",
        "gputui/commands/snapshot.py",
        "or not source.gpm_window_pending():",
        "or True:",
        ("tests/test_snapshot_gpm.py",),
        "the one-shot returns before the GPM window closes",
    ),
    Mutation(
        "snapshot-gpm-null-as-measured",
        "gputui/export/snapshot_fields.py",
        "        return c.no_window or NO_WINDOW_LIVE\n",
        "        return None\n",
        ("tests/test_snapshot_gpm.py", "tests/test_snapshot_cmd.py"),
        'gpm.* null beside a null gpm.unavailable: the schema\'s "measured"',
    ),
    # ---- the monitor's keys and remembered settings (issue 24 items 10-13) ---------------
    Mutation(
        "nogpu-demo-line-unwrapped",
        "gputui/ui/overview/widgets.py",
        "for k, chunk in enumerate(textwrap.wrap(text, inner)):  # at words, as `para`",
        "for k, chunk in enumerate([text]):",
        ("tests/test_keys_and_settings.py",),
        "the no-GPU panel's demo line is cut mid-word at 80 columns",
    ),
    Mutation(
        "keys-g-filters-gpu",
        "gputui/ui/processes/process_list.py",
        'Binding("f", "gpu_filter(1)"',
        'Binding("g", "gpu_filter(1)"',
        ("tests/test_keys_and_settings.py",),
        "g filters by GPU on the Processes tab instead of opening Diagnostics",
    ),
    Mutation(
        "replay-offers-signals",
        "gputui/ui/processes/process_list.py",
        "            return not self.readonly and self.signals_possible\n",
        "            return not self.readonly\n",
        ("tests/test_keys_and_settings.py", "tests/test_processes.py"),
        "a replay's footer advertises T K I and m, which can do nothing there",
    ),
    Mutation(
        "picker-ticks-by-colour-only",
        "gputui/ui/overview/chart_picker.py",
        "(TICKED if ticked else UNTICKED)",
        "TICKED",
        ("tests/test_keys_and_settings.py",),
        "ticked and unticked charts look alike but for colour",
    ),
    Mutation(
        "overview-esc-keeps-narrowing",
        "gputui/ui/overview/widgets.py",
        "    def action_unselect(self) -> None:\n        self._select(None)",
        "    def action_unselect(self) -> None:\n        pass",
        ("tests/test_keys_and_settings.py",),
        "esc does not undo a card's narrowing of the process list",
    ),
    Mutation(
        "filters-carried-across-runs",
        "gputui/state.py",
        "    return Filters(mine=filters.mine, compute_only=filters.compute_only)",
        "    return filters",
        ("tests/test_keys_and_settings.py",),
        "a GPU filter set on one machine hides rows in the next run's recording or demo",
    ),
    Mutation(
        "filters-kept-for-another-machine",
        "gputui/ui/processes/process_list.py",
        "if self.machine is not None and machine != self.machine:",
        "if False:",
        ("tests/test_keys_and_settings.py",),
        "the demo opened in a run keeps the other machine's GPU filter and search",
    ),
    # ---- the whole-job signal (issue 24) ----------------------------------------------------
    Mutation(
        "job-session-not-leader",
        "gputui/control/jobs.py",
        "if sid == root.pid and sid not in ours:",
        "if sid not in ours:",
        (f"{JOB_GUARDS}::test_a_launcher_that_does_not_lead_its_session_leaves_the_shells_session_alone",),
        "a launcher inside a shell's session sweeps the shell's whole session",
    ),
    Mutation(
        "job-group-not-leader",
        "gputui/control/jobs.py",
        "if pgid == root.pid and pgid not in ours:",
        "if pgid not in ours:",
        (f"{JOB_GUARDS}::test_a_launcher_that_does_not_lead_its_session_leaves_the_shells_session_alone",),
        "a launcher inside a shell's process group sweeps the shell's group",
    ),
    Mutation(
        "job-launcher-reuse",
        "gputui/control/jobs.py",
        "if ident is None or abs(ident.create_time - root.create_time) > START_TIME_TOLERANCE:",
        "if ident is None:",
        (f"{JOB_GUARDS}::test_a_launcher_whose_pid_is_now_another_process_lists_nothing",),
        "the job of whatever process now has the launcher's PID is listed",
    ),
    Mutation(
        "job-ancestors-members",
        "gputui/control/jobs.py",
        "        if pid in ancestors:\n",
        "        if False:\n",
        (f"{JOB_GUARDS}::test_gputui_and_its_ancestors_are_never_members_nor_signalled",),
        "gputui's ancestors are left out only by chance (not said why)",
    ),
    Mutation(
        "signal-ancestors",
        "gputui/control/signals.py",
        "    if pid in own_ancestors():\n",
        "    if False:\n",
        (f"{JOB_GUARDS}::test_gputui_and_its_ancestors_are_never_members_nor_signalled",),
        "gputui's grandparent (the shell under sudo gputui) can be signalled",
    ),
    Mutation(
        "job-other-users",
        "gputui/control/jobs.py",
        "if owner is None or uids != {owner}:",
        "if owner is None:",
        (f"{JOB_GUARDS}::test_another_users_processes_in_an_ordinary_users_job_are_left_out",),
        "root's processes in an ordinary user's job are signalled with it",
    ),
    Mutation(
        "job-pin-failed-shown",
        "gputui/ui/processes/signals.py",
        '                self.notify(clean(refused.message), severity="warning", timeout=8, markup=False)\n'
        "                self._record([refused], time.monotonic())\n                continue\n",
        '                self.notify(clean(refused.message), severity="warning", timeout=8, markup=False)\n'
        "                self._record([refused], time.monotonic())\n",
        (f"{JOB_GUARDS}::test_a_member_whose_pin_failed_is_not_shown_as_a_target",),
        "a member whose pin failed is still a target in the confirmation",
    ),
    # ---- job attribution (issue 24) ------------------------------------------------------------
    Mutation(
        "attribution-unchecked",
        "gputui/telemetry/host/jobs.py",
        "        if root is not None and depth:\n",
        "        if False:\n",
        (ATTRIBUTION,),
        "a user's own cgroup named slurm/uid_0/job_555 reads as root's job 555",
    ),
    Mutation(
        "attribution-any-owner",
        "gputui/telemetry/host/cgroup_trust.py",
        "if not stat.S_ISDIR(st.st_mode) or st.st_uid not in owners:",
        "if not stat.S_ISDIR(st.st_mode):",
        (ATTRIBUTION,),
        "a cgroup directory of any owner is believed",
    ),
    Mutation(
        "attribution-dotdot",
        "gputui/telemetry/host/cgroup_trust.py",
        '        if seg in (".", ".."):\n',
        "        if False:\n",
        (ATTRIBUTION,),
        "a path outside gputui's cgroup namespace is followed out of the hierarchy",
    ),
    Mutation(
        "attribution-read-job-unchecked",
        "gputui/telemetry/host/jobs.py",
        "job = job_from_cgroup(f.read(), CGROUP_ROOT, uid)",
        "job = job_from_cgroup(f.read())",
        (ATTRIBUTION,),
        "the live view parses cgroup paths without checking their owners",
    ),
    Mutation(
        "attribution-label-unmarked",
        "gputui/telemetry/host/jobs.py",
        'return _label(job) + _SOURCE_MARK.get(job.source, "")',
        "return _label(job)",
        (ATTRIBUTION,),
        "an unverified job has the real job's label (one group, one filter)",
    ),
    Mutation(
        "attribution-exporter-labels",
        "gputui/telemetry/host/jobs.py",
        "        job = None  # a user's lookalike path or own container: never published as root's\n",
        "        pass\n",
        (ATTRIBUTION,),
        "an unverified job is published with the real job's slurm_job/pod labels",
    ),
    Mutation(
        "attribution-unverified-wins",
        "gputui/telemetry/host/jobs.py",
        "return (verified(job), _RANK[job.kind], trusted(job))",
        "return (False, _RANK[job.kind], False)",
        (ATTRIBUTION,),
        "an unverified claim on one cgroup line beats the verified job on another",
    ),
    Mutation(
        "attribution-unicode-job-digits",
        "gputui/telemetry/host/jobs.py",
        r'_SLURM_JOB = re.compile(r"job_([0-9]+)")',
        r'_SLURM_JOB = re.compile(r"job_(\d+)")',
        (ATTRIBUTION,),
        "job_５５５ in a cgroup path reads as a Slurm job",
    ),
    Mutation(
        "attribution-unicode-env-digits",
        "gputui/telemetry/host/jobs.py",
        r'_DIGITS = re.compile(r"[0-9]+")',
        r'_DIGITS = re.compile(r"\d+")',
        (ATTRIBUTION,),
        "SLURM_JOB_ID in fullwidth digits is accepted",
    ),
    Mutation(
        "attribution-array-dropped",
        "gputui/telemetry/host/jobs.py",
        'return Job("slurm", slurm_id, step=step, array=array, source="environment")',
        'return Job("slurm", slurm_id, step=step, source="environment")',
        (f"{ATTRIBUTION}::test_an_array_task_from_the_environment_alone",),
        "a Slurm array task named only by the environment is lost",
    ),
    # ---- container attribution (issue 24's rule for containers) ---------------------------
    Mutation(
        "container-scope-unchecked",
        "gputui/telemetry/host/jobs.py",
        "return Job(scoped[0], scoped[1]), i + 1",
        "return Job(scoped[0], scoped[1]), 0",
        (ATTRIBUTION,),
        "a user's own docker-<id>.scope reads as root's container of that id",
    ),
    Mutation(
        "container-cgroupfs-unchecked",
        "gputui/telemetry/host/jobs.py",
        'return Job("docker" if seg == "docker" else "podman", nxt), i + 2',
        'return Job("docker" if seg == "docker" else "podman", nxt), 0',
        (ATTRIBUTION,),
        "a user's own docker/<id> directory (cgroupfs driver) reads as root's container",
    ),
    Mutation(
        "container-unicode-hex",
        "gputui/telemetry/host/jobs.py",
        r'_HEX64 = re.compile(r"[0-9a-f]{64}")',
        r'_HEX64 = re.compile(r"[\da-f]{64}")',
        (ATTRIBUTION,),
        "a container id in fullwidth digits reads as a container",
    ),
    Mutation(
        "container-names-for-lookalikes",
        "gputui/telemetry/host/jobs.py",
        "    if job is None or not trusted(job):\n        return job\n",
        "    if job is None:\n        return job\n",
        (ATTRIBUTION,),
        "a lookalike container borrows the real container's name from root's runtime files",
    ),
    Mutation(
        "rootless-any-process",
        "gputui/telemetry/host/cgroup_trust.py",
        "if m is None or int(m.group(1)) != uid:",
        "if m is None:",
        (ATTRIBUTION,),
        "a process of another user in a user's subtree reads as that user's rootless container",
    ),
    Mutation(
        "rootless-any-owner",
        "gputui/telemetry/host/cgroup_trust.py",
        "owners = {user[1]} if user is not None and k >= user[0] else TRUSTED_OWNERS",
        "owners = {st.st_uid} if user is not None and k >= user[0] else TRUSTED_OWNERS",
        (ATTRIBUTION,),
        "a user@UID.service subtree owned by someone else reads as UID's rootless container",
    ),
    Mutation(
        "rootless-prefix-any-owner",
        "gputui/telemetry/host/cgroup_trust.py",
        "owners = {user[1]} if user is not None and k >= user[0] else TRUSTED_OWNERS",
        "owners = {user[1], *TRUSTED_OWNERS} if user is not None else TRUSTED_OWNERS",
        (ATTRIBUTION,),
        "a user@UID.service the user made themselves (not systemd's) counts as their subtree",
    ),
    Mutation(
        "rootless-unicode-uid",
        "gputui/telemetry/host/cgroup_trust.py",
        r'_USER_SERVICE = re.compile(r"user@([0-9]+)\.service")',
        r'_USER_SERVICE = re.compile(r"user@(\d+)\.service")',
        (ATTRIBUTION,),
        "user@１０００.service (fullwidth digits, int() reads 1000) is user 1000's subtree",
    ),
    Mutation(
        "rootless-not-only-containers",
        "gputui/telemetry/host/jobs.py",
        "elif job.kind in CONTAINER_KINDS and rootless(",
        "elif rootless(",
        (ATTRIBUTION,),
        "a Slurm job or pod in a user's own subtree reads as verified (rootless)",
    ),
    Mutation(
        "rootless-effective-uid",
        "gputui/telemetry/host/jobs.py",
        "return int(fields[0]) if fields and _DIGITS.fullmatch(fields[0]) else None",
        "return int(fields[1]) if len(fields) > 1 and _DIGITS.fullmatch(fields[1]) else None",
        (ATTRIBUTION,),
        "the process's effective uid, not its real one, decides whose rootless container it is",
    ),
    Mutation(
        "rootless-label-unmarked",
        "gputui/telemetry/host/jobs.py",
        "return f\"{_label(job)} (rootless, user {job.owner or '?'})\"",
        "return _label(job)",
        (ATTRIBUTION,),
        "a user's rootless container has root's container's label (one group, one filter)",
    ),
    Mutation(
        "rootless-published",
        "gputui/telemetry/host/jobs.py",
        'UNPUBLISHED = frozenset({"unverified", "rootless"})',
        'UNPUBLISHED = frozenset({"unverified"})',
        (ATTRIBUTION,),
        "a user's rootless container is published under root's container label",
    ),
    Mutation(
        "rootless-beats-root",
        "gputui/telemetry/host/jobs.py",
        "return (verified(job), _RANK[job.kind], trusted(job))",
        "return (verified(job), _RANK[job.kind])",
        (ATTRIBUTION,),
        "a rootless claim on one cgroup line ties with root's container on another (first wins)",
    ),
    # ---- job health outside the TUI (issue 26) -----------------------------------------
    Mutation(
        "job-stuck-alert-ignores-culprit",
        "gputui/telemetry/health_report.py",
        'STUCK_VERDICTS = ("stuck", "culprit", "exited", "mismatch", "all_wait", "stalled", "nccl")',
        'STUCK_VERDICTS = ("stuck",)',
        ("tests/test_job_stuck_alert.py", "tests/test_export_health.py"),
        "the job_stuck alert and gputui_job_stuck miss the rank the others wait for",
    ),
    Mutation(
        "job-stuck-alert-off",
        "gputui/telemetry/alerts.py",
        "        if cfg.job_stuck.enabled:\n            report =",
        "        if False:\n            report =",
        ("tests/test_job_stuck_alert.py",),
        "the job_stuck rule is never evaluated",
    ),
    Mutation(
        "snapshot-verdict-dropped",
        "gputui/export/health_json.py",
        '        "verdict": verdict,',
        '        "verdict": None,',
        ("tests/test_snapshot_health.py",),
        "snapshot --processes --json never carries the job's verdict",
    ),
    Mutation(
        "snapshot-one-shot-claims",
        "gputui/export/health_json.py",
        '"note": NEEDS_WATCHING if v is None and watched < cfg.stuck_seconds else None,',
        '"note": None,',
        ("tests/test_snapshot_health.py",),
        "a one-shot snapshot no longer says it needs watching over time",
    ),
    Mutation(
        "snapshot-replay-history-dropped",
        "gputui/commands/snapshot.py",
        "            for snap in source.ticks[: source.position + 1]:",
        "            for snap in source.ticks[:0]:",
        ("tests/test_snapshot_health.py",),
        "a replayed snapshot judges only its own tick (no verdict ever)",
    ),
    Mutation(
        "diag-pid-environment-ignored",
        "gputui/commands/diag.py",
        "            base_env=target.env,",
        "            base_env=None,",
        ("tests/test_diag_pid.py",),
        "diag --pid diagnoses with gputui's environment while saying it used the process's",
    ),
    Mutation(
        "diag-pid-takes-every-variable",
        "gputui/diag/target.py",
        "        if k in TAKEN_NAMES or k.startswith(TAKEN_PREFIXES):",
        "        if True:",
        ("tests/test_diag_pid.py",),
        "diag --pid copies every variable of the process (secrets included) into the diagnosis",
    ),
    Mutation(
        "diag-pid-non-python-accepted",
        "gputui/diag/target.py",
        "    if not PYTHON_NAME.match(os.path.basename(exe)):",
        "    if False:",
        ("tests/test_diag_pid.py",),
        "a non-Python PID is run as an interpreter",
    ),
    Mutation(
        "diag-pid-argv0-trusted",
        "gputui/diag/argv0.py",
        "    if found is not None and _same(found, want):",
        "    if found is not None and os.path.exists(found):",
        ("tests/test_diag_venv.py",),
        "a process's argv[0] is run without checking it is the same file as /proc/PID/exe",
    ),
    Mutation(
        "diag-pid-env-python-trusted",
        "gputui/diag/argv0.py",
        "            if _same(python, want):",
        "            if os.path.exists(python):",
        ("tests/test_diag_venv.py",),
        "a bin/python of the process's VIRTUAL_ENV / CONDA_PREFIX is run without the same-file check",
    ),
    Mutation(
        "diag-pid-other-root-resolved",
        "gputui/diag/argv0.py",
        "    if not same_root(pid):",
        "    if False:",
        ("tests/test_diag_venv.py",),
        "a container's argv[0] is resolved against our own filesystem",
    ),
    Mutation(
        "job-energy-shared-counted",
        "gputui/telemetry/job_energy.py",
        "            if gpu in shared:\n                continue\n",
        "",
        ("tests/test_job_energy.py",),
        "a GPU shared with another process is counted as the job's energy",
    ),
    Mutation(
        "job-stuck-label-raw",
        "gputui/export/prometheus.py",
        "        super().add_sample(name, {k: label_value(v) for k, v in labels.items()}, value, *args, **kw)",
        "        super().add_sample(name, dict(labels), value, *args, **kw)",
        ("tests/test_export_health.py",),
        "a hostile job id goes into the gputui_job_stuck label raw",
    ),
    Mutation(
        "tui-stacks-in-replay",
        "gputui/ui/processes/job_view.py",
        "    if plist.signals_possible:  # this machine's processes (read-only and serve sessions too)",
        "    if True:",
        ("tests/test_tui_health.py",),
        "P in a replay runs py-spy on whatever local process has a recorded PID",
    ),
    Mutation(
        "tui-serve-g-diagnoses-the-process",
        "gputui/ui/diagnostics/choose.py",
        "    if ctx.serve_session or ctx.diag_python:",
        "    if False:",
        ("tests/test_tui_health.py",),
        "g in a serve session runs the interpreter of the process the browser selected",
    ),
    Mutation(
        "tui-replay-g-diagnoses-a-local-pid",
        "gputui/ui/diagnostics/choose.py",
        "        if not ctx.sources.local_processes:",
        "        if False:",
        ("tests/test_tui_health.py",),
        "g on a replay's process diagnoses whatever local process has that PID",
    ),
    Mutation(
        "tui-verdict-not-shown",
        "gputui/ui/processes/process_list.py",
        "        lines += verdict_lines(self.hub.health_report(), pids, width)",
        "        pass",
        ("tests/test_tui_health.py",),
        "the Overview's process list does not say which rank the job waits for",
    ),
    Mutation(
        "tui-alerts-without-health-config",
        "gputui/ui/app.py",
        "            alerts=AlertEngine(self.config.alerts, self.config.hints, self.config.health),",
        "            alerts=AlertEngine(self.config.alerts, self.config.hints),",
        ("tests/test_tui_health.py",),
        "the TUI's job_stuck alert ignores [health] (its threshold is the default's)",
    ),
    # ---- job health: a rank's CPU over a window (issue 26) ------------------------------
    Mutation(
        "health-unverified-job-merged",
        "gputui/telemetry/health.py",
        '        if j.source != "cgroup":  # not root\'s word for it: never merged with the real job',
        "        if False:",
        ("tests/test_health.py::test_a_job_not_verified_by_its_cgroup_is_never_merged_into_the_real_one",),
        "a user's lookalike Slurm job (unverified, env or rootless) joins the real job's ranks and verdict",
    ),
    Mutation(
        "health-cpu-window-ignored",
        "gputui/telemetry/health.py",
        "        cpu = self._cpu_mean(ident, p.cpu_percent, ts)",
        "        cpu = p.cpu_percent",
        (f"{CPU_WINDOW}::test_one_noisy_tick_mid_wait_does_not_restart_the_clock",),
        "one tick's CPU decides 'blocked': one noisy tick restarts the wait (the verdict rarely comes at 1 s)",
    ),
    Mutation(
        "health-cpu-none-as-zero",
        "gputui/telemetry/health.py",
        "        if cpu is not None:\n            times.append(ts)\n            values.append(cpu)",
        "        times.append(ts)\n        values.append(cpu or 0.0)",
        (f"{CPU_WINDOW}::test_an_unknown_cpu_is_not_read_as_0_percent",),
        "ticks without a CPU figure count as 0 %: an unknown rank reads as blocked",
    ),
    Mutation(
        "health-cpu-window-never-empties",
        "gputui/telemetry/health.py",
        "        while times and times[0] < ts and times[0] <= edge:",
        "        while False:",
        (CPU_WINDOW,),
        "the mean runs since the rank was first seen: a rank that computed once never waits again",
    ),
    Mutation(
        "health-cpu-window-shared-by-pid",
        "gputui/telemetry/health.py",
        "        window = self._cpu.get(ident)\n",
        "        window = self._cpu.get(ident) or next((w for k, w in self._cpu.items() if k[0] == ident[0]), None)\n",
        (f"{CPU_WINDOW}::test_a_reused_pid_never_shares_the_old_processs_window",),
        "a reused PID's new process is judged on the old process's CPU",
    ),
    # ---- the spinning signature (NCCL's real wait: tests/fixtures/h200-x2-nccl) ----------
    Mutation(
        "spin-ignores-arithmetic",
        "gputui/telemetry/health.py",
        "            and pipes < cfg.spin_max_pipe\n",
        "",
        (f"{NCCL}::test_arithmetic_in_any_pipe_is_work_not_a_spin",),
        "a kernel that computes (a reduction, a small GEMM) at low SM activity is called spinning",
    ),
    Mutation(
        "spin-missing-pipe-is-zero",
        "gputui/telemetry/health.py",
        "    return max(known) if len(known) == len(pipes) else None",
        "    return max(known, default=0.0)",
        (f"{NCCL}::test_a_missing_pipe_figure_is_not_zero",),
        "a pipe figure that was not measured reads as 0 % (None is not 0)",
    ),
    Mutation(
        "spin-sm-bound-inclusive",
        "gputui/telemetry/health.py",
        "            and sm < cfg.spin_max_sm\n",
        "            and sm <= cfg.spin_max_sm\n",
        (f"{NCCL}::test_the_sm_bound_is_strict_and_the_configs",),
        "SM activity at the bound counts as spinning",
    ),
    Mutation(
        "spin-ignores-dram",
        "gputui/telemetry/health.py",
        "            and dram < cfg.spin_max_dram\n",
        "",
        ("tests/test_health.py::test_dram_traffic_is_not_spinning",),
        "a kernel moving memory is called spinning",
    ),
    Mutation(
        "spin-ignores-power",
        "gputui/telemetry/health.py",
        "    if g.lost or g.power_draw is None or idle_max is None or g.power_draw > idle_max:",
        "    if g.lost or g.power_draw is None or idle_max is None:",
        ("tests/test_health.py::test_spinning_at_busy_power_is_not_the_signature",),
        "a GPU at busy power is called spinning",
    ),
    Mutation(
        "spin-host-cpu-wins",
        "gputui/telemetry/health.py",
        "        elif spin.get(p.gpu_index) is not False and p.gpu_index in spin:",
        '        elif p.state != "R" and spin.get(p.gpu_index) is not False and p.gpu_index in spin:',
        (f"{NCCL}::test_the_stopped_rank_is_the_one_the_nccl_ranks_wait_for",),
        "an NCCL rank busy-waiting in synchronize (state R, 100 % CPU) reads as computing: no verdict",
    ),
    # ---- the input_bound hint (issue 26 item 5) -----------------------------------------
    Mutation(
        "input-bound-any-pegged-child",
        "gputui/telemetry/hints.py",
        "    if not busy or len(busy) < cfg.input_bound_busy_share * working:",
        "    if not busy:",
        ("tests/test_input_bound.py",),
        "one pegged child among many working ones (not the loader) is called input-bound",
    ),
    Mutation(
        "input-bound-pegged-from-zero",
        "gputui/telemetry/hints.py",
        "    busy = [c for c in cpu if c >= cfg.input_bound_worker_cpu]",
        "    busy = [c for c in cpu if c > cfg.input_bound_worker_cpu]",
        ("tests/test_input_bound.py",),
        "a worker exactly at the pegged threshold is not counted (the config says 'at or above')",
    ),
    Mutation(
        "input-bound-max-util-inclusive",
        "gputui/telemetry/hints.py",
        "    if not cfg.input_bound_min_util <= mean_util < cfg.input_bound_max_util:",
        "    if not cfg.input_bound_min_util <= mean_util <= cfg.input_bound_max_util:",
        ("tests/test_input_bound.py",),
        "a GPU exactly at the utilization limit is called waiting (the config says 'below')",
    ),
    Mutation(
        "input-bound-no-window",
        "gputui/telemetry/hints.py",
        "    if not cfg.enabled or mean_util is None or seconds < cfg.input_bound_seconds or not workers:",
        "    if not cfg.enabled or mean_util is None or not workers:",
        ("tests/test_input_bound.py",),
        "the hint is claimed from one tick's utilization, before the window has passed",
    ),
    Mutation(
        "input-bound-unknown-util-kept",
        "gputui/telemetry/hints.py",
        "            self._util_since.pop(i, None)\n            return None, 0.0",
        "            return None, 0.0",
        ("tests/test_input_bound.py",),
        "a tick without utilization does not restart the window: seconds of no evidence count",
    ),
    Mutation(
        "workers-pid-reuse-mixed",
        "gputui/telemetry/host/workers.py",
        "                key = (child, ticks[0])",
        "                key = (child, 0)",
        ("tests/test_workers.py",),
        "a reused PID is charged with the CPU of the process that had it before",
    ),
    Mutation(
        "workers-unreadable-as-none-children",
        "gputui/telemetry/host/workers.py",
        '        tids = os.listdir(f"{proc}/{pid}/task")\n    except OSError:\n        return None',
        '        tids = os.listdir(f"{proc}/{pid}/task")\n    except OSError:\n        return []',
        ("tests/test_workers.py",),
        "a rank whose children cannot be read is shown as having none",
    ),
    Mutation(
        "workers-unmeasured-as-idle",
        "gputui/telemetry/host/workers.py",
        "            if new and not measured:",
        "            if False:",
        ("tests/test_workers.py",),
        "children seen once (no window yet) are reported as no children at all",
    ),
    Mutation(
        "workers-never-list-every-thread",
        "gputui/telemetry/host/workers.py",
        "        if known is not None and not self.lists_every_thread(pid):",
        "        if known is not None:",
        ("tests/test_workers.py",),
        "a child forked later by a thread not known to fork is never found",
    ),
    Mutation(
        "workers-known-threads-not-read",
        "gputui/telemetry/host/workers.py",
        "    for tid in forking:\n",
        "    for tid in ():\n",
        ("tests/test_workers.py",),
        "a child of a thread other than the main one is seen only at the reads that list every thread",
    ),
    Mutation(
        "workers-threads-by-pid-only",
        "gputui/telemetry/host/workers.py",
        "        pid = key[0]\n        known = forking.get(key)",
        "        pid = key[0]\n        key = (pid, 0)\n        known = forking.get(key)",
        ("tests/test_workers.py",),
        "a reused PID is read as the threads of the process that had it before",
    ),
    Mutation(
        "workers-idle-forking-thread-forgotten",
        "gputui/telemetry/host/workers.py",
        "(kids or int(tid) in keep)",
        "kids",
        ("tests/test_workers.py",),
        "a loader thread between two epochs (no children) is forgotten: its next workers found late",
    ),
    Mutation(
        "workers-rank-main-thread-not-read",
        "gputui/telemetry/host/workers.py",
        "kids = self._children(ident, forking, main=True)",
        "kids = self._children(ident, forking, main=False)",
        ("tests/test_workers.py",),
        "a rank's first DataLoader workers (forked by its main thread) are found only at its next full listing",
    ),
    Mutation(
        "workers-gone-rank-as-childless",
        "gputui/telemetry/host/workers.py",
        '            out = _pids(_read(f"{proc}/{pid}/task/{pid}/children"))\n        except OSError:\n            return None',
        '            out = _pids(_read(f"{proc}/{pid}/task/{pid}/children"))\n        except OSError:\n            return [], forking',
        ("tests/test_workers.py",),
        "a rank that ended between two reads is shown as having no children, not None",
    ),
    # ---- NCCL RAS (issue 32): where gputui connects, what it reads, what it concludes ------
    Mutation(
        "ras-any-address",
        "gputui/telemetry/nccl/client.py",
        "    if ip.is_loopback or str(ip) in local_addresses:",
        "    if True:",
        (RAS_CLIENT,),
        "an NCCL_RAS_ADDR of another machine (a rank's environment, a user's choice) is contacted",
    ),
    Mutation(
        "ras-name-looked-up",
        "gputui/telemetry/nccl/client.py",
        "        return refused  # a name: never looked up",
        "        return RasTarget(shown, (host,), port)",
        (RAS_CLIENT,),
        "a host name from a rank's environment is resolved and contacted",
    ),
    Mutation(
        "ras-answer-uncapped",
        "gputui/telemetry/nccl/client.py",
        "        while len(data) <= cap:",
        "        while True:",
        (RAS_CLIENT,),
        "an answer of any size is read into memory",
    ),
    Mutation(
        "ras-no-total-deadline",
        "gputui/telemetry/nccl/client.py",
        "    end = t0 + deadline\n",
        "    end = t0 + deadline + 3600\n",
        (RAS_CLIENT,),
        "a service trickling its answer a byte at a time holds the query for ever",
    ),
    Mutation(
        "ras-ranks-uncapped",
        "gputui/telemetry/nccl/model.py",
        "    keep = min(len(items), MAX_RANKS, budget.left)",
        "    keep = len(items)",
        ("tests/test_nccl_model.py",),
        "an answer listing thousands of ranks is kept whole",
    ),
    Mutation(
        "ras-unknown-count-as-zero",
        "gputui/telemetry/nccl/findings.py",
        "        known = [(r, n) for r in c.ranks if (n := r.count(coll)) is not None]",
        "        known = [(r, r.count(coll) or 0) for r in c.ranks]",
        (RAS_FINDINGS,),
        "a rank whose count RAS did not report is read as 0 and called behind",
    ),
    Mutation(
        "ras-lag-of-one-ignored",
        "gputui/telemetry/nccl/findings.py",
        "        behind = [(r, n) for r, n in known if n < lead]",
        "        behind = [(r, n) for r, n in known if n < lead - 1]",
        (RAS_FINDINGS,),
        "a rank one collective behind (the real deadlock) is not reported",
    ),
    Mutation(
        "ras-unnamed-missing-dropped",
        "gputui/telemetry/nccl/findings.py",
        "    unnamed = (c.missing_ranks_count or 0) - listed",
        "    unnamed = 0",
        (RAS_FINDINGS,),
        "ranks RAS counts as missing but does not list are not reported",
    ),
    Mutation(
        "ras-host-unfiltered",
        "gputui/ui/processes/nccl_lines.py",
        "    text = literal(f.detail)",
        "    text = f.detail",
        ("tests/test_nccl_tui.py",),
        "a host from a RAS answer reaches the terminal with its escape sequences",
    ),
    Mutation(
        "ras-asks-every-tick",
        "gputui/telemetry/nccl/watch.py",
        "                self._due = self._clock() + self.interval",
        "                self._due = self._clock()",
        ("tests/test_nccl_watch.py",),
        "RAS is asked at every tick instead of every RasWatch.interval seconds",
    ),
]


def copy_repo(dest: Path) -> None:
    """The tracked and untracked (not ignored) files of the checkout."""
    names = subprocess.run(
        ["git", "ls-files", "-z", "--cached", "--others", "--exclude-standard"],
        cwd=ROOT,
        capture_output=True,
        check=True,
    ).stdout.split(b"\0")
    for raw in names:
        if not raw:
            continue
        rel = raw.decode()
        src = ROOT / rel
        if not src.is_file():
            continue  # deleted in the work tree
        (dest / rel).parent.mkdir(parents=True, exist_ok=True)
        shutil.copy2(src, dest / rel)


def run_tests(copy: Path, tests: tuple[str, ...], env: dict[str, str]) -> int:
    cmd = [sys.executable, "-m", "pytest", "-x", "-q", "-p", "no:cacheprovider", "--no-header", *tests]
    return subprocess.run(cmd, cwd=copy, env=env, capture_output=True, check=False).returncode


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    ap.add_argument("--only", action="append", help="run only this mutation id (repeatable)")
    ap.add_argument("--list", action="store_true", help="list the mutations and exit")
    ap.add_argument("--keep", action="store_true", help="keep the temporary copy (for debugging)")
    a = ap.parse_args()
    chosen = [m for m in MUTATIONS if not a.only or m.id in a.only]
    if a.list:
        for m in chosen:
            print(f"{m.id:30} {m.file}: {m.why}")
        return 0
    tmp = Path(tempfile.mkdtemp(prefix="gputui-mutate-"))
    copy = tmp / "repo"
    copy.mkdir()
    copy_repo(copy)
    env = dict(os.environ, PYTHONPATH=str(copy), PYTHONDONTWRITEBYTECODE="1")
    where = subprocess.run(
        [sys.executable, "-c", "import gputui; print(gputui.__file__)"],
        cwd=copy,
        env=env,
        capture_output=True,
        text=True,
        check=True,
    ).stdout.strip()
    if not where.startswith(str(copy)):
        print(f"mutate: the tests would import gputui from {where}, not the copy", file=sys.stderr)
        return 2
    counts: dict[str, int] = {}
    try:
        for m in chosen:
            path = copy / m.file
            original = path.read_text(encoding="utf-8") if path.is_file() else None
            n = original.count(m.old) if original is not None else 0
            t0 = time.monotonic()
            if original is None:
                outcome = "not applied: file not found"
            elif n == 0:
                outcome = "not applied: snippet not found"
            elif n > 1:
                outcome = "not applied: snippet ambiguous"
            else:
                path.write_text(original.replace(m.old, m.new), encoding="utf-8")
                try:
                    rc = run_tests(copy, m.tests, env)
                finally:
                    path.write_text(original, encoding="utf-8")
                outcome = {0: "SURVIVED", 1: "killed"}.get(rc, f"error (pytest exit {rc})")
                if rc < 0:  # the test process was killed by a signal: the guard is gone
                    outcome = "killed"
            key = outcome.split(" (")[0]
            counts[key] = counts.get(key, 0) + 1
            print(f"{m.id:30} {outcome:32} {time.monotonic() - t0:6.1f} s  {m.why}", flush=True)
    finally:
        if not a.keep:
            shutil.rmtree(tmp, ignore_errors=True)
    print("summary: " + ", ".join(f"{v} {k}" for k, v in sorted(counts.items())))
    return 0 if counts.get("killed", 0) == len(chosen) else 1


if __name__ == "__main__":
    sys.exit(main())
