"""Event time in the form a job reads it (``--time FIELD[:FORM]``).

Jobs carry event time as a TIMESTAMP, as epoch milliseconds (``trade_time LONG``), epoch seconds, or a string in
their own format parsed with ``to_timestamp(col, "yyyy-MM-dd HH:mm:ss")``. The generator writes the event's time
into the named field in that form, so the job's windows and watermark see the scenario's times, late records
included. A form coarser than a millisecond truncates the time the job reads: the oracle's lateness rule
(chaos.jobs.stand_ins.on_time) truncates it the same way (``unit_ms``).

Spark's datetime patterns (docs: sql-ref-datetime-pattern) are translated here letter by letter; a letter Spark
does not know, or one whose text the generator cannot write, is one line. Imported by the executors' Python
workers: the standard library only.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from datetime import UTC, datetime

from chaos.errors import UserError

FORMS = ("timestamp", "epoch-ms", "epoch-s")
NONE = "none"  # ``--time none``: no field carries the event time (a duration named like a time)
# Spark's pattern letters (Spark 3+); of them the generator writes these, the rest are refused by name.
_SPARK_LETTERS = set("GyuDMLdQqEFaHhKkmsSVzOXxZYwWecAnNp")
_WRITTEN = set("yMLdHhKkmsSaEXxZD")
_NAME_LIKE_TIME = re.compile(r"(^|_)(time|ts|timestamp|datetime|date|epoch|at)($|_)", re.IGNORECASE)
_NAME_LIKE_TIME_CAMEL = re.compile(r"(Time|Ts|At|Date|Timestamp)$")


@dataclass(frozen=True)
class TimeForm:
    """The field that carries the event time and the form it is written in."""

    field: str
    form: str  # timestamp | epoch-ms | epoch-s | a Spark datetime pattern

    @property
    def pattern(self) -> str | None:
        return None if self.form in FORMS else self.form

    def write(self, ms: int, kind: str):
        """The event time ``ms`` as this field holds it (``kind``: the field's kind, chaos.jobs.payloads.Field)."""
        if self.form == "epoch-ms":
            return ms
        if self.form == "epoch-s":
            return ms // 1000 if kind == "int" else ms / 1000
        moment = datetime.fromtimestamp(ms / 1000, tz=UTC)
        if self.form == "timestamp":
            return moment.strftime("%Y-%m-%dT%H:%M:%S.%f")[:-3] + "Z"
        return format_pattern(self.form, moment)

    @property
    def unit_ms(self) -> int:
        """The precision the job reads the time at: its lateness is judged on the time truncated to it."""
        if self.form == "epoch-s":
            return 1000
        if self.form in FORMS:
            return 1
        return pattern_unit_ms(self.form)


def parse_time(text: str) -> TimeForm | None:
    """``FIELD[:FORM]`` (``--time``) as a form; ``none`` says no field carries the time; "" is None."""
    text = (text or "").strip()
    if not text or text == NONE:
        return None
    name, _, form = text.partition(":")
    name, form = name.strip().strip("`"), form.strip() or "timestamp"
    if not name:
        raise UserError(f"--time {text!r}: name the field first, e.g. --time trade_time:epoch-ms")
    if form not in FORMS:
        tokens(form, text)  # a pattern it cannot write: one line
    return TimeForm(name, form)


def check_field(time: TimeForm, kinds: dict[str, str]) -> None:
    """The form fits the field's type: epoch numbers in LONG/INT (seconds also DOUBLE), patterns and ISO text in
    STRING, a TIMESTAMP or DATE field only as itself."""
    kind = kinds.get(time.field)
    if kind is None:
        raise UserError(f"--time {time.field}: the payload has no such field; it has {', '.join(kinds)}")
    fits = {"epoch-ms": ("int",), "epoch-s": ("int", "float"), "timestamp": ("timestamp", "date", "string")}
    allowed = fits.get(time.form, ("string",))
    if kind not in allowed:
        what = "a pattern" if time.pattern else time.form
        raise UserError(f"--time {time.field}:{time.form}: the field is {kind.upper()}; {what} goes in a "
                        f"{' or '.join(a.upper() for a in allowed)} field"
                        + (f" (a {kind.upper()} field needs no form: --time {time.field})"
                           if kind in ("timestamp", "date") else ""))


def ambiguous(fields: list[tuple[str, str]]) -> str | None:
    """Without ``--time``: a field named like a time (``trade_time LONG``, ``created_at STRING``) in a payload with
    no TIMESTAMP or DATE field is one line asking for its form (``fields``: name and kind)."""
    if any(kind in ("timestamp", "date") for _, kind in fields):
        return None
    for name, kind in fields:
        if kind in ("int", "float", "string") and (_NAME_LIKE_TIME.search(name) or _NAME_LIKE_TIME_CAMEL.search(name)):
            return (f"the payload's {name} ({kind.upper()}) reads like an event time in a form streamchaos cannot "
                    f"guess: say it with --time {name}:epoch-ms (or epoch-s, or the job's pattern, e.g. "
                    f"--time '{name}:yyyy-MM-dd HH:mm:ss'), or --time none if it is no time")
    return None


def tokens(pattern: str, given: str | None = None) -> list[tuple[str, str]]:
    """A Spark datetime pattern as ``(letter, run)`` and ``("", literal)`` pieces; one line for what Spark cannot
    parse or the generator cannot write."""
    out: list[tuple[str, str]] = []
    i = 0
    where = f"--time {given!r}" if given else f"pattern {pattern!r}"
    while i < len(pattern):
        ch = pattern[i]
        if ch == "'":
            end = pattern.find("'", i + 1)
            if end < 0:
                raise UserError(f"{where}: a quote opens text it never closes (Spark quotes text as 'T')")
            out.append(("", pattern[i + 1:end] or "'"))
            i = end + 1
        elif ch.isalpha():
            j = i
            while j < len(pattern) and pattern[j] == ch:
                j += 1
            if ch not in _SPARK_LETTERS:
                raise UserError(f"{where}: {ch!r} is not a letter of Spark's datetime patterns (y M d H h m s S a "
                                "E X Z, quoted text as 'T')")
            if ch not in _WRITTEN:
                raise UserError(f"{where}: streamchaos cannot write times for the letter {ch!r}; it writes y M d D "
                                "H h K k m s S a E X x Z")
            out.append((ch, pattern[i:j]))
            i = j
        elif ch in "[]{}#":
            raise UserError(f"{where}: {ch!r} is reserved in Spark's patterns; quote it ('{ch}')")
        else:
            out.append(("", ch))
            i += 1
    if not any(letter == "y" for letter, _ in out) and not any(letter == "D" for letter, _ in out):
        raise UserError(f"{where}: the pattern has no year (y): Spark would read every time in 1970")
    return out


# The pattern letters written as a zero-padded number, and the number each takes from a moment.
_NUMBERS = {
    "d": lambda t: t.day, "D": lambda t: t.timetuple().tm_yday, "H": lambda t: t.hour, "k": lambda t: t.hour or 24,
    "h": lambda t: (t.hour % 12) or 12, "K": lambda t: t.hour % 12, "m": lambda t: t.minute, "s": lambda t: t.second,
}


def format_pattern(pattern: str, moment: datetime) -> str:
    """``moment`` (UTC) written in Spark's ``pattern``, as ``date_format`` would write it with the session in UTC."""
    parts = []
    for letter, run in tokens(pattern):
        n = len(run)
        if not letter:
            parts.append(run)
        elif letter == "y":
            parts.append(f"{moment.year % 100:02d}" if n == 2 else f"{moment.year:0{max(n, 1)}d}")
        elif letter in "ML":
            parts.append(moment.strftime("%B") if n >= 4 else moment.strftime("%b") if n == 3
                         else f"{moment.month:0{n}d}")
        elif letter in _NUMBERS:  # zero-padded to the run's length
            parts.append(f"{_NUMBERS[letter](moment):0{n}d}")
        elif letter == "S":
            parts.append(f"{moment.microsecond:06d}{'0' * 3}"[:n])
        elif letter == "a":
            parts.append("AM" if moment.hour < 12 else "PM")
        elif letter == "E":
            parts.append(moment.strftime("%A") if n >= 4 else moment.strftime("%a"))
        elif letter in "Xx":
            parts.append("Z" if letter == "X" else "+00" if n == 1 else "+0000" if n in (2, 4) else "+00:00")
        else:  # Z
            parts.append("Z" if n == 4 else "+00:00" if n == 5 else "+0000")
    return "".join(parts)


def pattern_unit_ms(pattern: str) -> int:
    """The finest time a pattern keeps, in milliseconds (``ss`` 1000, ``SSS`` 1, ``HH:mm`` 60000)."""
    letters = {letter: len(run) for letter, run in tokens(pattern) if letter}
    if "S" in letters:
        return 10 ** max(0, 3 - letters["S"])
    for letter, unit in (("s", 1000), ("m", 60_000), ("H", 3_600_000), ("h", 3_600_000), ("k", 3_600_000),
                         ("K", 3_600_000)):
        if letter in letters:
            return unit
    return 86_400_000
