"""The protocol client of the board's UART host link: :class:`BoardLink`.

:class:`BoardLink` speaks the frame protocol of :mod:`fpganet.link.protocol` over
any object with ``read(n)`` and ``write(data)``: a pyserial ``Serial`` (opened for
you when ``port`` is a path such as ``/dev/ttyUSB1`` or ``COM5``), or a simulated
port whose other end is the HostLink gateware in a simulator
(:class:`fpganet.link.simport.SimulatedPort`, the cocotb testbench's port).

A port object may also have ``reset_input_buffer()`` (drop unread bytes) and
``idle(seconds)`` (let that much device time pass; a simulated port advances its
simulation, otherwise the driver sleeps).

Every problem the user can meet (no such port, no reply, a damaged reply, the
board refusing a request, a network compiled for other hardware) raises
:class:`LinkError` with a one-line message; the command line prints it without
a traceback.

Requests whose reply is an ERROR had no effect; the driver resends them when the
error says the request was damaged on the way (BAD_CRC, TRUNCATED). When a reply
is lost or damaged, PING, STATUS, WRITE and FLUSH are resent too (doing them twice
is harmless); START, SEND_INPUT and READ_OUTPUT are not, and the error says the
board's state is unknown.
"""

import os
import time
from dataclasses import dataclass

from ..isa import HostSpace
from . import protocol
from .protocol import Command, DeviceInfo, ErrorCode, FrameError, Status
from .transport import DEFAULT_BAUD, LinkError, open_serial

__all__ = ["BoardLink", "LinkStats", "DeviceError"]

#: The device's inter-byte timeout assumed before PING has told it.
ASSUMED_DEVICE_TIMEOUT_S = 0.05
IDEMPOTENT = frozenset({Command.PING, Command.STATUS, Command.WRITE, Command.FLUSH})


class DeviceError(LinkError):
    """The board answered a request with an ERROR reply (``code``: :class:`ErrorCode`)."""

    def __init__(self, command, code, message=None):
        self.command = Command(command)
        self.code = code
        name = code.name if isinstance(code, ErrorCode) else f"error {code}"
        super().__init__(message or f"the board refused {self.command.name}: {name}")


@dataclass
class LinkStats:
    """Traffic counted by a :class:`BoardLink`."""
    bytes_sent: int = 0
    bytes_received: int = 0
    requests: int = 0
    resent: int = 0


class BoardLink:
    """The host end of the host link.

    Parameters
    ----------
    port : str, os.PathLike or object
        A serial device path (opened with pyserial, 8N1) or an open port object with
        ``read(n)`` and ``write(data)`` (pyserial semantics: ``read`` returns what arrived
        within the port's timeout, possibly fewer bytes).
    baud : int
        Line rate when opening a path (the bitstream's, 3,000,000 by default).
    timeout : float
        Seconds to wait for a reply (on top of the board's own waiting, for READ_OUTPUT).
    retries : int
        How many times a request is resent after a damaged request or reply.

    Use as a context manager, or call :meth:`close`, to close a port opened here.
    """

    def __init__(self, port, baud=DEFAULT_BAUD, timeout=1.0, *, retries=3):
        if not timeout > 0:
            raise ValueError(f"timeout must be positive, not {timeout!r}")
        if isinstance(port, (str, os.PathLike)):
            self.port = open_serial(port, baud, timeout)
            self._owns_port = True
            self.name = os.fspath(port)
        else:
            if not (callable(getattr(port, "read", None)) and callable(getattr(port, "write", None))):
                raise TypeError(f"port must be a device path or have read() and write(), "
                                f"not {port!r}")
            self.port = port
            self._owns_port = False
            self.name = getattr(port, "name", None) or type(port).__name__
        self.baud = baud
        self.timeout = timeout
        self.retries = retries
        self.info = None
        self.stats = LinkStats()

    # Context management ----------------------------------------------------------------------

    def close(self):
        if self._owns_port:
            self.port.close()

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()

    # Commands ----------------------------------------------------------------------------------

    def ping(self):
        """Ask the board what it is; returns (and keeps, as :attr:`info`) a
        :class:`~fpganet.link.protocol.DeviceInfo`."""
        data = self._request(Command.PING)
        if len(data) < 1 or data[0] != protocol.PROTOCOL_VERSION:
            version = data[0] if data else "?"
            raise LinkError(f"the board on {self.name} speaks host-link protocol version "
                            f"{version}; this fpganet speaks {protocol.PROTOCOL_VERSION}: "
                            f"rebuild the bitstream or update fpganet")
        try:
            self.info = DeviceInfo.unpack(data)
        except ValueError as error:
            raise LinkError(f"the board's PING reply is malformed: {error}") from None
        return self.info

    def check_config(self, config, design=DeviceInfo.INT8_ACCELERATOR):
        """Raise :class:`LinkError` unless the board holds ``design`` (PING's; the int8
        accelerator by default) and its accelerator matches ``config`` (an
        :class:`~fpganet.config.AcceleratorConfig`) in every field a compiled program
        depends on."""
        info = self._info()
        if info.design != design:
            raise LinkError(f"the board holds {DeviceInfo.design_text(info.design)}, not "
                            f"{DeviceInfo.design_text(design)} that the network was compiled "
                            f"for: load its bitstream (fpganet synth OUT)")
        mismatches = info.mismatches(config)
        if mismatches:
            details = ", ".join(f"{name} {board:,} on the board but {compiled:,} compiled"
                                for name, board, compiled in mismatches)
            raise LinkError(f"the network was compiled for a {config.name} accelerator that the "
                            f"board's {info.name} accelerator is not ({details}): compile it "
                            f"again with the board's configuration")
        return info

    def status(self):
        """The board's :class:`~fpganet.link.protocol.Status`."""
        try:
            return Status.unpack(self._request(Command.STATUS))
        except ValueError as error:
            raise LinkError(f"the board's STATUS reply is malformed: {error}") from None

    def write_memory(self, space, address, words):
        """Write ``words`` (integers) into memory ``space`` (:class:`~fpganet.isa.HostSpace`)
        from word ``address`` on, in as many WRITE frames as needed."""
        space = HostSpace(space)
        words = [int(word) for word in words]
        info = self._info()
        size = info.word_bytes(space)
        end = address + len(words)
        if address < 0 or end > info.memory_words(space):
            raise LinkError(f"{space.name} words {address}..{end - 1} do not fit the board's "
                            f"{info.memory_words(space):,}-word {space.name} memory")
        per_frame = info.max_write_bytes // size
        for first in range(0, len(words), per_frame):
            payload = protocol.write_payload(space, address + first,
                                             words[first:first + per_frame],
                                             info.weight_word_bytes)
            try:
                self._request(Command.WRITE, payload)
            except DeviceError as error:
                if error.code == ErrorCode.BUSY:
                    raise DeviceError(Command.WRITE, error.code,
                                      "the accelerator is running: the board refuses memory "
                                      "writes until it stops") from None
                raise

    def start(self, wait=None, *, queued=False):
        """Start the accelerator; if it is still running, wait up to ``wait`` seconds
        (default: the link's timeout) for it to stop first.

        With ``queued`` the board waits itself (START's wait byte, where PING's ``links`` has
        :attr:`~fpganet.link.protocol.DeviceInfo.QUEUED_START`: the SPI link's) and starts the
        accelerator the cycle it stops: sent while one run computes, the next begins with no
        round trip between them. The reply comes when it has started."""
        if queued and not self._info().queued_start:
            raise LinkError(f"the board on {self.name} does not queue a START (its bitstream's "
                            f"link has no START wait byte)")
        deadline = time.monotonic() + (self.timeout if wait is None else wait)
        payload, extra = (b"\x01", self._device_timeout()) if queued else (b"", 0.0)
        while True:
            try:
                self._request(Command.START, payload, extra_wait=extra)
                return
            except DeviceError as error:
                if error.code != ErrorCode.BUSY or time.monotonic() > deadline:
                    if error.code == ErrorCode.BUSY:
                        raise DeviceError(Command.START, error.code,
                                          "the accelerator is still running: START refused") \
                            from None
                    raise
            if not queued:
                self._pause(0.001)

    def send_input(self, data, timeout=None):
        """Send bytes to the accelerator's input stream; waits (up to ``timeout`` seconds
        without progress) while the input FIFO is full."""
        data = bytes(data)
        info = self._info()
        timeout = self.timeout if timeout is None else timeout
        position, limit = 0, info.input_depth
        last_progress = time.monotonic()
        while position < len(data):
            chunk = data[position:position + max(1, min(limit, info.input_depth))]
            try:
                self._request(Command.SEND_INPUT, chunk)
            except DeviceError as error:
                if error.code != ErrorCode.NO_SPACE:
                    raise
                limit = self.status().input_free
                if limit == 0:
                    if time.monotonic() - last_progress > timeout:
                        raise LinkError(f"the accelerator took no input for {timeout:g} s "
                                        f"({position:,} of {len(data):,} bytes sent, input FIFO "
                                        f"full): is it running?") from None
                    # Short: the STATUS round trip is most of the wait, and a run that is
                    # still reading its input frees room soon (the next START's input waits
                    # on it, queued behind the run).
                    self._pause(0.0001)
                continue
            position += len(chunk)
            limit = info.input_depth
            last_progress = time.monotonic()

    def send_input_now(self, data):
        """Send as many of ``data``'s first bytes as the input FIFO takes now, asking STATUS
        first (a SEND_INPUT refused NO_SPACE would have carried all its bytes for nothing);
        returns how many."""
        count = min(len(data), self.status().input_free)
        if count:
            self._request(Command.SEND_INPUT, bytes(data[:count]))
        return count

    def read_output(self, count, timeout=None):
        """Read ``count`` bytes of the accelerator's output stream, waiting up to ``timeout``
        seconds (default: the link's) for them."""
        info = self._info()
        timeout = self.timeout if timeout is None else timeout
        deadline = time.monotonic() + timeout
        got = bytearray()
        while len(got) < count:
            want = min(count - len(got), info.output_depth)
            data = self._request(Command.READ_OUTPUT, protocol.read_output_payload(want, want),
                                 extra_wait=info.timeout_s)
            got += data
            if data:
                continue
            status = self.status()
            if not status.busy and status.output_level == 0:
                raise LinkError(f"the accelerator stopped after sending {len(got):,} of "
                                f"{count:,} expected output bytes")
            if time.monotonic() > deadline:
                raise LinkError(f"the board sent {len(got):,} of {count:,} output bytes within "
                                f"{timeout:g} s (the accelerator is "
                                f"{'still running' if status.busy else 'stopped'})")
        return bytes(got)

    def flush(self):
        """Drop unread input and output bytes (refused while the accelerator runs)."""
        self._request(Command.FLUSH)

    def wait_idle(self, timeout=None):
        """Wait until the accelerator is not running; returns the last status."""
        deadline = time.monotonic() + (self.timeout if timeout is None else timeout)
        while True:
            status = self.status()
            if not status.busy:
                return status
            if time.monotonic() > deadline:
                raise LinkError(f"the accelerator is still running after "
                                f"{self.timeout if timeout is None else timeout:g} s: reset the "
                                f"board (or wait for its job to finish)")
            self._pause(0.001)

    # Transport -------------------------------------------------------------------------------

    def _info(self):
        return self.info if self.info is not None else self.ping()

    def _device_timeout(self):
        return self.info.timeout_s if self.info is not None else ASSUMED_DEVICE_TIMEOUT_S

    def _pause(self, seconds):
        idle = getattr(self.port, "idle", None)
        if callable(idle):
            idle(seconds)
        else:
            time.sleep(seconds)

    def _resync(self):
        """Let the board's parser time out of any partial frame, then drop stale bytes."""
        self._pause(2 * self._device_timeout() + 0.002)
        reset = getattr(self.port, "reset_input_buffer", None)
        if callable(reset):
            reset()
        else:
            waiting = getattr(self.port, "in_waiting", 0)
            if waiting:
                self.port.read(waiting)

    def _request(self, command, payload=b"", *, extra_wait=0.0):
        """Send one request and return the ACK's payload; resend as the module doc says."""
        frame = protocol.encode_frame(command, payload)
        attempts = 0
        while True:
            self._write(frame)
            self.stats.requests += 1
            try:
                reply_type, data = self._read_frame(self.timeout + extra_wait)
            except (_NoReply, FrameError) as problem:
                what = (f"no reply to {command.name} within {self.timeout + extra_wait:g} s"
                        if isinstance(problem, _NoReply) else
                        f"the reply to {command.name} failed its CRC check")
                if command in IDEMPOTENT and attempts < self.retries:
                    attempts += 1
                    self.stats.resent += 1
                    self._resync()
                    continue
                if isinstance(problem, _NoReply) and problem.received == 0:
                    check = (f"connected, programmed with an fpganet bitstream, and at "
                             f"{self.baud:,} baud" if self.baud else
                             "connected and programmed with an fpganet bitstream")
                    raise LinkError(f"{what} from {self.name}: is the board {check}?") from None
                state = "" if command in IDEMPOTENT else (
                    ": the board's state is now unknown (FLUSH, or reset it, and run again)")
                raise LinkError(f"{what} ({problem}){state}") from None
            if reply_type == protocol.ERROR_TYPE and len(data) == 2:
                try:
                    code = ErrorCode(data[0])
                except ValueError:
                    code = data[0]
                if code in (ErrorCode.BAD_CRC, ErrorCode.TRUNCATED) and attempts < self.retries:
                    attempts += 1
                    self.stats.resent += 1
                    if code == ErrorCode.TRUNCATED:
                        self._resync()
                    continue
                if code == ErrorCode.BAD_LENGTH:
                    self._resync()
                raise DeviceError(command, code)
            if reply_type != protocol.reply_type(command):
                raise LinkError(f"the board answered {command.name} with a frame of type "
                                f"{reply_type:#04x}: is another program using {self.name}?")
            return data

    def _write(self, data):
        try:
            written = self.port.write(data)
        except Exception as error:           # pyserial raises SerialException / SerialTimeout
            raise LinkError(f"cannot write to {self.name}: {error}") from None
        if written is not None and written != len(data):
            raise LinkError(f"wrote {written} of {len(data)} bytes to {self.name}")
        flush = getattr(self.port, "flush", None)
        if callable(flush):
            flush()
        self.stats.bytes_sent += len(data)

    def _read_exactly(self, count, deadline, received):
        data = bytearray()
        while len(data) < count:
            try:
                chunk = self.port.read(count - len(data))
            except LinkError:
                raise
            except Exception as error:
                raise LinkError(f"cannot read from {self.name}: {error}") from None
            data += chunk
            self.stats.bytes_received += len(chunk)
            if len(data) < count and time.monotonic() > deadline:
                raise _NoReply(received + len(data))
        return bytes(data)

    def _read_frame(self, timeout):
        deadline = time.monotonic() + timeout
        skipped = 0
        while self._read_exactly(1, deadline, skipped)[0] != protocol.SYNC:
            skipped += 1
        header = self._read_exactly(protocol.HEADER_BYTES - 1, deadline, skipped + 1)
        length = int.from_bytes(header[1:3], "little")
        rest = self._read_exactly(length + protocol.CRC_BYTES, deadline, skipped + 4)
        frame_type, payload, _ = protocol.split_frame(bytes([protocol.SYNC]) + header + rest)
        return frame_type, payload


class _NoReply(Exception):
    def __init__(self, received):
        super().__init__(f"{received} bytes received" if received else "nothing received")
        self.received = received
