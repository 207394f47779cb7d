"""The host driver over the SPI link (SPIPort) against the real SPI host link gateware in
amaranth.sim (SimulatedSPIBus): the same jobs, refusals and recoveries as over the UART."""

import random

import pytest

from fpganet.config import AcceleratorConfig
from fpganet.link import BoardLink, LinkError, run_images, spi_wire
from fpganet.link.protocol import DeviceInfo
from fpganet.link.simport import SimulatedSPIBus
from fpganet.link.spi import SPIPort

from test_hostlink_driver import CONFIG, SMALL, stand_in_job


def spi_link(read_ahead=64, **options):
    bus = SimulatedSPIBus(CONFIG, **SMALL, **options)
    return BoardLink(SPIPort(bus, timeout=5, read_ahead=read_ahead), timeout=5), bus


@pytest.mark.parametrize("read_ahead", [64, 4])
def test_run_images_over_spi(read_ahead):
    """A job loaded and run: the outputs the device gives, PING naming the SPI link, no
    error counted; with a short read-ahead the replies come in several transactions."""
    rng = random.Random(5)
    memories, data, expected = stand_in_job(rng)
    link, _ = spi_link(read_ahead)
    run = run_images(link, memories, data, output_bytes=len(expected[0]), config=CONFIG)
    assert run.outputs == expected
    assert run.info.link_names == ["spi"] and run.info.queued_start
    status = link.status()
    assert sum(status.errors.values()) == 0 and status.garbage == 0 and status.overruns == 0
    assert link.stats.resent == 0


def test_noise_and_cut_transactions_are_survived():
    """Transactions with a wrong command, and one cut inside a frame: nothing reaches the
    parser from the first, the second times out (TRUNCATED), and the link works after."""
    rng = random.Random(7)
    memories, data, expected = stand_in_job(rng, images=1)
    link, bus = spi_link()
    link.ping()
    noise = bytes([0x00, 0x03, 0x00]) + b"\xA5\x01\x00\x00" * 4
    assert bus.exchange(noise)[0] == spi_wire.MAGIC
    cut = spi_wire.transaction(b"\xA5\x05\x20\x00" + bytes(10))      # promises 32 bytes
    bus.exchange(cut)
    bus.idle(2 * link.info.timeout_s)
    reply = SPIPort(bus, timeout=1).read(8)
    assert reply[1] == 0xFF and reply[4] == 4                         # ERROR TRUNCATED
    run = run_images(link, memories, data, output_bytes=len(expected[0]))
    assert run.outputs == expected
    status = link.status()
    assert status.truncated == 1 and status.garbage == 0


def test_a_port_without_the_link_is_one_line():
    class Floating:
        def exchange(self, mosi):
            return bytes([0xFF]) * len(mosi)

    link = BoardLink(SPIPort(Floating(), timeout=0.05, name="ftdi://x/1"), timeout=0.05)
    with pytest.raises(LinkError, match=r"^the SPI target answered 0xff, not the link's 0x5a on "
                                        r"ftdi://x/1: is the board programmed"):
        link.ping()


def test_board_commands_refuse_in_one_line(capsys):
    """No FTDI device (or no libusb) behind --link spi, and no --port for the UART: one line,
    exit status 2."""
    from fpganet.link.cli import main
    assert main(["ping", "--link", "spi", "--port", "ftdi://ftdi:2232h/9"]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and err[0].startswith("fpganet: error: cannot open the SPI link at "
                                               "ftdi://ftdi:2232h/9: "), err
    assert main(["status"]) == 2
    assert capsys.readouterr().err.strip() == ("fpganet: error: give --port, the board's serial "
                                               "device (or --link spi)")


@pytest.mark.parametrize("argv, message", [
    (["--board", "ulx3s", "--link", "spi"], "the ulx3s has no SPI link to its host (it has UART)"),
    (["--board", "icebreaker", "--link", "spi", "--core", "stand-in"],
     "the stand-in has no host link: --link spi needs the accelerator or a compiled engine"),
])
def test_synth_refuses_a_link_the_board_or_core_lacks(argv, message, capsys, tmp_path):
    from fpganet.boards.build import main
    assert main([*argv, "-o", str(tmp_path / "out")]) == 2
    assert capsys.readouterr().err.strip() == f"fpganet: error: {message}"
    assert not (tmp_path / "out").exists()


def test_reset_input_buffer_drains_the_board():
    """A reply left on the board (its transaction clocked none of it back) is drained by
    reset_input_buffer: the next request gets its own reply."""
    from fpganet.link.protocol import Command, encode_frame
    bus = SimulatedSPIBus(CONFIG, **SMALL)
    port = SPIPort(bus, timeout=5)
    port.write(encode_frame(Command.PING))
    port.transact(0)                      # the request goes; its reply stays on the board
    port.reset_input_buffer()
    link = BoardLink(port, timeout=5)
    assert link.status().frames == 2      # PING and this STATUS: no stale PING reply read


@pytest.mark.parametrize("options, message", [
    (dict(timeout=0), "timeout must be a positive number of seconds, not 0"),
    (dict(read_ahead=0), "read_ahead must be a positive integer, not 0"),
])
def test_port_parameters_checked(options, message):
    class Bus:
        def exchange(self, mosi):
            return bytes(len(mosi))

    with pytest.raises(ValueError, match=f"^{message}$"):
        SPIPort(Bus(), **options)
