"""How every fpganet entry point runs a command: parse, run, and report a user error in one line.

``fpganet`` (:mod:`fpganet.cli`) and the ``python -m`` entry points of single commands
(``python -m fpganet.link.cli`` is ``fpganet board``) share this, so that a command module
never imports :mod:`fpganet.cli`, which imports the command modules.

User errors (:class:`~fpganet.errors.FpganetError`, a bad flag, a bad configuration) print
one line, ``fpganet: error: <message>``, on stderr and exit with status 2 (docs/reference/errors.md);
this is the one place that prints them.
"""

import argparse
import contextlib
import os
import signal
import sys
import threading
import warnings

from .config import ConfigError
from .errors import FpganetError, FpganetWarning, one_line

__all__ = ["PROG", "EXIT_ERROR", "EXIT_CHECK_FAILED", "Parser", "run_command_line", "run_subcommand"]

PROG = "fpganet"
EXIT_ERROR = 2
EXIT_CHECK_FAILED = 1
#: Exit statuses of a refused (2), interrupted (130) or terminated (143) command.
_STOPPED = (EXIT_ERROR, 130, 128 + signal.SIGTERM)


class Parser(argparse.ArgumentParser):
    """argparse that reports a usage error as a FpganetError (one line) instead of exiting."""

    def error(self, message):
        raise FpganetError(f"{message} (see '{self.prog} --help')")


def run_command_line(make_parser, run, argv=None):
    """Parse ``argv`` with the parser ``make_parser()`` builds and return ``run(args)``'s exit
    status: 0, 1 for a failed check, 2 for an error, 130 interrupted, 143 terminated.

    Warnings are held until the command ends and printed then, after its output, unless it
    was refused or stopped: a refusal is its one ``fpganet: error:`` line, not a warning
    about the calibration set followed by the buffer that does not fit."""
    held = []
    status = None
    with warnings.catch_warnings(), _sigterm_as_exception():
        warnings.showwarning = lambda *warning: held.append(warning)
        warnings.simplefilter("always", FpganetWarning)
        try:
            status = _run(make_parser, run, argv)
        finally:
            if status not in _STOPPED:            # a traceback keeps its warnings too
                for warning in held:
                    _show_warning(*warning)
    return status


def run_subcommand(name, configure, run, argv=None):
    """``fpganet NAME ...`` for a module's ``python -m`` entry point: ``configure(parser)``
    adds its flags, ``run(args)`` returns its exit status."""
    def make_parser():
        parser = Parser(prog=f"{PROG} {name}")
        configure(parser)
        return parser
    return run_command_line(make_parser, run, argv)


def _run(make_parser, run, argv):
    try:
        return run(make_parser().parse_args(argv))
    except (FpganetError, ConfigError) as error:
        print(f"{PROG}: error: {' '.join(str(error).split())}", file=sys.stderr)
        return EXIT_ERROR
    except BrokenPipeError:
        # The reader went away (``fpganet ... | head``): stop quietly, as Python's docs advise.
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        return 1
    except OSError as error:
        # The file system refused a path the user gave (too long, no permission, a full disk);
        # every writer builds its output aside, so nothing is left half-written.
        where = f"'{error.filename}': " if error.filename else ""
        print(f"{PROG}: error: {where}{error.strerror or one_line(error)}", file=sys.stderr)
        return EXIT_ERROR
    except BaseException as error:
        stop = _stopped_by_signal(error)
        if stop is None:
            raise
        print(f"{PROG}: {'interrupted' if stop is KeyboardInterrupt else 'terminated'}",
              file=sys.stderr)
        return 130 if stop is KeyboardInterrupt else 128 + signal.SIGTERM


def _show_warning(message, category, filename, lineno, file=None, line=None):
    """Warnings about the user's input as one line each; any other as Python shows it."""
    if issubclass(category, FpganetWarning):
        print(f"{PROG}: warning: {one_line(message)}", file=sys.stderr)
    else:
        warnings._showwarning_orig(message, category, filename, lineno, file, line)


def _stopped_by_signal(error):
    """KeyboardInterrupt or :class:`_Terminated` when ``error`` is, or was raised by, Ctrl-C or
    SIGTERM, else None. A signal's exception raised while a C extension runs (Ray's
    ``wait``) arrives as that extension's SystemError, caused by it."""
    while error is not None:
        if isinstance(error, (KeyboardInterrupt, _Terminated)):
            return type(error)
        if not isinstance(error, SystemError):
            return None
        error = error.__cause__
    return None


class _Terminated(BaseException):
    """SIGTERM, raised where the command is, as Ctrl-C raises KeyboardInterrupt."""


def _raise_terminated(signum, frame):
    raise _Terminated


@contextlib.contextmanager
def _sigterm_as_exception():
    """Turn SIGTERM into :class:`_Terminated` for the duration, so that a terminated command
    cleans up as an interrupted one does (a build's tool session killed, the folder built
    aside removed) instead of leaving its tools running. Only the main thread gets signals;
    an ignored SIGTERM stays ignored."""
    if (threading.current_thread() is not threading.main_thread()
            or signal.getsignal(signal.SIGTERM) is signal.SIG_IGN):
        yield
        return
    previous = signal.signal(signal.SIGTERM, _raise_terminated)
    try:
        yield
    finally:
        # None: a handler installed outside Python, which cannot be put back from here.
        signal.signal(signal.SIGTERM, signal.SIG_DFL if previous is None else previous)
