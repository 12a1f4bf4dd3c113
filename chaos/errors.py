"""Errors a user can cause. The CLI prints them as one line and exits 2: no traceback."""


class UserError(Exception):
    """Bad input: the message names what is wrong and how to fix it."""


class HarnessError(Exception):
    """The harness itself could not do its job (a cluster that would not start, ...): exit 3."""
