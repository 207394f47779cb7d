"""cocotb testbench of a board's synthesized netlist with a small device behind its UART host
link (``tests/test_board_netlist.py``): the board top-level's PLL, power-on reset and pins
work, and the real host driver talks to the link through them.

The design is the netlist under :func:`fpganet.boards.netlist.board_harness` (ports ``rx``,
``tx``, ``status``); the host is :class:`fpganet.link.BoardLink` in a ``cocotb.task.bridge``
thread, as in :mod:`fpganet.sim.tb_system`, whose :class:`~fpganet.sim.tb_system.SystemTB`
this uses with the same parameters (``FPGANET_TB``: ``config``, ``clock_hz``, ``baud``,
``timeout_cycles``, ``reset_ps``).
"""

import cocotb
from cocotb.task import bridge

from fpganet.isa import HostSpace
from fpganet.link import BoardLink
from fpganet.sim.tb_hostlink import parameters
from fpganet.sim.tb_system import HOST_TIMEOUT_S, SystemTB

#: Words written to the device's parameter memory and read back.
WORDS = [0x0123_4567_89AB_CDEF, 0xFEDC_BA98_7654_3210, 1]


@cocotb.test()
async def ping_write_status_over_the_pins(dut):
    """PING answered with the design's parameters, a WRITE acknowledged, STATUS with no
    error counted."""
    tb = SystemTB(dut, parameters())
    await tb.start()

    def host():
        link = BoardLink(tb.port, timeout=HOST_TIMEOUT_S)
        info = link.ping()
        link.write_memory(HostSpace.PARAMS, 0, WORDS)
        return info, link.status(), link

    info, status, link = await bridge(host)()
    assert info.mismatches(tb.config) == [], \
        f"PING: the device differs: {info.mismatches(tb.config)}"
    assert info.timeout_cycles == tb.timeout_cycles, \
        f"PING: timeout {info.timeout_cycles} cycles, the design has {tb.timeout_cycles}"
    assert sum(status.errors.values()) == 0 and link.stats.resent == 0, f"errors: {status}"
    assert (status.framing_errors, status.overruns, status.garbage) == (0, 0, 0), \
        f"STATUS counted line errors: {status}"
    assert tb.sink.framing_errors == 0, f"{tb.sink.framing_errors} framing errors on tx"
