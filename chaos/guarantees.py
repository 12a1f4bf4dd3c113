"""The verdict names of docs/verdicts.md, in one low module: what the stored files, the catalogue's declared
guarantees, the checker (``properties.verdicts``, which orders them) and the CLI all spell alike.

``stalled``, ``refused`` and ``batch-dependent`` are verdicts, not guarantees: they say a trial proved nothing
(no commit for the recovery timeout; Spark refused the query as configured; a job's output differs from Spark's
one-batch answer with no fault at all, so it depends on how the stream is cut into micro-batches).
"""

from __future__ import annotations

EXACTLY_ONCE = "exactly-once"
AT_LEAST_ONCE = "at-least-once"
AT_MOST_ONCE = "at-most-once"
NONE = "none"
INCORRECT = "incorrect"
STALLED = "stalled"
REFUSED = "refused"
BATCH_DEPENDENT = "batch-dependent"

# What a pipeline may declare ("incorrect": not even the values are promised, a nondeterministic pipeline).
GUARANTEES = (EXACTLY_ONCE, AT_LEAST_ONCE, AT_MOST_ONCE, NONE, INCORRECT)
VERDICTS = (*GUARANTEES, STALLED, REFUSED, BATCH_DEPENDENT)
INCONCLUSIVE = (STALLED, REFUSED, BATCH_DEPENDENT)
