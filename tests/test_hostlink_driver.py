"""The host driver (BoardLink, run_images, ``fpganet board``) against the real HostLink
gateware in amaranth.sim (SimulatedPort), and its one-line errors."""

import random

import numpy as np
import pytest

from fpganet.cli import main as cli_main
from fpganet.codegen.images import read_images
from fpganet.config import AcceleratorConfig
from fpganet.hdl.accelerator import Accelerator
from fpganet.isa import HostSpace, Instruction, Opcode, Reg, encode
from fpganet.isasim import Machine
from fpganet.link import load_compiled_job, protocol
from fpganet.link import BoardLink, DeviceError, LinkError, run_images
from fpganet.link.cli import main
from fpganet.link.protocol import ErrorCode
from fpganet.link.simport import SimulatedPort

CONFIG = AcceleratorConfig(rows=2, cols=8)
SMALL = dict(input_depth=64, output_depth=64, max_write_bytes=64, timeout_cycles=400)


def control_word(inputs, echoes=0, weights=0, params=0):
    return inputs | echoes << 16 | weights << 32 | params << 48


def stand_in_job(rng, inputs=30, echoes=10, weights=3, params=1, images=3):
    """Memories and inputs of a job for the StandInDevice, and the outputs it must give."""
    lut = [rng.randrange(256) for _ in range(256)]
    w = [rng.randrange(1 << 16) for _ in range(weights)]
    p = [rng.randrange(1 << 64) for _ in range(params)]
    memories = {HostSpace.PROGRAM: [control_word(inputs, echoes, weights, params)],
                HostSpace.WEIGHTS: w, HostSpace.PARAMS: p, HostSpace.ACTIVATIONS: lut}
    data = [bytes(rng.randrange(256) for _ in range(inputs)) for _ in range(images)]
    tail = b"".join(x.to_bytes(2, "little") for x in w) + b"".join(x.to_bytes(8, "little") for x in p)
    expected = [bytes(lut[x] for x in image[:echoes]) + tail for image in data]
    return memories, data, expected


def test_run_images_on_the_gateware():
    rng = random.Random(5)
    memories, data, expected = stand_in_job(rng)
    port = SimulatedPort(CONFIG, **SMALL)
    link = BoardLink(port, timeout=5)
    run = run_images(link, memories, data, output_bytes=len(expected[0]), config=CONFIG)
    assert run.outputs == expected
    assert all(c > 0 for c in run.cycles)
    assert run.info.rows == 2 and run.info.input_depth == 64
    status = link.status()
    assert not status.busy and status.done_seen
    assert sum(status.errors.values()) == 0 and status.garbage == 0
    assert link.stats.resent == 0


def test_input_larger_than_the_fifo_is_flow_controlled():
    """A 200-byte image through a 64-byte input FIFO: START first, then NO_SPACE paces it."""
    rng = random.Random(6)
    memories, data, expected = stand_in_job(rng, inputs=200, echoes=40, images=1)
    link = BoardLink(SimulatedPort(CONFIG, **SMALL), timeout=5)
    run = run_images(link, memories, data, output_bytes=len(expected[0]))
    assert run.outputs == expected
    assert link.status().no_space > 0


def test_config_mismatch_is_refused_before_loading():
    link = BoardLink(SimulatedPort(CONFIG, **SMALL), timeout=5)
    other = AcceleratorConfig(rows=4, cols=8, act_buffer_bytes=4096, act_bank_factor=2)
    with pytest.raises(LinkError, match=r"compiled for a 4x8 accelerator that the board's 2x8 "
                                        r"accelerator is not \(rows 2 on the board but 4 compiled, "
                                        r"act_buffer_bytes 8,192 on the board but 4,096 compiled, "
                                        r"act_bank_factor 1 on the board but 2 compiled\)"):
        run_images(link, {HostSpace.PROGRAM: [0]}, [b"x"], output_bytes=1, config=other)
    assert link.status().frames == 2     # PING and this STATUS: nothing was loaded


def test_damaged_request_is_resent():
    """A bit flipped on the way to the board: BAD_CRC, no effect, the driver resends."""
    flips = {"left": 1}

    def damage(data):
        if flips["left"] and len(data) > 8:
            flips["left"] -= 1
            data = bytearray(data)
            data[8] ^= 0x04
        return bytes(data)

    port = SimulatedPort(CONFIG, **SMALL)
    link = BoardLink(port, timeout=5)
    link.ping()
    original = port.write
    port.write = lambda data: original(damage(data))
    link.write_memory(HostSpace.ACTIVATIONS, 0, list(range(40)))
    assert link.stats.resent == 1
    assert link.status().bad_crc == 1


def test_damaged_reply():
    """A damaged reply to STATUS is asked again; to READ_OUTPUT (bytes lost) it is an error."""
    state = {"armed": False}

    def damage(data):
        if state["armed"] and len(data) > 2:
            state["armed"] = False
            return bytes([data[0] ^ 0x80]) + data[1:]
        return data

    port = SimulatedPort(CONFIG, tamper=damage, **SMALL)
    link = BoardLink(port, timeout=5)
    link.ping()
    state["armed"] = True
    assert not link.status().busy
    assert link.stats.resent == 1
    link.write_memory(HostSpace.PROGRAM, 0, [control_word(0, 0, 2)])
    link.start()
    state["armed"] = True
    with pytest.raises(LinkError, match=r"the reply to READ_OUTPUT failed its CRC check .*state is "
                                        r"now unknown"):
        link.read_output(8)


def test_device_refusals_are_one_line_errors():
    link = BoardLink(SimulatedPort(CONFIG, **SMALL), timeout=5)
    link.write_memory(HostSpace.PROGRAM, 0, [control_word(5)])
    link.start()                                  # waits for 5 input bytes: stays busy
    with pytest.raises(DeviceError, match="the accelerator is running: the board refuses memory "
                                          "writes") as caught:
        link.write_memory(HostSpace.PROGRAM, 0, [0])
    assert caught.value.code == ErrorCode.BUSY
    with pytest.raises(LinkError, match="still running: START refused"):
        link.start(wait=0.01)
    with pytest.raises(LinkError, match="do not fit the board's 512-word PARAMS memory"):
        link.write_memory(HostSpace.PARAMS, 510, [0, 0, 0])
    link.send_input(bytes(5))
    # The job sends only its 4-byte stamp: asking for more ends with a clear message.
    with pytest.raises(LinkError, match="stopped after sending 4 of 10 expected output bytes"):
        link.read_output(10)


class SilentLine:
    """A port with nothing on the other end (a board without the bitstream)."""
    name = "/dev/ttyTEST"

    def write(self, data):
        return len(data)

    def read(self, count=1):
        return b""


def test_no_reply():
    link = BoardLink(SilentLine(), timeout=0.05, retries=1)
    with pytest.raises(LinkError, match=r"^no reply to PING within 0.05 s from /dev/ttyTEST: is "
                                        r"the board connected, programmed with an fpganet "
                                        r"bitstream, and at 3,000,000 baud\?$"):
        link.ping()
    assert link.stats.resent == 1


def test_missing_port(capsys):
    with pytest.raises(LinkError, match=r"cannot open serial port '/dev/fpganet-no-such-port' at "
                                        r"3,000,000 baud: No such file or directory"):
        BoardLink("/dev/fpganet-no-such-port")
    assert main(["ping", "--port", "/dev/fpganet-no-such-port"]) == 2
    err = capsys.readouterr().err
    assert err.startswith("fpganet: error: cannot open serial port") and err.count("\n") == 1


def test_protocol_reference_values():
    assert protocol.crc16(b"123456789") == 0x29B1          # CRC-16/CCITT-FALSE check value
    frame = protocol.encode_frame(protocol.Command.PING)
    assert frame == bytes([0xA5, 0x01, 0x00, 0x00]) + protocol.crc16(b"\x01\x00\x00").to_bytes(2, "big")
    assert protocol.crc16(frame[1:]) == 0
    assert protocol.write_payload(HostSpace.WEIGHTS, 0x123456, [0xBEEF], 2) == \
        bytes([1, 0x56, 0x34, 0x12, 0xEF, 0xBE])
    with pytest.raises(ValueError, match="does not fit the 2 bytes of space 1"):
        protocol.write_payload(HostSpace.WEIGHTS, 0, [1 << 16], 2)


def test_board_run_reads_the_compiled_directory(tmp_path, capsys):
    """`fpganet board run`: the compiled LeNet-5 becomes memory words and input bytes (the
    compiler API in one function); a missing port is a one-line error."""
    out = tmp_path / "lenet"
    assert cli_main(["compile", "-o", str(out), "--array", "2x8"]) == 0
    job = load_compiled_job(out)
    images = read_images(out).for_images(1)
    assert job.config == CONFIG
    assert (job.input_bytes, job.output_bytes) == (784, 10)
    assert job.memories[HostSpace.PROGRAM] == [int(w) for w in images.program]
    assert job.memories[HostSpace.WEIGHTS] == images.words(HostSpace.WEIGHTS)
    capsys.readouterr()
    assert main(["run", str(out), "--port", "/dev/fpganet-no-such-port", "--limit", "2"]) == 2
    err = capsys.readouterr().err
    assert err.startswith("fpganet: error: cannot open serial port") and err.count("\n") == 1


def test_several_images_a_start():
    """A program that runs two images a START (``--batch 2``): the driver sends both inputs
    before the START, zeros for a missing last one, and keeps the real images' outputs."""
    config = AcceleratorConfig(rows=2, cols=4, weight_buffer_bytes=256, act_buffer_bytes=256,
                               bias_buffer_words=16, program_words=32)
    region = [(Reg.IO_BASE, 16), (Reg.IO_CHANNELS, 1), (Reg.IO_CSTRIDE, 8), (Reg.IO_ROWS, 1),
              (Reg.IO_PITCH, 8), (Reg.IO_LEN, 5)]
    program = [encode(Instruction(Opcode.SET, reg, value)) for reg, value in region]
    program += [encode(Instruction(op)) for op in (Opcode.INPUT, Opcode.OUTPUT, Opcode.STAMP) * 2]
    program.append(encode(Instruction(Opcode.END)))
    images = [bytes(range(10 * i, 10 * i + 5)) for i in range(3)]
    port = SimulatedPort(config, device=lambda config, addr_width: Accelerator(config), **SMALL)
    link = BoardLink(port, timeout=10)
    seen = []
    run = run_images(link, {HostSpace.PROGRAM: program}, images, output_bytes=5, config=config,
                     images_per_start=2, progress=lambda i, out, cycles: seen.append(i))
    assert run.outputs == images and seen == [0, 1, 2]
    assert run.cycles[0] < run.cycles[1] and run.cycles[2] == run.cycles[0]
    assert len(run.image_seconds) == 3 and link.status().done_seen


def test_real_accelerator_through_the_link():
    """The driver loads a program into the real Accelerator through HostLinkCore, streams two
    images through INPUT/OUTPUT/STAMP, and gets what the ISA simulator gives."""
    config = AcceleratorConfig(rows=2, cols=4, weight_buffer_bytes=256, act_buffer_bytes=256,
                               bias_buffer_words=16, program_words=32)
    region = [(Reg.IO_BASE, 16), (Reg.IO_CHANNELS, 2), (Reg.IO_CSTRIDE, 32), (Reg.IO_ROWS, 2),
              (Reg.IO_PITCH, 8), (Reg.IO_LEN, 3)]
    program = [encode(Instruction(Opcode.SET, reg, value)) for reg, value in region]
    program += [encode(Instruction(op)) for op in (Opcode.INPUT, Opcode.OUTPUT, Opcode.STAMP,
                                                   Opcode.END)]
    images = [bytes(range(1, 13)), bytes(range(200, 212))]
    machine = Machine(config)
    machine.program[:len(program)] = np.array(program, dtype=np.uint64)
    expected = [bytes(machine.run(image))[:12] for image in images]

    port = SimulatedPort(config, device=lambda config, addr_width: Accelerator(config), **SMALL)
    link = BoardLink(port, timeout=10)
    run = run_images(link, {HostSpace.PROGRAM: program}, images, output_bytes=12, config=config)
    assert run.outputs == expected == images
    assert run.cycles[0] == run.cycles[1] > 12
    assert link.status().done_seen
