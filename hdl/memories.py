"""On-chip memories of the accelerator and the bank arbiter that serializes bank conflicts.

* :class:`ActivationBuffer`: ``act_banks`` byte-wide banks; byte address ``a`` lives
  in bank ``a % act_banks`` at word ``a // act_banks``. Each bank has one
  synchronous read port and one write port (a simple dual-port BRAM).
* :class:`SinglePortActivationBuffer`: the same banks as single-port RAMs, a read or a write
  a cycle (``config.single_port_activations``; on iCE40 the SPRAM version
  :class:`fpganet.hdl.ice40_spram.SPRAMActivationBuffer`).
* :class:`BankArbiter`: given the banks that ``n`` lanes want this cycle, serves
  the lowest-numbered pending lane of every bank; lanes that share a bank are
  served in successive cycles.
* :func:`param_layout`: one parameter entry as the hardware stores it.
* :class:`WeightBuffer`: the weight buffer (block RAM; on iCE40 the SPRAM
  version :class:`fpganet.hdl.ice40_spram.SPRAMWeightBuffer` replaces it).
* :func:`falling_edge_write_domain`: the clock domain of write ports that need no
  read-during-write logic.

The program and parameter memories are plain
:class:`amaranth.lib.memory.Memory` instances with synchronous read ports,
built by :class:`fpganet.hdl.accelerator.Accelerator`.
"""

from amaranth import *
from amaranth.lib import data, wiring
from amaranth.lib.memory import Memory
from amaranth.lib.wiring import In, Out

from fpganet.config import WEIGHT_BLOCK_WORDS, AcceleratorConfig
from fpganet.isa import PARAM_LAYOUTS

from .registers import update

__all__ = ["param_layout", "check_bank_access", "ActivationBuffer", "SinglePortActivationBuffer",
           "activation_buffer", "held_read", "WeightBuffer", "BankArbiter",
           "falling_edge_write_domain", "one_hot_select", "IDLE_WRITTEN", "yosys_idle_written"]


def falling_edge_write_domain(m, name):
    """A clock domain for a memory's write port: domain ``sync``'s clock, falling edge.

    Yosys maps a memory with a write and a read port on the same clock edge to block RAM
    with logic that emulates the read-during-write behaviour asked for (a register of the
    written data, an address comparison and a multiplexer: on iCE40 about 20 logic cells
    per byte-wide memory, 180 for a 53-bit one), since the block RAM leaves it undefined
    (Yosys 0.70 ignores ``no_rw_check`` here). Writing on the falling edge makes the ports'
    clocks differ, so nothing is emulated (the iCE40 block RAM inverts its write clock
    itself), and a read at the next rising edge sees the word written: the read port
    behaves as a transparent one. The price is half a cycle for the write's address, data
    and enable, which should therefore come from flip-flops through a few LUTs at most.
    """
    domain = ClockDomain(name, clk_edge="neg", reset_less=True, local=True)
    m.domains += domain
    m.d.comb += domain.clk.eq(ClockSignal("sync"))
    return name


def param_layout(mode="fpganet"):
    """One output channel's parameter entry as the memory stores it: the fields of
    :data:`fpganet.isa.PARAM_LAYOUTS` for requantization mode ``mode`` packed one after
    another, the unused bits of the host's 64-bit word left out (53 bits for ``fpganet``,
    64 for ``tflite``).
    """
    return data.StructLayout({name: field.shape for name, field in PARAM_LAYOUTS[mode]})


def param_from_word(host_data, mode="fpganet"):
    """The :func:`param_layout` bits of a host write (an Amaranth value whose low bits are a
    :data:`fpganet.isa.PARAM_LAYOUTS` word)."""
    layout = PARAM_LAYOUTS[mode]
    entry = data.View(layout, Value.cast(host_data)[:layout.size])
    # A StructLayout places its fields one after another in this order.
    return Cat(*(entry[name] for name, _ in param_layout(mode)))


#: The memories that are written only while nothing reads them, so that a read never meets a
#: write of its word: the accelerator's program and parameters (``Accelerator``), which
#: without the pipeline registers are written on the read port's clock edge. Amaranth asks
#: Yosys for the old word on such a collision, which the iCE40's block RAM leaves undefined,
#: so Yosys would build read-during-write logic around them (a register of the written
#: data, an address compare and a multiplexer a bit) unless told otherwise
#: (:func:`yosys_idle_written`).
IDLE_WRITTEN = ("program", "params")


def yosys_idle_written(config):
    """The Yosys commands, to run after reading a design with ``config``'s accelerator, that
    make the :data:`IDLE_WRITTEN` memories' reads undefined on a collision with their write
    (``COLLISION_X_MASK``), so that a read and a write on the same clock edge map to block RAM
    alone; none with ``config.registered_writes``, where those memories are written on the
    other edge (Yosys refuses the mask across clocks). Without them the netlist is still
    right, with the logic above."""
    if config.registered_writes:
        return ()
    return tuple(f"setparam -set COLLISION_X_MASK 1 t:$memrd_v2 r:MEMID=\\\\{name} %i"
                 for name in IDLE_WRITTEN)


#: The attributes of a memory read through :func:`registered_read`.
NO_RW_CHECK = {"no_rw_check": 1}


def registered_read(m, port, *, enable, name):
    """A register ``name`` behind ``port``, an asynchronous read port of a memory made with
    ``attrs=NO_RW_CHECK``, loaded in cycles with ``enable``: a synchronous read whose
    collision with a write of the same word is undefined on the FPGA. Returns the register.

    Yosys merges the register into the block RAM. A synchronous read port, whose same-cycle
    behaviour (old or new word) is defined, made Yosys build it in logic: the write delayed a
    cycle and compared with the read address, a bypass multiplexer behind the block RAM (on
    the ECP5 a 128-MAC ULX3S build's longest path; on the iCE40 103 logic cells around two
    activation banks). Only for memories where no read meets a write of its word.
    """
    data = Signal.like(port.data, name=name)
    update(m, data, port.data, enable=enable)
    return data


class ActivationBuffer(wiring.Component):
    """The banked activation buffer.

    Parameters
    ----------
    config : AcceleratorConfig
        ``act_buffer_bytes`` (a multiple of ``act_banks``) and ``act_banks``.
    init : bytes-like, optional
        Initial contents from byte address 0 (zeros beyond); default all zero.

    Members
    -------
    rd_addr : In(ArrayLayout(bank_word_width, act_banks))
        Word address of every bank's read port.
    rd_en : In(1)
        Read enable of all banks; while low, ``rd_data`` holds.
    rd_data : Out(ArrayLayout(8, act_banks))
        Byte read from each bank, one cycle after its address (synchronous read). With
        ``config.registered_bram_outputs`` a register behind each bank, which also loads only in
        cycles with ``rd_en``, makes it two (``config.act_read_latency``): the bytes of the
        read one ``rd_en`` cycle before the latest, a pipeline that advances with ``rd_en``.
    wr_addr : In(ArrayLayout(bank_word_width, act_banks))
    wr_data : In(ArrayLayout(8, act_banks))
    wr_en : In(act_banks)
        Bank ``b`` writes ``wr_data[b]`` at ``wr_addr[b]`` at the end of a cycle
        with ``wr_en[b]``. A read of the word written in the same cycle returns
        the old byte in simulation and is undefined on the FPGA (below). No program does
        it: the engine reads a tile's bytes before it writes the tile's results (the ISA
        simulator refuses a byte read after its tile's write), and the other units run
        alone.

    Each bank is read through :func:`registered_read`: with a synchronous read port, whose
    same-cycle old byte Yosys built in logic, the lanes' address multiplexers ran on through
    that logic's compare on the ECP5 (the 128-MAC ULX3S build's longest path, 11.2 ns), and
    on the iCE40 the buffer took 127 logic cells instead of 24 (``python -m
    fpganet.boards.cellcount --accelerator``).
    """

    def __init__(self, config, init=None):
        if not isinstance(config, AcceleratorConfig):
            raise TypeError(f"config must be an AcceleratorConfig, not {config!r}")
        if config.act_buffer_bytes % config.act_banks:
            raise ValueError(f"act_buffer_bytes {config.act_buffer_bytes} is not a multiple of the "
                             f"{config.act_banks} activation banks")
        init = [int(value) & 0xFF for value in (init if init is not None else [])]
        if len(init) > config.act_buffer_bytes:
            raise ValueError(f"init of {len(init)} bytes exceeds act_buffer_bytes {config.act_buffer_bytes}")
        self.config = config
        self._init = init
        banks, word = config.act_banks, config.bank_word_width
        super().__init__({
            "rd_addr": In(data.ArrayLayout(word, banks)),
            "rd_en": In(1),
            "rd_data": Out(data.ArrayLayout(8, banks)),
            "wr_addr": In(data.ArrayLayout(word, banks)),
            "wr_data": In(data.ArrayLayout(8, banks)),
            "wr_en": In(banks),
        })

    def _bank(self, m, b):
        """Bank ``b``'s memory: its asynchronous read port and its write port."""
        m.submodules[f"bank{b}"] = bank = Memory(
            shape=8, depth=self.config.act_bank_depth, init=self._init[b::self.config.act_banks],
            attrs=NO_RW_CHECK)
        # Named as the ports' signals are (rd__data, wr__en): the iCE40 build's placement
        # follows the netlist's names.
        rd = bank.read_port(domain="comb")
        wr = bank.write_port()
        return rd, wr

    def elaborate(self, platform):
        m = Module()
        config = self.config
        for b in range(config.act_banks):
            rd, wr = self._bank(m, b)
            read = registered_read(m, rd, enable=self.rd_en, name=f"bank{b}_read")
            if config.act_read_latency == 2:
                # Beside the block RAM: an ECP5 block RAM's output appears 5.8 ns after the
                # clock, and the routing from it to the consumers' multiplexers took 5 ns more.
                registered = Signal(8, name=f"bank{b}_data")
                update(m, registered, read, enable=self.rd_en)
                read = registered
            m.d.comb += [
                rd.addr.eq(self.rd_addr[b]),
                self.rd_data[b].eq(read),
                wr.addr.eq(self.wr_addr[b]), wr.data.eq(self.wr_data[b]), wr.en.eq(self.wr_en[b]),
            ]
        return m


def held_read(m, dataout, *, read, name):
    """The byte a single-port RAM read last: ``dataout`` (the RAM's output register) in the
    cycle after a ``read``, else a copy taken then. The RAM's output is undefined after a
    write (an SPRAM's is), and a read's bytes must outlast the writes the engine holds for
    (``config.single_port_activations``)."""
    fresh = Signal(name=f"{name}_fresh")
    m.d.sync += fresh.eq(read)
    held = Signal(len(dataout), name=f"{name}_held")
    update(m, held, dataout, enable=fresh)
    return Mux(fresh, dataout, held)


class SinglePortActivationBuffer(ActivationBuffer):
    """:class:`ActivationBuffer` on single-port RAMs (``config.single_port_activations``).

    Same members. Each bank reads or writes in a cycle: a write wins, its cycle's read of
    that bank is lost, and the bank's output is undefined in the cycle after (modelled here
    by the written byte inverted, so that a read that counts on it fails). ``rd_data`` is the
    last read's byte (:func:`held_read`), held while ``rd_en`` is low and through writes.
    The accelerator never reads a bank in a cycle it writes one: the engine holds while
    its writer writes, and the other units read or write, not both. A model for simulation
    (the inverted byte is logic): the iCE40 build has :class:`~fpganet.hdl.ice40_spram.SPRAMActivationBuffer`.
    """

    def elaborate(self, platform):
        m = Module()
        config = self.config
        for b in range(config.act_banks):
            rd, wr = self._bank(m, b)
            write, read = self.wr_en[b], self.rd_en & ~self.wr_en[b]
            dataout = Signal(8, name=f"bank{b}_out")
            with m.If(write):
                m.d.sync += dataout.eq(~self.wr_data[b])
            with m.Elif(read):
                m.d.sync += dataout.eq(rd.data)
            m.d.comb += [
                rd.addr.eq(self.rd_addr[b]),
                self.rd_data[b].eq(held_read(m, dataout, read=read, name=f"bank{b}")),
                wr.addr.eq(self.wr_addr[b]), wr.data.eq(self.wr_data[b]), wr.en.eq(write),
            ]
        return m


def activation_buffer(config):
    """The activation buffer of ``config``: :class:`SinglePortActivationBuffer` with
    ``single_port_activations``, else :class:`ActivationBuffer`."""
    if config.single_port_activations:
        return SinglePortActivationBuffer(config)
    return ActivationBuffer(config)


def check_bank_access(config, access, unit):
    """Refuse to build the ``access`` (``"arbitrated"`` or ``"scheduled"``) variant of ``unit``
    for a configuration whose ``bank_access`` is the other."""
    if config.bank_access != access:
        raise ValueError(f"the {access} {unit} needs bank_access '{access}', "
                         f"not {config.bank_access!r}")


class BankArbiter(wiring.Component):
    """Serves, in every bank, the lowest-numbered pending lane that wants it.

    Combinational. Lane ``j`` is served when it is pending and no lower pending
    lane wants the same bank, so a set of pending lanes is fully served in as
    many cycles as the most lanes any one bank has (each cycle, with
    ``pending`` updated to ``remaining``).

    Parameters
    ----------
    lanes : int
    banks : int
        A power of two.
    same_banks : bool
        Take, instead of each lane's bank, whether each two lanes want the same bank
        (``same``): a user that holds the banks in flip-flops can hold these compares there
        too, and the arbitration is then their AND-OR alone.

    Members
    -------
    pending : In(lanes)
        Lanes that still want their bank.
    bank : In(ArrayLayout(log2(banks), lanes))
        The bank each lane wants (without ``same_banks``).
    same : In(lanes * (lanes - 1) // 2)
        With ``same_banks``: bit :meth:`pair` ``(i, j)``, lanes ``i < j`` want the same bank
        (:meth:`same_of` computes them from the banks).
    served : Out(lanes)
        Lanes served this cycle (a subset of ``pending``, at most one per bank).
    remaining : Out(lanes)
        ``pending & ~served``.
    """

    def __init__(self, lanes, banks, *, same_banks=False):
        if not isinstance(lanes, int) or lanes < 1:
            raise ValueError(f"lanes must be a positive integer, not {lanes!r}")
        if not isinstance(banks, int) or banks < 1 or banks & (banks - 1):
            raise ValueError(f"banks must be a power of two, not {banks!r}")
        self.lanes = lanes
        self.banks = banks
        self.same_banks = bool(same_banks)
        compares = ({"same": In(lanes * (lanes - 1) // 2)} if self.same_banks else
                    {"bank": In(data.ArrayLayout(max(1, (banks - 1).bit_length()), lanes))})
        super().__init__({
            "pending": In(lanes),
            **compares,
            "served": Out(lanes),
            "remaining": Out(lanes),
        })

    @staticmethod
    def pair(i, j):
        """The bit of ``same`` for lanes ``i < j``."""
        return j * (j - 1) // 2 + i

    @classmethod
    def all_served(cls, pending, same):
        """Whether ``pending`` lanes, with ``same`` (as the member), are all served in one cycle:
        no two of them want one bank (``remaining == 0``, from the compares alone)."""
        return ~Cat(pending[i] & pending[j] & same[cls.pair(i, j)]
                    for j in range(len(pending)) for i in range(j)).any()

    @staticmethod
    def same_of(banks):
        """``same`` of the lanes' ``banks`` (values, one per lane)."""
        return Cat(banks[i] == banks[j] for j in range(len(banks)) for i in range(j))

    def elaborate(self, platform):
        m = Module()
        same = self.same if self.same_banks else self.same_of(list(self.bank))
        for j in range(self.lanes):
            blocked = Const(0)
            for i in range(j):
                blocked = blocked | (self.pending[i] & same[self.pair(i, j)])
            m.d.comb += self.served[j].eq(self.pending[j] & ~blocked)
        m.d.comb += self.remaining.eq(self.pending & ~self.served)
        return m


def bank_select(config, address):
    """One-hot over the banks: the bank of byte address ``address`` (a byte write's enables)."""
    return C(1, 1) << address[:config.bank_bits] if config.bank_bits else C(1, 1)


def one_hot_select(selects, values, start=0):
    """``start`` OR'd with ``values[i]`` where ``selects[i]``: an AND-OR multiplexer for
    one-hot ``selects`` (``start`` alone where none is set), no priority chain."""
    result = start
    for select, value in zip(selects, values):
        result = result | Mux(select, value, 0)
    return result


def bank_hits(config, addresses, served):
    """``hits[b][j]``: lane ``j`` is served this cycle and wants bank ``b``."""
    bb = config.bank_bits
    return [[served[j] & (addresses[j][:bb] == b if bb else Const(1)) for j in range(len(addresses))]
            for b in range(config.act_banks)]


def route_to_banks(m, config, addresses, served, values=None, hits=None):
    """Per-bank word address (and value) of the served lane that wants each bank.

    ``addresses``: byte addresses of the lanes; ``served``: at most one served lane
    per bank (a :class:`BankArbiter` output). Returns ``(words, enables, datas)``:
    lists indexed by bank (``datas`` is None without ``values``). With several
    lanes, AND-OR multiplexers on the one-hot ``hits`` (a bank nobody wants gets
    zeros); with one lane, every bank sees that lane's word and value and only
    the enables differ.
    """
    bb, aw = config.bank_bits, config.act_addr_width
    hits = hits if hits is not None else bank_hits(config, addresses, served)
    if len(addresses) == 1:
        words = [addresses[0][bb:aw]] * config.act_banks
        enables = [row[0] for row in hits]
        datas = [values[0]] * config.act_banks if values is not None else None
        return words, enables, datas
    words, enables, datas = [], [], []
    for row in hits:
        words.append(one_hot_select(row, [address[bb:aw] for address in addresses]))
        enables.append(Cat(*row).any())
        datas.append(one_hot_select(row, values) if values is not None else None)
    return words, enables, (datas if values is not None else None)


class WeightBuffer(wiring.Component):
    """The weight buffer: ``weight_buffer_words`` words of ``8 * rows`` bits, one read and
    one write port.

    Parameters
    ----------
    config : AcceleratorConfig
        ``rows`` and ``weight_buffer_words``.

    Members
    -------
    rd_addr : In(weight_addr_width)
    rd_en : In(weight_blocks)
        Equal copies of the read enable (``config.weight_blocks``), block ``b`` taking copy
        ``b``: the fan-out of one is split over several flip-flops.
    rd_data : Out(8 * rows)
        The word at ``rd_addr`` one cycle after a cycle with ``rd_en``; held
        while ``rd_en`` is low. With ``config.registered_bram_outputs``, two
        (``config.weight_read_latency``): the word of the read one ``rd_en`` cycle before
        the latest, a pipeline that advances with ``rd_en`` (as the activation banks').
    wr_addr : In(weight_addr_width)
    wr_data : In(8 * rows)
    wr_en : In(1)
        Writes ``wr_data`` by the end of the next cycle (:attr:`write_latency`). The
        accelerator writes only while idle and reads only while running, never both in one
        cycle, and it starts only after the program, which the host loads after the
        weights: a single-port memory may implement the buffer
        (:class:`fpganet.hdl.ice40_spram.SPRAMWeightBuffer`), and ``rd_data`` is undefined
        after a write until the next read.

    This implementation is a :class:`amaranth.lib.memory.Memory` (block RAM), written on
    the falling edge (:func:`falling_edge_write_domain`): reads and writes never meet. The
    write goes through a register stage on the falling edge first, so that the block RAMs'
    write-enable decode and the routing to them have a whole cycle, not half of one: a
    large buffer spreads over many block RAMs (144 on the ULX3S, whose farthest took
    6.7 ns of routing alone, the critical path of the build without the stage).
    """

    #: Cycles after a write's cycle by whose end the word is in the memory.
    write_latency = 1

    #: With ``config.registered_bram_outputs``: the words of a block of block RAMs behind one
    #: register (:data:`fpganet.config.WEIGHT_BLOCK_WORDS`). The read multiplexer across the
    #: blocks then starts from flip-flops, not from the block RAMs' outputs: on the ULX3S's
    #: 144 DP16KD, 16.2 ns from a block RAM through the multiplexer into the register
    #: behind it.
    block_words = WEIGHT_BLOCK_WORDS

    def __init__(self, config):
        if not isinstance(config, AcceleratorConfig):
            raise TypeError(f"config must be an AcceleratorConfig, not {config!r}")
        self.config = config
        width = config.weight_addr_width
        super().__init__({
            "rd_addr": In(width), "rd_en": In(config.weight_blocks), "rd_data": Out(8 * config.weight_word_bytes),
            "wr_addr": In(width), "wr_data": In(8 * config.weight_word_bytes), "wr_en": In(1),
        })

    def elaborate(self, platform):
        m = Module()
        write = falling_edge_write_domain(m, "weight_write")
        if self.config.weight_read_latency == 2:
            return self._elaborate_registered(m, write)
        m.submodules.memory = memory = Memory(shape=8 * self.config.weight_word_bytes,
                                              depth=self.config.weight_buffer_words, init=[])
        rd = memory.read_port()
        wr = memory.write_port(domain=write)
        m.d.comb += [rd.addr.eq(self.rd_addr), rd.en.eq(self.rd_en), self.rd_data.eq(rd.data)]
        m.d[write] += [wr.addr.eq(self.wr_addr), wr.data.eq(self.wr_data), wr.en.eq(self.wr_en)]
        return m

    def _elaborate_registered(self, m, write):
        """The buffer as memories of :attr:`block_words` words, a register behind each; the
        block read last is selected from the registers."""
        words, width = self.config.weight_buffer_words, 8 * self.config.weight_word_bytes
        low = min(words, self.block_words).bit_length() - 1
        blocks = self.config.weight_blocks
        chosen = [Signal(range(blocks), name=f"weight_block{stage}") for stage in (1, 2)]
        with m.If(self.rd_en[0]):
            m.d.sync += [chosen[0].eq(self.rd_addr[low:]), chosen[1].eq(chosen[0])]
        wr_addr, wr_data, wr_en = (Signal.like(port, name=f"{port.name}_w")
                                   for port in (self.wr_addr, self.wr_data, self.wr_en))
        m.d[write] += [wr_addr.eq(self.wr_addr), wr_data.eq(self.wr_data), wr_en.eq(self.wr_en)]
        outputs = []
        for block in range(blocks):
            depth = min(self.block_words, words - block * self.block_words)
            # A block deeper than 2,048 words as memories 4 bits wide, an ECP5 DP16KD's
            # 4,096 x 4 shape: as one wide memory Yosys chose a shallower shape and put a depth
            # multiplexer between the block RAMs and the register (10.2 ns of the ULX3S's 10 ns
            # period). A shallower block fits the 2,048 x 9 shape without one.
            slices = width // 4 if depth > 2048 and width % 4 == 0 else 1
            part_width = width // slices
            read_here = (self.rd_addr[low:] == block) if blocks > 1 else 1
            write_here = (wr_addr[low:] == block) if blocks > 1 else 1
            read_data = []
            for part in range(slices):
                m.submodules[f"block{block}_{part}"] = memory = Memory(shape=part_width, depth=depth, init=[])
                rd = memory.read_port()
                wr = memory.write_port(domain=write)
                m.d.comb += [rd.addr.eq(self.rd_addr[:low]), rd.en.eq(self.rd_en[block] & read_here),
                             wr.addr.eq(wr_addr[:low]),
                             wr.data.eq(wr_data[part * part_width:(part + 1) * part_width]),
                             wr.en.eq(wr_en & write_here)]
                read_data.append(rd.data)
            output = Signal(width, name=f"block{block}_data")
            update(m, output, Cat(*read_data), enable=self.rd_en[block])
            outputs.append(output)
        with m.Switch(chosen[1]):
            for block, output in enumerate(outputs):
                with m.Case(block):
                    m.d.comb += self.rd_data.eq(output)
        return m
