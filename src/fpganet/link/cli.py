"""``fpganet board run | ping | status``: the command line of the host link."""

import sys

import numpy as np

from ..argtypes import positive_float, positive_int
from ..command_line import run_subcommand
from ..compiler import read_inputs
from ..datasets import mnist
from ..errors import FpganetError
from ..files import check_output_file, write_npz
from .client import BoardLink
from .job import load_compiled_job
from .runner import run_images
from .spi import DEFAULT_SCK_HZ, open_spi
from .transport import DEFAULT_BAUD, LinkError

__all__ = ["add_arguments", "run_command", "main"]


def add_arguments(parser):
    """Add the ``board`` subcommands (``run``, ``ping``, ``status``) to ``parser``."""
    subparsers = parser.add_subparsers(dest="board_command", metavar="ACTION", required=True)

    def common(sub):
        sub.add_argument("--link", choices=("uart", "spi"), default="uart",
                         help="the host link to use: the UART (default) or SPI on the FTDI's "
                              "MPSSE channel (a bitstream built with fpganet synth --link spi)")
        sub.add_argument("--port", metavar="PORT",
                         help="the UART's serial device (/dev/ttyUSB1, COM5...; required with "
                              f"--link uart), or with --link spi the FTDI channel's pyftdi URL "
                              f"(default {SPI_URL})")
        sub.add_argument("--baud", type=positive_int, default=DEFAULT_BAUD,
                         help=f"line rate of the bitstream (default {DEFAULT_BAUD:,})")
        sub.add_argument("--sck-mhz", type=positive_float, default=DEFAULT_SCK_HZ / 1e6,
                         metavar="MHZ", help=f"SPI clock with --link spi (default "
                                             f"{DEFAULT_SCK_HZ / 1e6:g})")
        sub.add_argument("--timeout", type=positive_float, default=2.0, metavar="S",
                         help="seconds to wait for a reply or an image (default 2)")

    run = subparsers.add_parser("run", help="run a compiled network on the board")
    run.add_argument("compiled", metavar="OUT", help="directory written by fpganet compile")
    common(run)
    run.add_argument("--inputs", metavar="X.npz",
                     help="array 'x' float32 [N, ...] shaped as the model's input (its own "
                          "layout), optional labels 'y' [N]; default for the embedded LeNet-5: "
                          "MNIST eval split")
    run.add_argument("--limit", type=positive_int, metavar="N", help="only the first N inputs")
    run.add_argument("--out", metavar="R.npz",
                     help="write 'logits', 'q' and 'cycles' (uint32 stamp per image)")
    common(subparsers.add_parser("ping", help="print the board's accelerator configuration"))
    common(subparsers.add_parser("status", help="print the board's state and error counters"))


#: pyftdi's URL of the first FT2232H's channel A: the iCEBreaker's MPSSE channel.
SPI_URL = "ftdi://ftdi:2232h/1"


def open_link(args):
    """A :class:`BoardLink` on the link ``args`` name (LinkError in one line)."""
    if args.link == "uart":
        if args.port is None:
            raise LinkError("give --port, the board's serial device (or --link spi)")
        return BoardLink(args.port, args.baud, args.timeout)
    port = open_spi(args.port or SPI_URL, args.sck_mhz * 1e6, timeout=args.timeout)
    link = BoardLink(port, timeout=args.timeout)
    link.baud = None        # no line rate to check: the host clocks SPI
    return _OwnedLink(link)


class _OwnedLink:
    """A BoardLink on a port opened here, closed with it."""

    def __init__(self, link):
        self.link = link

    def __enter__(self):
        return self.link

    def __exit__(self, *exc):
        self.link.port.close()      # SPIPort.close: never raises


def run_command(args):
    """Run a parsed ``board`` command; returns the exit status. Raises FpganetError."""
    if args.board_command == "run":
        return _run_network_command(args)
    with open_link(args) as link:
        if args.board_command == "ping":
            info = link.ping()
            for name, value in info.__dict__.items():
                packed = {"options": info.OPTION_FIELDS, "banking": info.BANKING_FIELDS,
                          "features": info.FEATURE_FIELDS}
                if name in packed:      # decoded: the fields they pack
                    for option in packed[name]:
                        print(f"{option:20s} {getattr(info, option)}")
                    continue
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
    job = load_compiled_job(args.compiled)
    if args.out:
        check_output_file(args.out, inputs=(args.inputs, args.compiled))
    if args.inputs is not None:
        x, y = read_inputs(args.inputs, job.input_shape, input_name=job.input_name,
                           layout=job.input_layout)
        where = f"'{args.inputs}'"
    elif job.embedded:
        x, y = mnist("eval")
        where = "the embedded MNIST eval split"
    else:
        raise LinkError("--inputs X.npz is required (the network is not the embedded LeNet-5)")
    if args.limit is not None:
        x = x[:args.limit]
        y = None if y is None else y[:args.limit]
    images = job.encode(job.quantize(x))
    assert all(len(image) == job.input_bytes for image in images)

    with open_link(args) as link:
        run = run_images(link, job.memories, images, output_bytes=job.output_bytes,
                         config=job.config, timeout=args.timeout, images_per_start=job.batch,
                         design=job.design)
    q = job.decode(run.outputs)
    logits = job.dequantize(q)
    cycles = np.array(run.cycles, dtype=np.uint32)
    if args.out:
        write_npz(args.out, "board run", inputs=(args.inputs, args.compiled), logits=logits, q=q,
                  cycles=cycles)
    count = len(images)
    per_image = sum(run.image_seconds) / count
    info = run.info
    # An image's stamp counts from its START, which runs B images at --batch B (a short last
    # group padded with zero images): a START's last stamp covers B.
    last = cycles[job.batch - 1::job.batch] if count >= job.batch else cycles[-1:]
    per_image_cycles = float(np.mean(last)) / job.batch
    batch = f" (--batch {job.batch}: {job.batch} images a START)" if job.batch > 1 else ""
    print(f"loaded {run.stats.bytes_sent:,} bytes in {run.load_seconds:.2f} s; {count} images of "
          f"{where}: {per_image * 1e3:.2f} ms per image over the link, "
          f"{per_image_cycles:,.0f} accelerator cycles per image{batch} "
          f"({per_image_cycles / info.clock_hz * 1e6:.1f} us at {info.clock_hz / 1e6:g} MHz)")
    if y is not None:
        correct = int(np.sum(q.reshape(count, -1).argmax(axis=1) == y))
        print(f"top-1 accuracy {100 * correct / count:.2f} % ({correct} of {count} correct), "
              f"measured on the board")
    if args.out:
        print(f"wrote {args.out} (logits, q, cycles)")
    return 0


def main(argv=None):
    """``python -m fpganet.link.cli``: the same as ``fpganet board``."""
    return run_subcommand("board", add_arguments, run_command, argv)


if __name__ == "__main__":
    sys.exit(main())
