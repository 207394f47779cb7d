"""Drive the whole Accelerator under amaranth.sim: host writes, start, input bytes, output bytes."""

from amaranth.sim import Simulator

from fpganet.hdl.accelerator import Accelerator
from fpganet.sim.rtl_images import host_writes


def run_pysim(config, images, input_bytes=b"", *, max_cycles=20_000, dut=None, ready_pattern=None):
    """Run a program on the Accelerator in amaranth.sim.

    Returns ``(output_bytes, cycles_port)``. ``ready_pattern``: optional list of
    0/1 cycled on ``output.ready`` (default: always ready).
    """
    dut = dut or Accelerator(config)
    writes = host_writes(config, images)
    stream_in = list(bytes(input_bytes))
    out = bytearray()
    state = {"cycles": None}

    async def host(ctx):
        # The memories are written on the clock's falling edge (as on the boards, where the
        # host port is driven from flip-flops): hold each write over one, starting after the
        # first rising edge.
        await ctx.tick()
        for space, addr, data in writes:
            ctx.set(dut.host.payload, {"space": int(space), "addr": addr, "data": data})
            ctx.set(dut.host.valid, 1)
            await ctx.tick()
        ctx.set(dut.host.valid, 0)
        ctx.set(dut.start, 1)
        await ctx.tick()
        ctx.set(dut.start, 0)
        for _ in range(max_cycles):
            _, _, done = await ctx.tick().sample(dut.done)
            if done:
                state["cycles"] = ctx.get(dut.cycles)
                return
        raise AssertionError(f"no done within {max_cycles} cycles")

    async def feeder(ctx):
        index = 0
        while True:
            if index < len(stream_in):
                ctx.set(dut.input.payload, stream_in[index])
                ctx.set(dut.input.valid, 1)
            else:
                ctx.set(dut.input.valid, 0)
            _, _, valid, ready = await ctx.tick().sample(dut.input.valid, dut.input.ready)
            if valid and ready:
                index += 1

    async def collector(ctx):
        cycle = 0
        while True:
            ready = 1 if ready_pattern is None else ready_pattern[cycle % len(ready_pattern)]
            ctx.set(dut.output.ready, ready)
            _, _, valid, payload = await ctx.tick().sample(dut.output.valid, dut.output.payload)
            if valid and ready:
                out.append(int(payload) & 0xFF)
            cycle += 1

    sim = Simulator(dut)
    sim.add_clock(1e-8)
    sim.add_testbench(host)
    sim.add_testbench(feeder, background=True)
    sim.add_testbench(collector, background=True)
    sim.run()
    return bytes(out), state["cycles"]
