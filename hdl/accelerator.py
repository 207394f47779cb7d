"""The accelerator: memories, controller, engine (window generator, systolic array,
max-pool unit, result writer) and the region unit, behind a host write port and
two byte streams.

See docs/reference/architecture.md ("The accelerator") for the block diagram, the memory
map and the instruction set, and :mod:`fpganet.perf` for the cycle count of every
instruction, which the tests hold the RTL to exactly.
"""

from amaranth import *
from amaranth.lib import wiring
from amaranth.lib.fifo import SyncFIFOBuffered
from amaranth.lib.memory import Memory

from fpganet.config import AcceleratorConfig
from fpganet.isa import INSTRUCTION_BITS, HostSpace

from .controller import Controller
from .hostport import device_signature, host_addr_width, host_write_layout
from .engine_hold import EngineHold, engine_hold
from .memories import (WeightBuffer, activation_buffer, bank_select, falling_edge_write_domain,
                       param_from_word, param_layout)
from .pool import MaxPool
from .region import RegionUnit
from .scatter import result_writer
from .systolic import SystolicArray
from .window import window_generator

# host_addr_width and host_write_layout are re-exported: the test benches that load the
# memories take the port's shape from here.
__all__ = ["Accelerator", "host_write_layout", "host_addr_width"]


class Accelerator(wiring.Component):
    """The fpganet accelerator.

    Parameters
    ----------
    config : AcceleratorConfig
        The memory depths should be powers of two for the ISA's "addresses
        modulo the buffer size" to hold for addresses beyond the end (in range,
        any depth works).
    window, writer, pe : callable, optional
        Factories ``f(config)`` of the window generator, the result writer and
        the array's processing elements (tests substitute faulty ones).
    weights : callable, optional
        Factory ``f(config)`` of the weight buffer: :class:`~fpganet.hdl.memories.WeightBuffer`
        (block RAM) or :class:`~fpganet.hdl.ice40_spram.SPRAMWeightBuffer`.
    activations : callable, optional
        Factory ``f(config)`` of the activation buffer: by default
        :func:`~fpganet.hdl.memories.activation_buffer` (block RAM, single-port with
        ``config.single_port_activations``), or
        :class:`~fpganet.hdl.ice40_spram.SPRAMActivationBuffer`.

    Members
    -------
    host : In(stream.Signature(host_write_layout(config)))
        Writes one word of any memory per transfer; ``ready`` while idle
        (not ``busy``).
    start : In(1)
        Pulse while idle: run the program from instruction 0. With
        ``config.registered_decode`` and ``registered_writes``, not in the first cycle after
        reset, nor in the cycle of a host write to instruction 0 or the cycle after (the
        controller reads it ahead while idle, and the write goes through a write stage).
    busy : Out(1)
        Running (from the cycle after ``start`` to the cycle after ``END``).
    done : Out(1)
        High from the end of a run until the next ``start``.
    input : In(stream.Signature(8))
        Bytes consumed by ``INPUT``.
    output : Out(stream.Signature(8))
        Bytes produced by ``OUTPUT`` and ``STAMP``; back-pressure is honoured
        (it stretches those instructions).
    cycles : Out(32)
        Cycles since ``start`` (what ``STAMP`` sends); after ``done``, the run's
        total, equal to :func:`fpganet.perf.program_cycles` when ``input`` is
        always valid and ``output`` always ready.
    """

    def __init__(self, config, *, window=window_generator, writer=result_writer, pe=None,
                 weights=WeightBuffer, activations=activation_buffer):
        if not isinstance(config, AcceleratorConfig):
            raise TypeError(f"config must be an AcceleratorConfig, not {config!r}")
        for name, factory in (("window", window), ("writer", writer), ("weights", weights),
                              ("activations", activations),
                              *([("pe", pe)] if pe is not None else [])):
            if not callable(factory):
                raise TypeError(f"{name} must be a callable taking the configuration, not {factory!r}")
        self._window, self._writer, self._pe, self._weights = window, writer, pe, weights
        self._activations = activations
        if config.operand_width != 8:
            raise ValueError(f"the accelerator moves bytes: operand_width must be 8, not {config.operand_width}")
        if config.act_buffer_bytes % config.act_banks:
            raise ValueError(f"act_buffer_bytes {config.act_buffer_bytes} is not a multiple of the "
                             f"{config.act_banks} activation banks")
        self.config = config
        # The one signature the host link connects to (hostport.device_signature).
        super().__init__(device_signature(config))

    def elaborate(self, platform):
        m = Module()
        config = self.config
        banks, bb, aw = config.act_banks, config.bank_bits, config.act_addr_width

        m.submodules.controller = ctrl = Controller(config)
        window = self._window(config)
        array = SystolicArray(config, pe=self._pe)
        pool = MaxPool(config)
        writer = self._writer(config)
        # Single-port banks: the engine holds while its writer writes (engine_hold), and a
        # held cycle reads nothing (its reads are made again in the next) and the write is
        # not made twice. Without them the netlist is as it was.
        if config.single_port_activations:
            hold, written = engine_hold(m, writer)
            held = EngineHold(~hold)
            def unless_held(enable):
                return enable & ~hold.replicate(len(enable))
            def unless_written(enable):
                return enable & ~written.replicate(len(enable))
        else:
            held = unless_held = unless_written = (lambda value: value)
        m.submodules.window = held(window)
        m.submodules.array = held(array)
        m.submodules.pool = held(pool)
        m.submodules.writer = held(writer)
        m.submodules.region = region = RegionUnit(config)
        m.submodules.act = act = self._activations(config)

        # The host writes the program and the parameters only while the controller is idle,
        # and the writer reads the parameters only while it runs; the controller reads the
        # program while it runs (and instruction 0 while idle with the pipeline registers,
        # which a write reaches by the read two cycles later). So no read meets a write of its
        # word, and neither needs read-during-write logic around its block RAMs (about 200
        # iCE40 logic cells for the two at 256 words, measured). With the pipeline registers
        # they are written on the falling edge, behind a register stage (below). Without them
        # they are written on the rising edge, a whole cycle from the host port's flip-flops
        # (half a cycle to the far block RAMs was the iCE40 build's longest path at 30 MHz),
        # and the builds tell Yosys that a collision is undefined (memories.IDLE_WRITTEN).
        m.submodules.program = program = Memory(shape=INSTRUCTION_BITS, depth=config.program_words, init=[])
        m.submodules.weights = weights = self._weights(config)
        m.submodules.params = params = Memory(shape=param_layout(config.requant_mode), depth=config.bias_buffer_words, init=[])
        pipelined = config.registered_writes
        prog_rd = program.read_port()
        prog_wr = program.write_port(domain=falling_edge_write_domain(m, "program_write") if pipelined else "sync")
        p_rd = params.read_port()
        p_wr = params.write_port(domain=falling_edge_write_domain(m, "params_write") if pipelined else "sync")

        # Controller, status.
        m.d.comb += [
            ctrl.start.eq(self.start),
            self.busy.eq(ctrl.busy), self.done.eq(ctrl.done), self.cycles.eq(ctrl.cycles),
            prog_rd.addr.eq(ctrl.prog_addr), prog_rd.en.eq(ctrl.prog_en), ctrl.prog_data.eq(prog_rd.data),
        ]
        for unit in (window, writer, region):
            m.d.comb += unit.regs.eq(ctrl.regs)

        # Engine: window generator -> array (CONV) or max-pool unit (POOL) -> result writer.
        # The mode flag is decoded from the instruction word (straight out of the program
        # memory without the pipeline registers); registered, it no longer starts the longest
        # path (into the writer's row and tile counters). No cycle changes: nothing moves
        # through the array, the pool unit or the writer in an instruction's first cycle, and
        # the opcode holds to its last.
        is_pool = Signal()
        m.d.sync += is_pool.eq(ctrl.engine_pool)
        if config.diagonal_weights:
            # The window reads it from its first beat on, cycles after the start.
            m.d.sync += window.diagonal.eq(ctrl.engine_diagonal)
        if config.packed_weights:
            m.d.sync += window.packed.eq(ctrl.engine_packed)
        if config.binary_weights:
            m.d.sync += window.binary.eq(ctrl.engine_binary)
        if config.fused_max_pool:
            # The writer reads it from the first result row on, a tile of beats after the start.
            m.d.sync += writer.pooled.eq(ctrl.engine_pooled)
        # The array's result rows, through the result queue when there is one.
        array_payload, array_valid = array.results.payload.as_value(), array.results.valid
        array_ready = array.results.ready
        if config.result_queue_rows:
            queue = SyncFIFOBuffered(width=len(array_payload), depth=config.result_queue_rows)
            m.submodules.result_queue = held(queue)
            m.d.comb += [queue.w_data.eq(array_payload), queue.w_en.eq(array_valid),
                         array_ready.eq(queue.w_rdy)]
            array_payload, array_valid, array_ready = queue.r_data, queue.r_rdy, queue.r_en
        m.d.comb += [
            window.start.eq(ctrl.engine_start),
            pool.start.eq(ctrl.engine_start),
            writer.start.eq(ctrl.engine_start),
            writer.pool.eq(is_pool),
            ctrl.engine_done.eq(unless_held(writer.done)),
            weights.rd_addr.eq(window.w_addr), weights.rd_en.eq(unless_held(window.w_en)),
            window.w_data.eq(weights.rd_data),
            p_rd.addr.eq(writer.param_addr), p_rd.en.eq(unless_held(writer.param_en)),
            writer.param_data.eq(p_rd.data),
            array.operands.payload.eq(window.operands.payload),
            pool.operands.payload.eq(window.operands.payload),
            array.operands.valid.eq(window.operands.valid & ~is_pool),
            pool.operands.valid.eq(window.operands.valid & is_pool),
            window.operands.ready.eq(Mux(is_pool, pool.operands.ready, array.operands.ready)),
            writer.results.payload.eq(Mux(is_pool, pool.results.payload.as_value(), array_payload)),
            writer.results.valid.eq(Mux(is_pool, pool.results.valid, array_valid)),
            array_ready.eq(writer.results.ready & ~is_pool),
            pool.results.ready.eq(writer.results.ready & is_pool),
        ]

        # Region unit and STAMP on the streams.
        m.d.comb += [
            region.start.eq(ctrl.region_start),
            region.mode.eq(ctrl.region_mode),
            ctrl.region_done.eq(region.done),
            region.bank_data.eq(act.rd_data),
            window.bank_data.eq(act.rd_data),
            region.input.valid.eq(self.input.valid),
            region.input.payload.eq(self.input.payload),
            self.input.ready.eq(region.input.ready),
        ]
        if config.registered_decode:
            with m.If(ctrl.stamp_active):
                m.d.comb += [self.output.valid.eq(ctrl.stamp.valid), self.output.payload.eq(ctrl.stamp.payload),
                             ctrl.stamp.ready.eq(self.output.ready)]
            with m.Else():
                m.d.comb += [self.output.valid.eq(region.output.valid),
                             self.output.payload.eq(region.output.payload),
                             region.output.ready.eq(self.output.ready)]
        else:
            # STAMP and OUTPUT never overlap and each offers only while it runs, so both see
            # the output's ready and their valids are ORed: the instruction's decode
            # (stamp_active) picks only the byte, and stays out of OUTPUT's back-pressure into
            # the region unit's walk (the iCE40 build's longest path at 30 MHz). The pipeline
            # registers' configuration keeps the multiplexer its builds were measured with.
            m.d.comb += [
                self.output.valid.eq(ctrl.stamp.valid | region.output.valid),
                self.output.payload.eq(Mux(ctrl.stamp_active, ctrl.stamp.payload, region.output.payload)),
                ctrl.stamp.ready.eq(self.output.ready),
                region.output.ready.eq(self.output.ready),
            ]

        # Host writes, while idle.
        host = self.host.payload
        host_write = Signal()
        program_write = [prog_wr.addr.eq(host.addr), prog_wr.data.eq(host.data[:INSTRUCTION_BITS]),
                         prog_wr.en.eq(host_write & (host.space == HostSpace.PROGRAM))]
        m.d.comb += [
            self.host.ready.eq(~ctrl.busy),
            host_write.eq(self.host.valid & ~ctrl.busy),
            *([] if config.registered_writes else program_write),
            weights.wr_addr.eq(host.addr), weights.wr_data.eq(host.data[:8 * config.weight_word_bytes]),
            weights.wr_en.eq(host_write & (host.space == HostSpace.WEIGHTS)),
        ]
        param_write = [p_wr.addr.eq(host.addr), p_wr.data.eq(param_from_word(host.data, config.requant_mode)),
                       p_wr.en.eq(host_write & (host.space == HostSpace.PARAMS))]
        if config.registered_writes:
            # Write stages on the falling edge, as the weight buffer's: the write enables'
            # decode and their routing to the memories' block RAMs get a whole cycle, not half
            # of one (the parameter memory's, then the program memory's, were the critical
            # paths of ULX3S builds without them). The writer reads the parameters only in a
            # CONV, long after the host's last write; for the program see ``start``.
            m.d.program_write += program_write
            m.d.params_write += param_write
        else:
            m.d.comb += param_write

        # Activation banks: the engine's ports during CONV/POOL, else the region unit's and the host's.
        byte_addr = Signal(aw)
        byte_data = Signal(8)
        byte_en = Signal()
        # With the pipeline registers the byte write lands a cycle late, from flip-flops: the
        # input FIFO's block RAM ran through the region unit's multiplexer into the banks'
        # write data (the ULX3S build's longest path). No cycle changes: a FILL's or INPUT's
        # last byte lands in its done cycle, before any later instruction reads the banks.
        # They also write several banks at once, at one word: a wide FILL's run (byte_banks).
        byte_write = m.d.sync if config.registered_writes else m.d.comb
        byte_banks = Signal(banks) if config.registered_writes else None
        with m.If(host_write & (host.space == HostSpace.ACTIVATIONS)):
            byte_write += [byte_addr.eq(host.addr), byte_data.eq(host.data[:8]), byte_en.eq(1)]
            if config.registered_writes:
                byte_write += byte_banks.eq(bank_select(config, host.addr))
        with m.Else():
            byte_write += [byte_addr.eq(region.wr_addr), byte_data.eq(region.wr_data), byte_en.eq(region.wr_en)]
            if config.registered_writes:
                byte_write += byte_banks.eq(region.wr_banks)
        with m.If(ctrl.engine_active):
            m.d.comb += [act.rd_addr.eq(window.bank_addr), act.rd_en.eq(unless_held(window.bank_en)),
                         act.wr_addr.eq(writer.wr_addr), act.wr_data.eq(writer.wr_data),
                         act.wr_en.eq(unless_written(writer.wr_en))]
        with m.Else():
            for b in range(banks):
                m.d.comb += [
                    act.rd_addr[b].eq(region.rd_addr[bb:]),
                    act.wr_addr[b].eq(byte_addr[bb:]),
                    act.wr_data[b].eq(byte_data),
                    act.wr_en[b].eq(byte_banks[b] if config.registered_writes
                                    else byte_en & ((byte_addr[:bb] == b) if bb else 1)),
                ]
            m.d.comb += act.rd_en.eq(region.rd_en)
        return m
