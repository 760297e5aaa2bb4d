"""The console's way out when its terminal goes away or a signal tells it to stop.

Textual 8.2.8 handles neither (textual/drivers/linux_driver.py, measured in tmux):
- a hung-up terminal (tmux kill-pane, a dropped ssh session) reads as EOF at once, and the
  driver's input thread, which is not a daemon, selects and reads that EOF in a tight loop: a
  console whose SIGHUP was ignored spun at 130 % of a core with its pty deleted, for good. Its
  output thread dies on the first EIO, after which the app blocks once 30 writes are queued.
- the kernel follows a hang-up's SIGHUP with a SIGCONT, on which the driver starts itself
  again: a new input thread on the dead terminal.
- SIGTERM, and SIGHUP, kill the process where it stands: workers not stopped, nothing the
  command meant to do on the way out done, and a live terminal left in the alternate screen
  with mouse reporting on (every move of the mouse then types garbage at the shell prompt).

`run(app)` runs an app so that SIGTERM, SIGHUP and a hang-up seen on the terminal itself
(poll's POLLHUP, which costs nothing while it waits) become `app.exit`: Textual stops the
workers and its threads and restores the terminal, the sessions close their SSH links (sshd
then ends the host side), and the caller's `finally` runs. On a hang-up the terminal's
descriptors are first pointed at /dev/null, so that the teardown neither fails nor blocks, and
the SIGCONT left to do nothing. Should the teardown still not finish within `GRACE_S`, the
process ends anyway: the kernel closes its sockets, and sshd ends the host side as well. The
exit status is the shell's convention, 128 + the signal: 143 for SIGTERM, 129 for a hang-up.
"""

from __future__ import annotations

import asyncio
import os
import select
import signal
import threading
from typing import Any, Protocol

GRACE_S = 5.0
"""How long the app may take to tear down after a signal before the process ends without it."""

SIGNALS = (signal.SIGTERM, signal.SIGHUP)
HUNG_UP = select.POLLHUP | select.POLLERR | select.POLLNVAL


class ExitingApp(Protocol):
    """What `run` needs of a Textual app (kept structural: this module imports no textual)."""

    def run(self) -> Any: ...

    def exit(self, result: Any = None, return_code: int = 0, message: Any = None) -> None: ...


class _Exit:
    """The one way out of this process: the app running now, and the status once told to stop."""

    def __init__(self) -> None:
        self.app: ExitingApp | None = None
        self.status: int | None = None
        self.installed = False
        self.detached = False
        self.leaving = threading.Event()  # an app was told to exit by a signal
        self.left = threading.Event()  # and it did

    def install(self) -> None:
        """Take SIGTERM and SIGHUP, and watch the terminal (once per process)."""
        if self.installed:
            return
        self.installed = True
        for sig in SIGNALS:
            signal.signal(sig, self.on_signal)
        threading.Thread(target=self.watchdog, name="vllm-console-exit", daemon=True).start()
        if os.isatty(0):
            threading.Thread(target=self.watch, args=(0,), name="vllm-console-hangup",
                             daemon=True).start()

    def on_signal(self, signum: int, frame: object) -> None:
        if signum == signal.SIGHUP and (self.detached or hung_up(0)):
            self.detach()
            # The kernel follows a hang-up's SIGHUP with a SIGCONT, on which Textual restarts
            # its driver: a new input thread (not a daemon) on the dead terminal kept the
            # process alive after the app had exited. Handlers run in signal order: this one
            # comes first.
            signal.signal(signal.SIGCONT, signal.SIG_DFL)
        status = 128 + signum
        self.status = self.status or status
        app = self.app
        try:
            loop = asyncio.get_running_loop()
        except RuntimeError:
            loop = None
        if app is None or loop is None:
            # Before or after the app (the demo starting its simulated host): the caller's
            # `finally` blocks still run on the way out.
            raise SystemExit(self.status)
        self.leaving.set()
        loop.call_soon_threadsafe(app.exit, None, self.status)

    def watchdog(self) -> None:
        """End the process should the app not have exited `GRACE_S` after a signal told it to
        (a thread of its own from the start: none is started in a signal handler)."""
        self.leaving.wait()
        if not self.left.wait(GRACE_S):
            os._exit(self.status or 1)

    def watch(self, fd: int) -> None:
        """Wait (asleep, in poll) for the terminal to hang up; then leave as on SIGHUP, which
        may never come: ignored (nohup), or the console not in the terminal's foreground."""
        poller = select.poll()
        poller.register(fd, 0)  # no events asked: only a hang-up or an error wakes it
        while not any(events & HUNG_UP for _, events in poller.poll()):
            pass
        self.detach()
        os.kill(os.getpid(), signal.SIGHUP)

    def detach(self) -> None:
        """Point the dead terminal's descriptors at /dev/null: writes then succeed (Textual's
        output thread would die on EIO, and the app block once 30 writes are queued) and reads
        end at once. Not a pipe that never becomes readable: Textual's input thread may be
        between a select that saw the hang-up and its read, which would then never return."""
        if self.detached:
            return
        self.detached = True
        null = os.open(os.devnull, os.O_RDWR)
        for fd in (0, 1, 2):
            os.dup2(null, fd)
        os.close(null)

    def run(self, app: ExitingApp) -> int | None:
        self.install()
        self.app = app
        try:
            app.run()
        finally:
            self.app = None
            if self.leaving.is_set():
                self.left.set()
        return self.status


def hung_up(fd: int) -> bool:
    """Whether the terminal on `fd` has hung up (its other side closed)."""
    try:
        poller = select.poll()
        poller.register(fd, 0)
        return any(events & HUNG_UP for _, events in poller.poll(0))
    except (OSError, ValueError):
        return True


_EXIT = _Exit()


def install() -> None:
    """Make SIGTERM, SIGHUP and a hang-up of the terminal end the process through the callers'
    `finally` blocks (`SystemExit(128 + signal)`) until an app runs under `run`."""
    _EXIT.install()


def run(app: ExitingApp) -> int | None:
    """Run `app` until it exits; the exit status a signal or a hang-up asks for (143, 129), or
    None when the app ended on its own."""
    return _EXIT.run(app)
