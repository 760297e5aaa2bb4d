"""A long-lived helper's one tie to its console: stdin.

The console starts the agent and the follower over SSH with the channel as their stdin (or, under
the console's stream wrapper, /dev/null, the wrapper then ending the process group). When the
channel closes, stdin reaches EOF, and that is the moment to stop: waiting for a write to fail
keeps a quiet follower on the host for good, and a helper of a console that died is nobody's.
"""

import os
import stat
import threading


def on_stdin_eof(callback):
    """Call `callback()` from a thread of its own once stdin reaches EOF (or fails), when stdin
    is a pipe or a socket: not /dev/null, where EOF comes at once, and not a terminal."""
    try:
        mode = os.fstat(0).st_mode
    except OSError:
        return
    if not (stat.S_ISFIFO(mode) or stat.S_ISSOCK(mode)):
        return

    def watch():
        while True:
            try:
                if not os.read(0, 4096):
                    break
            except OSError:
                break
        callback()

    # A daemon: blocked in read, it never holds up the helper's own exit.
    threading.Thread(target=watch, name="stdin-eof", daemon=True).start()
