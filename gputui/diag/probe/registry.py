"""Checks declared with their id, group, title and what they need; run one by one, isolated.

A check is a function of the probe's state (`state.Probe`) that emits its result with
`protocol.check` and returns whether what it `gives` is usable.  `run()` runs it only when
every fact it `needs` was given (else it reports SKIP with the reason), and turns any
exception into that check's FAIL carrying the traceback and the objects it was looking at, so
the checks that do not depend on it still run.
"""

from __future__ import annotations

import re
import sys
import time
import traceback

from .protocol import check, first_line, tail


class Declared:
    """One declared check."""

    def __init__(self, fn, cid, group, title, needs=(), gives=None, deny=None):
        self.fn = fn
        self.id = cid
        self.group = group
        self.title = title
        self.needs = tuple(needs)
        """Facts (given by earlier checks) this check needs: "nvml", "torch", "torch-cuda", "cuda"."""
        self.gives = gives
        """The fact this check gives when it returns True."""
        self.deny = deny
        """Why the fact is not there when it returns False (the dependents' SKIP reason)."""

    def __repr__(self):
        return "<check %s needs=%s gives=%s>" % (self.id, list(self.needs), self.gives)


CHECKS = {}
"""Every declared check, by id."""


def declare(cid, group, title, needs=(), gives=None, deny=None):
    """Declare a check (decorator)."""

    def wrap(fn):
        if cid in CHECKS:
            raise ValueError("check %s declared twice" % cid)
        CHECKS[cid] = Declared(fn, cid, group, title, needs, gives, deny)
        fn.declared = CHECKS[cid]
        return fn

    return wrap


#: The attributes of torch the probe uses, reported when a torch module lacks one.
TORCH_PARTS = ("cuda", "backends", "version", "__version__", "nn")


TORCH_FACTS = ("torch", "torch-cuda", "cuda")


def looked_at(p, d, exc):
    """The objects a failing check was looking at, for its evidence: the object that lacked
    an attribute, and for a check that uses torch, where torch came from and what it lacks."""
    out = {}
    if isinstance(exc, AttributeError):
        name = getattr(exc, "name", None)  # Python 3.10+
        obj = getattr(exc, "obj", None)
        m = re.search(r"(?:module )?'([^']+)' (?:object )?has no attribute '([^']+)'", str(exc))
        if name is None and m:
            name = m.group(2)
        out["missing_attribute"] = name
        out["object"] = _describe(obj) if obj is not None else (m.group(1) if m else None)
    torch = getattr(p, "torch", None) or sys.modules.get("torch")
    if torch is not None and any(n in TORCH_FACTS for n in d.needs):
        out["torch"] = {
            "file": getattr(torch, "__file__", None),
            "path": list(getattr(torch, "__path__", []) or []),
            "version": getattr(torch, "__version__", None),
            "lacks": [a for a in TORCH_PARTS if not hasattr(torch, a)],
        }
    return out


def _describe(obj):
    text = repr(obj)
    return text if len(text) <= 300 else text[:300] + "..."


def crash_summary(exc, seen):
    """One line: the exception, and for a torch module, where it came from and what it lacks."""
    text = "the check failed unexpectedly: %s: %s" % (type(exc).__name__, first_line(str(exc)))
    torch = seen.get("torch")
    if torch:
        where = torch.get("file") or ", ".join(torch.get("path") or []) or "an unknown place"
        lacks = torch.get("lacks") or []
        text += " (torch %s from %s%s)" % (
            torch.get("version") or "of unknown version",
            where,
            "; it lacks " + ", ".join("torch." + a for a in lacks) if lacks else "",
        )
    return text


class Runner:
    """Runs declared checks in a given order, keeping the facts they give."""

    def __init__(self, p):
        self.p = p
        self.facts = {}
        """fact -> None (given) or the reason it is not."""

    def missing(self, needs):
        for fact in needs:
            if self.facts.get(fact, "not checked") is not None:
                return fact, self.facts.get(fact) or "%s was not established" % fact
        return None, None

    def run(self, declared):
        d = declared.declared if callable(declared) else declared
        fact, why = self.missing(d.needs)
        if fact is not None:
            check(d.id, d.group, d.title, "SKIP", why)
            if d.gives:
                self.facts[d.gives] = why
            return False
        t0 = time.monotonic()
        try:
            ok = bool(d.fn(self.p))
        except Exception as exc:  # any failure of the check itself: its FAIL, the rest runs
            seen = looked_at(self.p, d, exc)
            evidence = {
                "exception": "%s: %s" % (type(exc).__name__, exc),
                "traceback": tail(traceback.format_exc(), 30),
            }
            evidence.update(seen)
            cause = "torch-broken" if seen.get("torch") and isinstance(exc, AttributeError) else "check-error"
            check(d.id, d.group, d.title, "FAIL", crash_summary(exc, seen), evidence, cause=cause, t0=t0)
            if d.gives:
                self.facts[d.gives] = "%s failed unexpectedly (see that check)" % d.title
            return False
        if d.gives:
            self.facts[d.gives] = None if ok else (d.deny or "%s did not pass" % d.title)
        return ok
