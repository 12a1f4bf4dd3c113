"""A Ctrl-C that Python swallows (it landed in a finalizer) still stops the harness."""

from __future__ import annotations

import gc
import os
import signal
import subprocess
import sys
import textwrap

import pytest

from chaos.machine import interrupt


@pytest.fixture
def installed():
    before = (signal.getsignal(signal.SIGINT), signal.getsignal(signal.SIGTERM), sys.unraisablehook)
    interrupt.install()
    yield
    sys.unraisablehook = before[2]
    signal.signal(signal.SIGINT, before[0])
    signal.signal(signal.SIGTERM, before[1])


class SignalledInFinalizer:
    def __del__(self) -> None:
        os.kill(os.getpid(), signal.SIGINT)  # the handler runs here, inside __del__: Python ignores what it raises


@pytest.mark.filterwarnings("ignore::pytest.PytestUnraisableExceptionWarning")  # the swallowed one, on purpose
def test_a_stop_swallowed_by_a_finalizer_is_raised_again_once(installed):
    obj = SignalledInFinalizer()
    del obj
    gc.collect()  # nothing raised here: the KeyboardInterrupt died in __del__
    assert interrupt.requested()
    with pytest.raises(KeyboardInterrupt):
        interrupt.check()
    interrupt.check()  # once only: cleanups that follow must be allowed to finish


@pytest.mark.parametrize("sig", [signal.SIGINT, signal.SIGTERM])
def test_a_signal_raises_keyboard_interrupt_where_it_lands(installed, sig):
    with pytest.raises(KeyboardInterrupt):
        os.kill(os.getpid(), sig)
        signal.sigtimedwait([], 0.1)  # give Python a point to run the handler
    with pytest.raises(KeyboardInterrupt):
        interrupt.check()


def test_the_cli_exits_130_when_the_interrupt_was_swallowed(tmp_path):
    """main() asks again before it exits: a command that ran to its end after a lost Ctrl-C does not exit 0."""
    script = textwrap.dedent("""
        import os, signal, sys
        import chaos.cli.commands as cli

        class Late:
            def __del__(self):
                os.kill(os.getpid(), signal.SIGINT)

        def version_then_signal(*a, **k):
            Late()
            return 0

        cli.app = version_then_signal
        sys.argv = ["streamchaos"]
        cli.main()
    """)
    run = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=60, cwd=tmp_path)
    assert run.returncode == 130, run.stderr
    assert "interrupted" in run.stderr and "Traceback" not in run.stderr
