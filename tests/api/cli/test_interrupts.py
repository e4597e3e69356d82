"""Ctrl-C at a prompt (`wait_for_input` never left waiting by a signal it missed), and after."""

from __future__ import annotations

import gc
import os
import signal
import sys
import threading
import time
import warnings
from collections.abc import Iterator

import pytest

from api.cli.interrupts import quiet_teardown, wait_for_input


@pytest.fixture
def python_sigint() -> Iterator[None]:
    """Python's own SIGINT handler (KeyboardInterrupt), whatever the runner installed."""
    previous = signal.signal(signal.SIGINT, signal.default_int_handler)
    yield
    signal.signal(signal.SIGINT, previous)


def test_a_line_waiting_is_returned_at_once() -> None:
    r, w = os.pipe()
    try:
        os.write(w, b"ls\n")
        wait_for_input(r)
        assert os.read(r, 16) == b"ls\n"
    finally:
        os.close(r)
        os.close(w)


def test_a_ctrl_c_the_waiting_thread_never_sees_still_ends_the_wait(python_sigint: None) -> None:
    # The race, made certain: the main thread blocks SIGINT, so the kernel hands the signal to
    # another thread and nothing interrupts the main thread's system call. A plain read()
    # would sleep on; the wakeup pipe ends the wait and the interrupt is raised.
    r, w = os.pipe()

    def press_ctrl_c() -> None:
        time.sleep(0.2)
        os.kill(os.getpid(), signal.SIGINT)

    sender = threading.Thread(target=press_ctrl_c)
    sender.start()
    signal.pthread_sigmask(signal.SIG_BLOCK, {signal.SIGINT})
    try:
        with pytest.raises(KeyboardInterrupt):
            try:
                wait_for_input(r)
            finally:
                signal.pthread_sigmask(signal.SIG_UNBLOCK, {signal.SIGINT})
    finally:
        sender.join()
        os.close(r)
        os.close(w)
    assert signal.set_wakeup_fd(-1) == -1  # the wakeup fd it set is taken down again


def test_outside_the_main_thread_it_leaves_the_waiting_to_the_read() -> None:
    r, w = os.pipe()
    done: list[bool] = []
    try:

        def wait() -> None:
            wait_for_input(r)
            done.append(True)

        worker = threading.Thread(target=wait)
        worker.start()
        worker.join(5)
        assert done == [True]
    finally:
        os.close(r)
        os.close(w)


class _HalfBuilt:
    """What a Ctrl-C inside a constructor leaves: a finalizer reading an unset attribute."""

    def __del__(self) -> None:
        self.never_set.close()  # type: ignore[attr-defined]


def test_after_an_interrupt_finalizers_print_no_traceback(
    monkeypatch: pytest.MonkeyPatch, capfd: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setattr(sys, "unraisablehook", sys.__unraisablehook__)  # prints; restored after
    quiet_teardown()
    _HalfBuilt()
    gc.collect()
    assert "Traceback" not in capfd.readouterr().err


async def _never_awaited() -> None:
    return None


def test_after_an_interrupt_a_coroutine_never_awaited_warns_nothing(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr(sys, "unraisablehook", sys.unraisablehook)  # restored after
    with warnings.catch_warnings(record=True) as seen:  # the filters restored after
        warnings.simplefilter("always")
        quiet_teardown()
        cut = _never_awaited()  # what a Ctrl-C between a coroutine's creation and its await left
        del cut
        gc.collect()
    assert [w for w in seen if issubclass(w.category, RuntimeWarning)] == []
