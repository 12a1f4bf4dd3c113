"""A user's job as written: its reference, the rerouting of its source and sink, the stand-ins, values, ``init``."""
