"""cocotb testbench: the binary network device behind the host link, driven through the UART
pins by the real host driver (:func:`fpganet.link.runner.run_images`), as
``sim/tb_system.py`` drives the int8 accelerator.

Parameters come from the environment variable ``FPGANET_TB`` (JSON), written by
``tests/test_binary_device.py``:

``config``, ``clock_hz``, ``baud``, ``timeout_cycles``
    As given to HostLinkSystem (``clock_hz`` must be the harness's clock).
``inputs``
    Each vector's input bytes, hex.
``expected``
    Each vector's output bytes before the stamp (the counts), hex.
``stamp``
    The device's :meth:`~fpganet.hdl.binary_device.BinaryDevice.stamp_cycles`.
"""

import cocotb
from cocotb.task import bridge

from fpganet.hdl.binary_device import STAMP_BYTES
from fpganet.link import BoardLink, run_images
from fpganet.sim.tb_hostlink import parameters
from fpganet.sim.tb_system import HOST_TIMEOUT_S, SystemTB


@cocotb.test()
async def vectors_over_the_uart_pins(dut):
    """Each vector's counts and cycle stamp, through the link's frames and FIFOs."""
    params = parameters()
    tb = SystemTB(dut, params)
    await tb.start()
    inputs = [bytes.fromhex(text) for text in params["inputs"]]
    expected = [bytes.fromhex(text) for text in params["expected"]]

    def host():
        link = BoardLink(tb.port, timeout=HOST_TIMEOUT_S)
        run = run_images(link, {}, inputs, output_bytes=len(expected[0]),
                         stamp_bytes=STAMP_BYTES, timeout=HOST_TIMEOUT_S)
        return run, link.status()

    run, status = await bridge(host)()
    for index, (got, want) in enumerate(zip(run.outputs, expected, strict=True)):
        assert got == want, f"vector {index}: counts {got.hex()} differ from {want.hex()}"
    assert run.cycles == [params["stamp"]] * len(inputs), (
        f"stamps {run.cycles}, the device's model {params['stamp']}")
    assert sum(status.errors.values()) == 0 and not status.busy and status.done_seen, status
