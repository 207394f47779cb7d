"""iCE40 logic-cell cost of one component synthesized alone.

An iCE40 logic cell holds one LUT4, one carry and one flip-flop; nextpnr packs a
flip-flop with a LUT only when that LUT feeds nothing else. So a block's cell count is
about its LUT4s plus its "lonely" flip-flops (fed by another flip-flop, a block RAM, a
port, or a LUT with other loads). This module synthesizes a component with
``synth_ice40`` (flattened: the whole block is one module, which also keeps clear of
yosys 0.70's ABC9 assertion under ``-noflatten``) and counts those from the netlist.

``python -m fpganet.boards.cellcount`` prints the host link's blocks in the iCEBreaker's
configuration (the figures in docs/journal/boards.md and docs/reference/hostlink.md); with
``--accelerator`` the accelerator's blocks and the whole core, built as the iCEBreaker
builds them, in its default configuration or the one the configuration flags give
(``--pair-products yes --weight-buffer-bytes 131072`` ...). Blocks alone keep logic that
the whole design shares or removes (the registers' unused bits, the memories' ports), so
their sum differs from the core's count by some per cent.
"""

import argparse
import json
import subprocess
import sys
import tempfile
from collections import Counter
from pathlib import Path

from amaranth.back import rtlil

from fpganet.argtypes import add_config_arguments
from fpganet.boards.icebreaker import BAUD, BOARD, DEFAULT_CONFIG, accelerator_core, accelerator_options
from fpganet.config import ConfigError
from fpganet.errors import FpganetError
from fpganet.hdl.accelerator import Accelerator
from fpganet.hdl.controller import Controller
from fpganet.hdl.deframer import Deframer
from fpganet.hdl.executor import CommandExecutor
from fpganet.hdl.hostlink import HostLink, HostLinkCore
from fpganet.hdl.linkfifo import OutputFIFO, PacketFIFO
from fpganet.hdl.memories import ActivationBuffer, yosys_idle_written
from fpganet.hdl.pool import MaxPool
from fpganet.hdl.region import RegionUnit
from fpganet.hdl.replier import Replier
from fpganet.hdl.systolic import SystolicArray
from fpganet.hdl.spi_target import SPITarget
from fpganet.hdl.uart import UARTReceiver, UARTTransmitter
from fpganet.hdl.window import window_generator

from .build import check_buildable, config_from_args, toolchain_env

__all__ = ["ice40_cells", "count_cells", "host_link_blocks", "accelerator_blocks"]

_FLIP_FLOP_PREFIX = "SB_DFF"


def count_cells(netlist):
    """Counts of module ``top`` of a yosys JSON netlist: ``lut4``, ``carry``, ``ff``,
    ``lonely_ff``, ``ram`` (SB_RAM40_4K of any clocking), ``cells`` (LUT4 + lonely flip-flops)."""
    module = netlist["modules"]["top"]
    cells = module["cells"].values()
    loads = Counter()           # net bit -> cell inputs it feeds
    lut_of = {}                 # net bit -> the LUT4 driving it
    for name, cell in module["cells"].items():
        for port, bits in cell["connections"].items():
            if cell["port_directions"].get(port) == "input":
                loads.update(b for b in bits if isinstance(b, int))
        if cell["type"] == "SB_LUT4":
            lut_of[cell["connections"]["O"][0]] = name
    for port in module["ports"].values():
        if port["direction"] == "output":
            loads.update(b for b in port["bits"] if isinstance(b, int))
    types = Counter(cell["type"] for cell in cells)
    ff = lonely = 0
    for cell in cells:
        if not cell["type"].startswith(_FLIP_FLOP_PREFIX):
            continue
        ff += 1
        d = cell["connections"]["D"][0]
        if not (isinstance(d, int) and d in lut_of and loads[d] == 1):
            lonely += 1
    ram = sum(n for name, n in types.items() if name.startswith("SB_RAM40_4K"))
    return {"lut4": types["SB_LUT4"], "carry": types["SB_CARRY"], "ff": ff,
            "lonely_ff": lonely, "ram": ram,
            "cells": types["SB_LUT4"] + lonely}


def ice40_cells(component, *, script="synth_ice40 -top top", config=None):
    """Synthesize ``component`` alone for iCE40 and return :func:`count_cells`'s counts; with
    ``config``, the accelerator's, as the board build does (:func:`yosys_idle_written`)."""
    text = rtlil.convert(component, name="top")
    with tempfile.TemporaryDirectory() as folder:
        folder = Path(folder)
        (folder / "top.il").write_text(text)
        env = toolchain_env()
        commands = ["read_rtlil top.il", *(yosys_idle_written(config) if config else ()),
                    script, "write_json top.json"]
        subprocess.run([env["YOSYS"], "-q", "-p", "; ".join(commands)],
                       cwd=folder, check=True, env=env, stdout=subprocess.DEVNULL)
        return count_cells(json.loads((folder / "top.json").read_text()))


def host_link_blocks():
    """The host link and each of its blocks, fresh, in the iCEBreaker's configuration
    (its clock, 3 Mbaud)."""
    config = DEFAULT_CONFIG

    def core():
        return HostLinkCore(config, config.clock_hz, BAUD)
    c = core()
    return {
        "HostLink (UART included)": lambda: HostLink(config, config.clock_hz, BAUD),
        "HostLinkCore": core,
        "Deframer": lambda: Deframer(max_payload=c.max_payload, timeout_cycles=c.timeout_cycles),
        "CommandExecutor (staging buffer included)": lambda: CommandExecutor(
            config, addr_width=c.addr_width, input_depth=c.input_depth,
            output_depth=c.output_depth, max_write_bytes=c.max_write_bytes),
        "Replier": lambda: Replier(c.info.pack(), output_depth=c.output_depth),
        "PacketFIFO (input)": lambda: PacketFIFO(c.input_depth),
        "OutputFIFO": lambda: OutputFIFO(c.output_depth),
        "UARTReceiver": lambda: UARTReceiver(HostLink(config, config.clock_hz, BAUD).divisor),
        "UARTTransmitter": lambda: UARTTransmitter(HostLink(config, config.clock_hz, BAUD).divisor,
                                                   holding_register=not config.registered_host_output),
        "SPITarget (the SPI link's, instead of the UART)": SPITarget,
    }


def accelerator_blocks(config):
    """The accelerator's blocks and the whole core, as the iCEBreaker builds them for
    ``config`` (its PE, weight buffer and requantizer: ``icebreaker.accelerator_options``)."""
    def option(name):
        return accelerator_options(config)[name]      # a fresh factory (DSPPairing pairs)
    return {
        "window generator": lambda: window_generator(config),
        "systolic array": lambda: SystolicArray(config, pe=option("pe")),
        "result writer (requantizer included)": lambda: option("writer")(config),
        "controller (register file included)": lambda: Controller(config),
        "region unit": lambda: RegionUnit(config),
        "activation buffer": lambda: ActivationBuffer(config),
        "max-pool unit": lambda: MaxPool(config),
        "weight buffer": lambda: option("weights")(config),
        "Accelerator (the blocks above, memories, multiplexers)":
            lambda: Accelerator(config, **accelerator_options(config)),
        "the core: Accelerator behind the host link": lambda: accelerator_core(config),
    }


def _table(blocks, config):
    print("| block | LUT4 | SB_CARRY | FF | lonely FF | ~cells | EBR |")
    print("|---|---|---|---|---|---|---|")
    for name, factory in blocks.items():
        c = ice40_cells(factory(), config=config)
        row = (name, c["lut4"], c["carry"], c["ff"], c["lonely_ff"], c["cells"], c["ram"])
        print("| " + " | ".join(f"{v:,}" if isinstance(v, int) else v for v in row) + " |",
              flush=True)


def main(argv=None):
    parser = argparse.ArgumentParser(
        prog="python -m fpganet.boards.cellcount",
        description="iCE40 logic cells of each block, synthesized alone (synth_ice40): the host "
                    "link's blocks, or with --accelerator the accelerator's")
    parser.add_argument("--accelerator", action="store_true",
                        help="the accelerator's blocks and the whole core, in the iCEBreaker's "
                             "configuration changed by the flags below")
    add_config_arguments(parser)

    def one_line(message):
        print(f"cellcount: error: {message}", file=sys.stderr)
        sys.exit(2)

    parser.error = one_line
    args = parser.parse_args(argv)
    given = [name for name, value in vars(args).items()
             if value is not None and (name.startswith("config_") or name == "array")]
    try:
        if not args.accelerator:
            if given:
                raise FpganetError("the configuration flags need --accelerator (the host link's "
                                   "blocks are counted in the iCEBreaker's default)")
            _table(host_link_blocks(), None)
            return
        config = config_from_args(BOARD, args)
        check_buildable(BOARD, config)
    except (FpganetError, ConfigError) as error:
        one_line(error)
    print(f"iCEBreaker accelerator, array {config.name}, {config.macs_per_cycle} MACs/cycle "
          f"(synth_ice40 on each block alone; ~cells = LUT4 + lonely flip-flops)", flush=True)
    _table(accelerator_blocks(config), config)


if __name__ == "__main__":
    main()
