"""Errors a user can cause. The CLI prints them as one line and exits 2: no traceback."""


class UserError(Exception):
    """Bad input: the message names what is wrong and how to fix it."""


class HarnessError(Exception):
    """The harness itself could not do its job (a cluster that would not start, ...): exit 3."""


# How a command ends: the trial or campaign held its guarantee (0), violated it (1), the input was bad (2), or
# nothing could be concluded (3: stalled, refused, a harness failure).
EXIT_OK = 0
EXIT_VIOLATION = 1
EXIT_BAD_INPUT = 2
EXIT_INCONCLUSIVE = 3
