"""One thing checked (``streamchaos doctor``, a cluster's own checks): its name, ok/warn/fail, and the fix."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass
class Check:
    name: str
    status: str  # ok | warn | fail
    detail: str
    fix: str = ""
