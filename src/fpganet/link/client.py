"""Host driver of the board's UART host link (``fpganet board ...``).

:class:`BoardLink` speaks the frame protocol of :mod:`fpganet.board.protocol` over
any object with ``read(n)`` and ``write(data)``: a pyserial ``Serial`` (opened for
you when ``port`` is a path such as ``/dev/ttyUSB1`` or ``COM5``), or a simulated
port whose other end is the HostLink gateware in a simulator
(:class:`fpganet.board.simport.SimulatedPort`, the cocotb testbench's port).

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
import sys
import time
from dataclasses import dataclass, field

from ..argtypes import positive_float, positive_int
from ..codegen.images import LOAD_ORDER, STAMP_BYTES
from ..errors import FpganetError
from ..files import check_output_file, write_npz
from ..isa import HostSpace
from . import protocol
from .protocol import Command, DeviceInfo, ErrorCode, FrameError, Status

__all__ = ["BoardLink", "LinkError", "DeviceError", "BoardRun", "run_images", "open_serial",
           "load_compiled_job", "CompiledJob", "main", "add_arguments", "run_command",
           "DEFAULT_BAUD", "STAMP_BYTES"]

DEFAULT_BAUD = 3_000_000
#: The device's inter-byte timeout assumed before PING has told it.
ASSUMED_DEVICE_TIMEOUT_S = 0.05
IDEMPOTENT = frozenset({Command.PING, Command.STATUS, Command.WRITE, Command.FLUSH})


class LinkError(FpganetError):
    """The board cannot be reached or did not do what was asked (one-line message)."""


class DeviceError(LinkError):
    """The board answered a request with an ERROR reply (``code``: :class:`ErrorCode`)."""

    def __init__(self, command, code, message=None):
        self.command = Command(command)
        self.code = code
        name = code.name if isinstance(code, ErrorCode) else f"error {code}"
        super().__init__(message or f"the board refused {self.command.name}: {name}")


def open_serial(path, baud=DEFAULT_BAUD, timeout=1.0):
    """Open a serial port 8N1 with pyserial; errors as :class:`LinkError`."""
    try:
        import serial
    except ImportError:
        raise LinkError("talking to a board needs pyserial (pip install pyserial==3.5)") from None
    try:
        port = serial.Serial(os.fspath(path), baudrate=baud, timeout=timeout,
                             write_timeout=max(timeout, 1.0))
    except (serial.SerialException, OSError, ValueError) as error:
        errno = getattr(error, "errno", None)
        reason = os.strerror(errno) if isinstance(errno, int) else str(error)
        raise LinkError(f"cannot open serial port '{os.fspath(path)}' at {baud:,} baud: "
                        f"{reason}") from None
    # Every request waits for a short reply, which an FTDI chip holds back for its latency
    # timer (16 ms by default on Linux); low-latency mode makes it 1 ms. Best effort.
    try:
        port.set_low_latency_mode(True)
    except (AttributeError, NotImplementedError, ValueError, OSError, serial.SerialException):
        pass
    return port


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
        :class:`~fpganet.board.protocol.DeviceInfo`."""
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

    def check_config(self, config):
        """Raise :class:`LinkError` unless the board's accelerator matches ``config`` (an
        :class:`~fpganet.config.AcceleratorConfig`) in every field a compiled program
        depends on."""
        info = self._info()
        mismatches = info.mismatches(config)
        if mismatches:
            details = ", ".join(f"{name} {board:,} on the board but {compiled:,} compiled"
                                for name, board, compiled in mismatches)
            raise LinkError(f"the network was compiled for a {config.name} accelerator that the "
                            f"board's {info.name} accelerator is not ({details}): compile it "
                            f"again with the board's configuration")
        return info

    def status(self):
        """The board's :class:`~fpganet.board.protocol.Status`."""
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

    def start(self, wait=None):
        """Start the accelerator; if it is still running, wait up to ``wait`` seconds
        (default: the link's timeout) for it to stop first."""
        deadline = time.monotonic() + (self.timeout if wait is None else wait)
        while True:
            try:
                self._request(Command.START)
                return
            except DeviceError as error:
                if error.code != ErrorCode.BUSY or time.monotonic() > deadline:
                    if error.code == ErrorCode.BUSY:
                        raise DeviceError(Command.START, error.code,
                                          "the accelerator is still running: START refused") \
                            from None
                    raise
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
                    self._pause(0.001)
                continue
            position += len(chunk)
            limit = info.input_depth
            last_progress = time.monotonic()

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
                    raise LinkError(f"{what} from {self.name}: is the board connected, "
                                    f"programmed with an fpganet bitstream, and at "
                                    f"{self.baud:,} baud?") from None
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


# Running a compiled network ------------------------------------------------------------------

@dataclass
class BoardRun:
    """What :func:`run_images` measured.

    Attributes
    ----------
    outputs : list of bytes
        Each image's output bytes (without the stamp).
    cycles : list of int
        Each image's cycle stamp (the accelerator's counter at its STAMP).
    image_seconds : list of float
        Wall time per image: from the previous image's output (the first: from sending
        its input) to this image's output. The next image's input is sent while an
        image computes, so this is the time per image of a long run.
    load_seconds : float
        Wall time of the memory load.
    stats : LinkStats
    info : DeviceInfo
    """
    outputs: list = field(default_factory=list)
    cycles: list = field(default_factory=list)
    image_seconds: list = field(default_factory=list)
    load_seconds: float = 0.0
    stats: LinkStats = None
    info: DeviceInfo = None


def run_images(link, memories, inputs, *, output_bytes, stamp_bytes=STAMP_BYTES, config=None,
               timeout=10.0, progress=None):
    """Load a compiled network once, then run it on each image, sending each image's input
    while the previous one computes (the host link's input FIFO holds it).

    Parameters
    ----------
    link : BoardLink
    memories : dict
        ``{HostSpace: words}``: the words (integers) of each memory from address 0, as the
        host write port takes them (program words, weight words with byte ``i`` = array row
        ``i``, parameter entries, activation bytes). The program must process one image per
        START and end with the image's outputs and a STAMP.
    inputs : iterable of bytes
        Each image's input-stream bytes.
    output_bytes : int
        Output bytes per image, before the ``stamp_bytes`` of the cycle stamp.
    config : AcceleratorConfig, optional
        Refuse a board whose accelerator differs from it.
    timeout : float
        Seconds one image may take.
    progress : callable, optional
        ``progress(index, output, cycles)`` after each image.

    Returns
    -------
    BoardRun
    """
    info = link.ping()
    if config is not None:
        link.check_config(config)
    link.wait_idle(timeout)
    link.flush()
    began = time.monotonic()
    for space in LOAD_ORDER:
        if memories.get(space) is not None and len(memories[space]):
            link.write_memory(space, 0, memories[space])
    result = BoardRun(load_seconds=time.monotonic() - began, stats=link.stats, info=info)
    record = output_bytes + stamp_bytes

    def fits(data):
        return len(data) <= info.input_depth

    def launch(data):
        # An image that fits the input FIFO is queued before START; a larger one is streamed
        # while the accelerator consumes it.
        if fits(data):
            link.send_input(data, timeout=timeout)
            link.start(wait=timeout)
        else:
            link.start(wait=timeout)
            link.send_input(data, timeout=timeout)

    images = iter(inputs)
    current = next(images, None)
    if current is None:
        return result
    current = bytes(current)
    began = time.monotonic()
    launch(current)
    index = 0
    while current is not None:
        following = next(images, None)
        following = None if following is None else bytes(following)
        # The next image goes into the input FIFO while this one computes (its bytes wait
        # there until the program's INPUT of the next run): the link works while the
        # accelerator does, the double buffering of the whole system.
        # Only when both images fit the FIFO together: a SEND_INPUT that finds the FIFO still
        # holding this image's bytes would be refused (NO_SPACE) and cost a STATUS round trip.
        queued = following is not None and len(current) + len(following) <= info.input_depth
        if queued:
            link.send_input(following, timeout=timeout)
        out = link.read_output(record, timeout=timeout)
        cycles = int.from_bytes(out[output_bytes:], "little")
        result.outputs.append(out[:output_bytes])
        result.cycles.append(cycles)
        now = time.monotonic()
        result.image_seconds.append(now - began)
        began = now
        if progress is not None:
            progress(index, out[:output_bytes], cycles)
        if following is not None:
            if queued:
                link.start(wait=timeout)
            else:
                launch(following)
        current = following
        index += 1
    return result


# The compiled directory (compiler API) -------------------------------------------------------

@dataclass
class CompiledJob:
    """What the board run needs from a compiled directory."""
    config: object                 # AcceleratorConfig
    memories: dict                 # {HostSpace: [int]}
    input_bytes: int               # per image
    output_bytes: int              # per image, without the stamp
    quantize: object               # float x [N, ...] -> int8 [N, C, H, W]
    dequantize: object             # int8 [N, ...] -> float32 logits
    input_shape: tuple             # float input shape of one sample
    output_shape: tuple            # int8 output shape of one sample
    input_name: str = "input"
    embedded: bool = False


def load_compiled_job(out_dir):
    """COMPILER API: the one function that reads the compiler's output.

    Reads ``out_dir`` (written by ``fpganet compile``) through
    :func:`fpganet.compiler.load_compiled` and
    :func:`fpganet.codegen.images.read_images`, and returns a :class:`CompiledJob` of
    simple types. The program is the one-image variant (``for_images(1)``): one START per
    image. If the compiled-images API changes, only this function changes.
    """
    from ..codegen.images import read_images
    from ..compiler import load_compiled

    net = load_compiled(out_dir)
    images = read_images(out_dir)
    if images.batch > 1:
        # One START runs one pass of the program's loop: B images at --batch B, which the
        # per-image protocol of run_images does not send.
        raise FpganetError(f"'{out_dir}' was compiled with --batch {images.batch}; the board "
                           f"driver runs one image per START: compile it with --batch 1")
    images = images.for_images(1)
    memories = {space: images.words(space) for space in images.memories}
    return CompiledJob(config=images.config, memories=memories,
                       input_bytes=images.streams.input_bytes,
                       output_bytes=images.streams.output_bytes,
                       quantize=net.quantize_input, dequantize=net.dequantize_output,
                       input_shape=tuple(net.input_shape),
                       output_shape=tuple(images.streams.output_shape),
                       input_name=net.input_name, embedded=bool(net.source.get("embedded")))


# Command line --------------------------------------------------------------------------------

def add_arguments(parser):
    """Add the ``board`` subcommands (``run``, ``ping``, ``status``) to ``parser``."""
    subparsers = parser.add_subparsers(dest="board_command", metavar="ACTION", required=True)

    def common(sub):
        sub.add_argument("--port", required=True, metavar="PORT",
                         help="serial device of the board's UART (/dev/ttyUSB1, COM5...)")
        sub.add_argument("--baud", type=positive_int, default=DEFAULT_BAUD,
                         help=f"line rate of the bitstream (default {DEFAULT_BAUD:,})")
        sub.add_argument("--timeout", type=positive_float, default=2.0, metavar="S",
                         help="seconds to wait for a reply or an image (default 2)")

    run = subparsers.add_parser("run", help="run a compiled network on the board")
    run.add_argument("compiled", metavar="OUT", help="directory written by fpganet compile")
    common(run)
    run.add_argument("--inputs", metavar="X.npz",
                     help="array 'x' float32 [N, C, H, W], optional labels 'y' [N]; default "
                          "for the embedded LeNet-5: MNIST eval split")
    run.add_argument("--limit", type=positive_int, metavar="N", help="only the first N inputs")
    run.add_argument("--out", metavar="R.npz",
                     help="write 'logits', 'q' and 'cycles' (uint32 stamp per image)")
    common(subparsers.add_parser("ping", help="print the board's accelerator configuration"))
    common(subparsers.add_parser("status", help="print the board's state and error counters"))


def run_command(args):
    """Run a parsed ``board`` command; returns the exit status. Raises FpganetError."""
    if args.board_command == "run":
        return _run_network_command(args)
    with BoardLink(args.port, args.baud, args.timeout) as link:
        if args.board_command == "ping":
            info = link.ping()
            for name, value in info.__dict__.items():
                print(f"{name:20s} {value:,}" if isinstance(value, int) else f"{name:20s} {value}")
            return 0
        if args.board_command == "status":
            status = link.status()
            print(f"busy {status.busy}, done {status.done}, done since START "
                  f"{status.done_seen}, cycles {status.cycles:,}")
            for name, value in status.__dict__.items():
                if name not in ("flags", "cycles"):
                    print(f"{name:16s} {value:,}")
            return 0
    raise LinkError(f"unknown board action '{args.board_command}'")


def _run_network_command(args):
    import numpy as np

    job = load_compiled_job(args.compiled)
    if args.out:
        check_output_file(args.out, inputs=(args.inputs, args.compiled))
    if args.inputs is not None:
        from ..compiler import read_inputs
        x, y = read_inputs(args.inputs, job.input_shape, input_name=job.input_name)
        where = f"'{args.inputs}'"
    elif job.embedded:
        from ..datasets import mnist
        x, y = mnist("eval")
        where = "the embedded MNIST eval split"
    else:
        raise LinkError("--inputs X.npz is required (the network is not the embedded LeNet-5)")
    if args.limit is not None:
        x = x[:args.limit]
        y = None if y is None else y[:args.limit]
    q_in = job.quantize(x)
    images = [np.ascontiguousarray(q_in[i]).tobytes() for i in range(len(q_in))]
    assert all(len(image) == job.input_bytes for image in images)

    with BoardLink(args.port, args.baud, args.timeout) as link:
        run = run_images(link, job.memories, images, output_bytes=job.output_bytes,
                         config=job.config, timeout=args.timeout)
    q = np.frombuffer(b"".join(run.outputs), dtype=np.int8).reshape(len(images), *job.output_shape)
    logits = job.dequantize(q)
    cycles = np.array(run.cycles, dtype=np.uint32)
    if args.out:
        write_npz(args.out, "board run", inputs=(args.inputs, args.compiled), logits=logits, q=q,
                  cycles=cycles)
    count = len(images)
    per_image = sum(run.image_seconds) / count
    info = run.info
    print(f"loaded {run.stats.bytes_sent:,} bytes in {run.load_seconds:.2f} s; {count} images of "
          f"{where}: {per_image * 1e3:.2f} ms per image over the link, "
          f"{float(np.mean(cycles)):,.0f} accelerator cycles per image "
          f"({float(np.mean(cycles)) / info.clock_hz * 1e6:.1f} us at {info.clock_hz / 1e6:g} MHz)")
    if y is not None:
        correct = int(np.sum(q.reshape(count, -1).argmax(axis=1) == y))
        print(f"top-1 accuracy {100 * correct / count:.2f} % ({correct} of {count} correct), "
              f"measured on the board")
    if args.out:
        print(f"wrote {args.out} (logits, q, cycles)")
    return 0


def main(argv=None):
    """``python -m fpganet.board.driver``: the same as ``fpganet board``."""
    from ..cli import main as cli_main
    return cli_main(["board", *(sys.argv[1:] if argv is None else argv)])


if __name__ == "__main__":
    sys.exit(main())
