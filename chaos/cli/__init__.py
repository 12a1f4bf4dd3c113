"""The ``streamchaos`` command line: the commands, console output, progress, doctor."""
