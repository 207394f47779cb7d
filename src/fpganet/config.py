"""One configuration object for the hardware generator and the compiler.

Every generator parameter of the accelerator lives in :class:`AcceleratorConfig`,
together with the values derived from it and the checks that keep a
configuration buildable, in the manner of Gemmini's ``GemminiConfigs``. The
Amaranth gateware (``fpganet.hdl``) and the compiler both read it, and it
round-trips through JSON so that a compiled program names the hardware it was
compiled for.
"""

import dataclasses
import json
import math
from dataclasses import dataclass

import numpy as np

from amaranth.utils import ceil_log2

from .isa import BINARY_WEIGHT_BEATS, COUNT_WIDTH, PACKED_WEIGHT_BITS, PARAM_LAYOUTS, REQUANT_MODES

__all__ = ["AcceleratorConfig", "BANK_ACCESS", "ConfigError", "DEFAULT_CONFIG", "REQUANT_LATENCIES",
           "MULT_BITS", "TIMING_SETS", "WEIGHT_BLOCK_WORDS", "fit_requant_latency"]


class ConfigError(ValueError):
    """An accelerator configuration that cannot be built; the message names the parameter."""


def _is_power_of_two(value):
    return value > 0 and value & (value - 1) == 0


#: Pipeline stages each requantization mode's post-processing unit can have.
REQUANT_LATENCIES = {"fpganet": (4, 5), "tflite": (6,)}

#: How the window generator and the result writer share the activation banks.
BANK_ACCESS = ("arbitrated", "scheduled")

#: Each timing knob's value in :attr:`AcceleratorConfig.pipeline_registers`' two sets (off,
#: on): what a knob that is not given takes.
TIMING_SETS = {
    "registered_bram_outputs": (False, True),
    "registered_operands": (False, True),
    "registered_results": (False, True),
    "registered_decode": (False, True),
    "bank_access": BANK_ACCESS,
    "registered_writes": (False, True),
    "registered_host_output": (False, True),
}

#: With ``registered_bram_outputs``: the words of one block of the weight buffer's block RAMs,
#: behind one register and one copy of the read enable (4,096: an ECP5 DP16KD column in its
#: 4,096 x 4 shape, 16 side by side for a 64-bit word).
WEIGHT_BLOCK_WORDS = 4096

#: Bits of the ``fpganet`` requantization's multiplier field (its parameter entry).
MULT_BITS = PARAM_LAYOUTS["fpganet"]["mult"].shape.width


@dataclass(frozen=True)
class AcceleratorConfig:
    """Generator parameters of the accelerator.

    Parameters
    ----------
    rows : int
        Rows of the output-stationary systolic array. Each row holds one output
        channel of the current tile (the M dimension of ``C[M,N] = A[M,K] B[K,N]``).
    cols : int
        Columns of the array. Each column holds one output pixel of the current
        tile (the N dimension).
    operand_width : int
        Bits of a signed operand (8 for int8).
    acc_width : int
        Bits of a signed accumulator (32 for int32). Must hold one full
        product; :attr:`max_exact_k` says how long a dot product stays exact.
    weight_buffer_bytes : int
        Capacity of the on-chip weight buffer; the hardware holds whole words of
        :attr:`weight_word_bytes` (rounded down).
    act_buffer_bytes : int
        Capacity of the on-chip activation buffer (input and output feature maps).
    bias_buffer_words : int
        Entries of the per-output-channel parameter buffer (bias, multiplier, shift).
    program_words : int
        Instructions the program memory holds.
    requant_lanes : int
        Results the post-processing unit (bias, requantization, clamp)
        handles per cycle; divides ``cols``. One 32x15-bit multiplier each (32 x
        ``requant_mult_bits``).
    broadcast_operands : bool
        ``False``: a systolic array (operands move one PE per cycle, skewed at
        the edges; the array's latency is ``cols + 2``). ``True``: each row's
        ``a`` and each column's ``b`` reach all its PEs in the same cycle (no
        skew or forwarding registers: about 470 fewer logic cells at 8x2 on an
        iCE40; latency 3). For small arrays, where the fan-out is short.
    requant_latency : int
        Pipeline stages of the post-processing unit: 4 multiplies in one stage;
        5 splits the multiply into two partial products and their sum, for
        clocks the one-stage product misses (on an ECP5 a 32x15-bit product
        spans two MULT18X18D, summed on carry chains). Each ``CONV``/``POOL``
        takes one cycle more at 5; the numerics are the same. The ``tflite``
        requantization mode has 6 (:data:`REQUANT_LATENCIES`). Not given (None): the
        mode's first, 4 or 6.
    requant_mode : str
        The requantization arithmetic (docs/reference/numerics.md): ``"fpganet"`` (a 15-bit
        multiplier and one rounding shift) or ``"tflite"`` (TFLite's 31-bit rounding
        doubling high multiply and rounding divide by a power of two, bit-exact with
        LiteRT's reference kernels; one 32x31-bit product per lane). A compiled network
        carries the mode its multipliers are in. ``fpganet compile`` of an int8 TFLite model
        with no ``--requant-mode`` picks ``"tflite"`` where the target builds it (not the
        iCEBreaker: there ``"fpganet"``, with a warning; docs/guide/tflite.md).
    requant_mult_bits : int
        Significant bits of each output channel's multiplier in the ``fpganet`` mode, 1 to
        :data:`MULT_BITS` (15, the default: the whole field). With fewer, every multiplier
        is a multiple of ``2**(15 - requant_mult_bits)`` and the post-processing unit
        multiplies by its top bits only: 1 leaves a shift, no multiplier. The quantizer then
        picks each channel's weight scale, a residual add's common step and an average
        pool's output range so that the multiplier is exact in that many bits (the weights
        keep at least ``1 - 2**(1 - requant_mult_bits)`` of their int8 range: half at 1
        bit); a pre-quantized model's multipliers (QDQ, int8 TFLite: with a warning) it
        rounds. The numerics contract is unchanged: the golden model computes with the
        multipliers as stored. The ``tflite`` mode keeps its 31 bits.
    act_bank_factor : int
        1, 2, 4 or 8: activation banks per lane (:attr:`act_banks` is ``cols`` rounded up
        to a power of two times this). At 2 the lanes of a stride-2 layer, which read every
        other byte, fall in different banks instead of meeting two to a bank.
    pipeline_registers : bool
        The timing set every knob below follows unless given: off, the set of the
        iCEBreaker (block RAMs' unregistered outputs, arbitrated banks); on, the set of the
        ULX3S (a register wherever its clock needed one). A knob given alongside overrides
        the set for itself. The numerics are the same with every set.
    registered_bram_outputs : bool
        A register behind each activation bank's block RAM and behind each block of the
        weight buffer's, in front of its multiplexer (:attr:`act_read_latency` and
        :attr:`weight_read_latency` 2); the weight buffer in blocks of
        :data:`WEIGHT_BLOCK_WORDS` words, each with its own copy of the read enable
        (:attr:`weight_blocks`); and the region unit registers an ``OUTPUT`` byte behind the
        banks' multiplexer (each ``OUTPUT`` takes two cycles more: :attr:`output_latency`).
    registered_operands : bool
        The window generator registers the gathered activation bytes and the weight word
        before it offers them, behind a skid register (one cycle more: :attr:`operand_latency`),
        and takes its start a cycle late (one more: :attr:`window_start_latency`); the
        max-pool unit then takes its beats without an input register (:attr:`pool_latency`).
        Needs :attr:`bank_access` ``"scheduled"``, and the other way round.
    registered_results : bool
        The array registers the result row it offers (one cycle more: :attr:`array_latency`),
        and the result writer a lane group's sums in front of the requantizer (one more:
        :attr:`write_latency`).
    registered_decode : bool
        The controller decodes the instruction from a register read one instruction ahead (a
        taken ``LOOP`` takes a cycle more), the region unit takes its start without delay
        (:attr:`region_start_latency` 0), and the output stream's source is chosen by the
        decoded ``STAMP``.
    bank_access : str
        How the window generator and the result writer share the activation banks:
        ``"arbitrated"`` (a bank arbiter each cycle, lowest lane first) or ``"scheduled"``
        (bank schedules computed a tile or a lane group ahead, in the same order: no cycle
        changes; the window keeps its bank hits and the lanes it reads in flip-flops, the
        writer's walk runs ahead with its lanes stepping in closed form;
        ``fpganet.hdl.window.window_generator``, ``fpganet.hdl.scatter.result_writer``).
        With pair products the scheduled window reads both channels of every beat when
        ``K_C > 1`` (:mod:`fpganet.perf`).
    registered_writes : bool
        The activation banks' byte writes land a cycle late from flip-flops (no cycle changes),
        and a ``FILL`` writes a run of banks a cycle (:func:`fpganet.perf.fill_runs`); the
        program and parameter memories' host writes go through a write stage on the falling
        edge.
    registered_host_output : bool
        The host link's replier registers its output and computes its CRC in a stage of its
        own, and the UART transmitter has no holding register.
    result_queue_rows : int
        Result rows queued between the array and the result writer (0: none, the array's
        results go straight to the writer). The array's result registers hold one tile, and
        it takes a tile's last beat only once every row of the tile before has left them;
        without a queue that waits for the writer to requantize every row
        (``array_latency`` plus the tile's write cycles per tile when the writer is the
        bottleneck), with a queue of at least ``rows`` only for the rows to move into it, so
        the array's latency overlaps the writer's work (:mod:`fpganet.perf` models the
        queue row by row; ``amaranth.lib.fifo.SyncFIFOBuffered``). The numerics are the
        same.
    diagonal_weights : bool
        ``CONV``'s diagonal mode (docs/reference/architecture.md, "Instruction set"): array row ``i``
        weights only channel ``i`` of the walk, and the walk reads one weight word per kernel
        position, for every channel. A depthwise convolution's or an average pool's weights
        then take ``K_H * K_W`` words per group of ``rows`` channels instead of the
        block-diagonal ``rows * K_H * K_W`` (``rows`` times fewer); the window generator
        masks the weight word with the beat's channel (a ``rows``-bit one-hot register per
        stage). Same cycles, same numerics.
    pair_products : bool
        Two products per PE and cycle (``fpganet.hdl.systolic.PairProducts``): each beat
        carries two input channels of the reduction, ``c`` and ``c + 1``, at the same kernel
        position, each array operand the two bytes side by side (the even channel low), and
        each PE adds ``a0*b0 + a1*b1`` to its sum: ``2 x rows x cols`` MACs a cycle with the
        accumulators of ``rows x cols`` PEs. A ``CONV`` takes ``ceil(K_C / 2) * K_H * K_W``
        beats a tile, each lane gathering two bytes (the odd channel's ``IN_CSTRIDE`` further
        on; not read past ``K_C``, but with :attr:`bank_access` ``"scheduled"`` when ``K_C > 1``, the
        window's one bank schedule a tile); a weight word holds two bytes per row
        (:attr:`weight_word_bytes`); the PE takes a cycle more (:attr:`pe_latency`). ``POOL``
        is unchanged (its ``K_C`` is 1). The numerics are the same.
    ternary_pairs : bool
        With :attr:`pair_products`, each PE makes its two products with one multiplier
        (``fpganet.hdl.systolic.TernaryPairs``): the two activations, offset to 0..255, side
        by side 10 bits apart in one operand, the two weights in the other, the pair's sum in
        the middle bits of the product, less a correction of ``128 x (w0 + w1)``. Exact only
        for weights of -1, 0 and +1, so every layer's weights must be (binary and ternary
        networks; an add's scale weights are not): the compiler refuses any other. Half the
        multipliers of the pair PEs (an 18 x 12-bit product, one ECP5 MULT18X18D a PE), same
        cycles, same numerics. Needs ``operand_width`` 8.
    fused_max_pool : bool
        ``CONV``'s pooled writes (docs/reference/architecture.md, "Instruction set"): the result writer
        keeps a running maximum of the requantized bytes of each pair of result rows over the
        tile's lanes and writes one byte per pair, so that a convolution and the 2x2 max-pool
        after it run as ``CONV`` instructions without a ``POOL`` (the compiler maps output columns
        ``2x, 2x + 1`` to the row pair and output rows ``2y, 2y + 1`` to two lanes). An
        8-bit register and compare; needs ``requant_lanes`` 1, :attr:`bank_access` ``"arbitrated"``
        and 2 columns or more (the compiler uses it with 2 rows or more). Same cycles for every other instruction.
    packed_weights : bool
        ``CONV``'s packed mode (docs/reference/architecture.md, "Instruction set"): a layer whose
        weights have 4 bits or fewer stores two beats' weights in one weight word, each byte's
        low nibble for the even beat and its high nibble for the odd one, so that it takes
        half the weight buffer and half the host link's weight load. The window generator
        selects and sign-extends the beat's nibble (a multiplexer per weight byte, behind the
        weight buffer). Needs ``operand_width`` 8. Same cycles, same numerics; an int8 layer
        is stored as before.
    binary_weights : bool
        ``CONV``'s binary mode (docs/reference/architecture.md, "Instruction set"): a layer whose
        weights are all -1 or +1 stores eight beats' weights in one weight word, a bit of each
        byte a beat (1 for +1), so that it takes an eighth of the weight buffer and of the host
        link's weight load. The window generator selects the beat's bit and makes it -1 or +1
        (a multiplexer per weight byte, behind the weight buffer). Not for a layer whose
        weight words hold a zero the array reads: with :attr:`pair_products`, a walk of an odd
        number of channels (its last pair's odd half); and such a layer's conv is not fused
        with its max-pool (the pooled walk's extra kernel column is zeros). Needs
        ``operand_width`` 8. Same cycles, same numerics.
    single_port_activations : bool
        Each activation bank is a single-port RAM (the iCE40UP5K's SPRAM,
        ``fpganet.hdl.ice40_spram.SPRAMActivationBuffer``), which reads or writes in a cycle,
        not both. The result writer's byte writes then take a cycle of their own, in which the
        whole engine (window generator, array, max-pool unit, writer, result queue) holds: a ``CONV`` or
        ``POOL`` takes one cycle more per write (:func:`fpganet.perf.engine_cycles`). Needs
        ``requant_lanes`` 1 (one byte a write cycle), no ``fused_max_pool``, and the plain
        ``registered_bram_outputs`` and ``registered_writes`` (off). Same numerics.
    clock_hz : float
        Clock the performance figures assume unless a routed Fmax replaces it.
    """

    rows: int = 2
    cols: int = 8
    operand_width: int = 8
    acc_width: int = 32
    weight_buffer_bytes: int = 64 * 1024
    act_buffer_bytes: int = 8 * 1024
    bias_buffer_words: int = 512
    program_words: int = 1024
    requant_lanes: int = 1
    requant_latency: int = None
    requant_mode: str = "fpganet"
    requant_mult_bits: int = MULT_BITS
    broadcast_operands: bool = False
    act_bank_factor: int = 1
    pipeline_registers: bool = False
    registered_bram_outputs: bool = None
    registered_operands: bool = None
    registered_results: bool = None
    registered_decode: bool = None
    bank_access: str = None
    registered_writes: bool = None
    registered_host_output: bool = None
    result_queue_rows: int = 0
    diagonal_weights: bool = False
    pair_products: bool = False
    ternary_pairs: bool = False
    fused_max_pool: bool = False
    packed_weights: bool = False
    binary_weights: bool = False
    single_port_activations: bool = False
    clock_hz: float = 40e6

    def __post_init__(self):
        for name in ("rows", "cols", "operand_width", "acc_width", "weight_buffer_bytes",
                     "act_buffer_bytes", "bias_buffer_words", "program_words", "requant_lanes"):
            value = getattr(self, name)
            if not isinstance(value, int) or isinstance(value, bool):
                raise ConfigError(f"{name} must be an integer, not {value!r}")
            if value < 1:
                raise ConfigError(f"{name} must be at least 1, not {value}")
        if self.rows > 64 or self.cols > 64:
            raise ConfigError(f"array {self.rows}x{self.cols} is larger than the 64x64 "
                              f"this generator supports")
        if not 2 <= self.operand_width <= 16:
            raise ConfigError(f"operand_width must be 2..16 bits, not {self.operand_width}")
        if self.pair_products is True and self.operand_width > 8:
            raise ConfigError(f"pair_products puts two operands in one DSP multiplier: "
                              f"operand_width at most 8, not {self.operand_width}")
        if self.acc_width < self.pe_sum_width:
            raise ConfigError(f"acc_width {self.acc_width} cannot hold one "
                              f"{self.operand_width}x{self.operand_width}-bit product"
                              f"{' pair' if self.pair_products else ''} ({self.pe_sum_width} bits)")
        if self.acc_width > 64:
            raise ConfigError(f"acc_width must be at most 64 bits, not {self.acc_width}")
        for name, word in (("weight_buffer_bytes", self.weight_word_bytes),
                           ("act_buffer_bytes", self.act_banks)):
            if getattr(self, name) < word:
                raise ConfigError(f"{name} {getattr(self, name)} is smaller than one "
                                  f"{word}-byte word of the {self.name} array")
        if (not isinstance(self.result_queue_rows, int) or isinstance(self.result_queue_rows, bool)
                or self.result_queue_rows == 1 or not 0 <= self.result_queue_rows <= 64):
            raise ConfigError(f"result_queue_rows must be 0 (no queue) or 2..64, not "
                              f"{self.result_queue_rows!r}")
        if self.act_bank_factor not in (1, 2, 4, 8) or isinstance(self.act_bank_factor, bool):
            raise ConfigError(f"act_bank_factor must be 1, 2, 4 or 8, not {self.act_bank_factor!r}")
        if self.cols % self.requant_lanes:
            raise ConfigError(f"requant_lanes {self.requant_lanes} does not divide cols {self.cols}")
        for name in ("broadcast_operands", "pipeline_registers", "diagonal_weights", "pair_products",
                     "ternary_pairs", "fused_max_pool", "packed_weights", "binary_weights",
                     "single_port_activations"):
            if not isinstance(getattr(self, name), bool):
                raise ConfigError(f"{name} must be true or false, not {getattr(self, name)!r}")
        if self.packed_weights and self.operand_width != 8:
            raise ConfigError(f"packed_weights puts two {PACKED_WEIGHT_BITS}-bit weights in a "
                              f"byte: operand_width must be 8, not {self.operand_width}")
        if self.ternary_pairs and (not self.pair_products or self.operand_width != 8):
            raise ConfigError(f"ternary_pairs makes a pair PE's two 8-bit products with one "
                              f"multiplier: it needs pair_products and operand_width 8")
        if self.binary_weights and self.operand_width != 8:
            raise ConfigError(f"binary_weights puts {BINARY_WEIGHT_BEATS} one-bit weights in a "
                              f"byte: operand_width must be 8, not {self.operand_width}")
        self._resolve_timing()
        if self.fused_max_pool:
            against = [what for what, wrong in ((f"requant_lanes {self.requant_lanes}",
                                                 self.requant_lanes != 1),
                                                (f"bank_access {self.bank_access!r}",
                                                 self.bank_access != "arbitrated"),
                                                (f"{self.cols} column", self.cols < 2)) if wrong]
            if against:
                raise ConfigError(f"fused_max_pool needs requant_lanes 1, bank_access 'arbitrated' and "
                                  f"at least 2 columns; the {self.name} configuration has "
                                  f"{', '.join(against)}")
        if self.single_port_activations:
            against = [what for what, wrong in ((f"requant_lanes {self.requant_lanes}",
                                                 self.requant_lanes != 1),
                                                ("fused_max_pool", self.fused_max_pool),
                                                ("registered_bram_outputs",
                                                 self.registered_bram_outputs),
                                                ("registered_writes", self.registered_writes))
                       if wrong]
            if against:
                raise ConfigError(f"single_port_activations needs requant_lanes 1 and no "
                                  f"fused_max_pool, registered_bram_outputs or registered_writes; "
                                  f"the {self.name} configuration has {', '.join(against)}")
        if self.requant_mode not in REQUANT_MODES:
            raise ConfigError(f"requant_mode must be one of {', '.join(REQUANT_MODES)}, "
                              f"not {self.requant_mode!r}")
        latencies = REQUANT_LATENCIES[self.requant_mode]
        if self.requant_latency is None:
            object.__setattr__(self, "requant_latency", latencies[0])
        if (not isinstance(self.requant_latency, int) or isinstance(self.requant_latency, bool)
                or self.requant_latency not in latencies):
            raise ConfigError(f"requant_latency must be {' or '.join(map(str, latencies))} "
                              f"(pipeline stages of the {self.requant_mode} post-processing "
                              f"unit), not {self.requant_latency!r}")
        if (not isinstance(self.requant_mult_bits, int) or isinstance(self.requant_mult_bits, bool)
                or not 1 <= self.requant_mult_bits <= MULT_BITS):
            raise ConfigError(f"requant_mult_bits must be 1..{MULT_BITS}, not "
                              f"{self.requant_mult_bits!r}")
        if self.requant_mode == "tflite" and self.requant_mult_bits != MULT_BITS:
            raise ConfigError(f"requant_mult_bits {self.requant_mult_bits}: the tflite "
                              f"requantization keeps TFLite's 31-bit multipliers; fewer bits are "
                              f"for the fpganet mode")
        if self.program_words > 1 << 16:
            raise ConfigError(f"program_words {self.program_words} exceeds the 16-bit LOOP target")
        if (not isinstance(self.clock_hz, (int, float)) or isinstance(self.clock_hz, bool)
                or not math.isfinite(self.clock_hz) or not self.clock_hz > 0):
            raise ConfigError(f"clock_hz must be a positive number of Hz, finite, not {self.clock_hz!r}")

    def _resolve_timing(self):
        """Each timing knob not given follows :attr:`pipeline_registers`' set
        (:data:`TIMING_SETS`); then the checks of the knobs and of their combination."""
        for name, values in TIMING_SETS.items():
            if getattr(self, name) is None:
                object.__setattr__(self, name, values[self.pipeline_registers])
            elif name == "bank_access":
                if self.bank_access not in BANK_ACCESS:
                    raise ConfigError(f"bank_access must be one of {', '.join(BANK_ACCESS)}, "
                                      f"not {self.bank_access!r}")
            elif not isinstance(getattr(self, name), bool):
                raise ConfigError(f"{name} must be true or false, not {getattr(self, name)!r}")
        if self.registered_operands != (self.bank_access == "scheduled"):
            raise ConfigError("registered_operands and bank_access 'scheduled' go together: the "
                              "scheduled window offers its beat from a register behind a skid, "
                              "the arbitrated one straight from the banks; the "
                              f"{self.name} configuration has registered_operands "
                              f"{self.registered_operands} and bank_access {self.bank_access!r}")

    def timing_overrides(self):
        """The timing knobs that differ from :attr:`pipeline_registers`' set, by name."""
        return {name: getattr(self, name) for name, values in TIMING_SETS.items()
                if getattr(self, name) != values[self.pipeline_registers]}

    # Derived values ------------------------------------------------------------------------

    @property
    def products_per_pe(self):
        """Products each PE makes per beat: 2 with :attr:`pair_products`, else 1."""
        return 2 if self.pair_products else 1

    @property
    def macs_per_cycle(self):
        """Multiply-accumulates the array performs per cycle at full occupancy."""
        return self.rows * self.cols * self.products_per_pe

    @property
    def pe_operand_width(self):
        """Bits of one array operand: ``operand_width``, or with :attr:`pair_products` two
        operands side by side (the even channel's in the low half)."""
        return self.operand_width * self.products_per_pe

    @property
    def pe_sum_width(self):
        """Bits of what a PE adds to its accumulator per beat: one product, or the sum of two."""
        return self.product_width + (1 if self.pair_products else 0)

    @property
    def pe_latency(self):
        """Cycles through a PE: 2 (product and accumulator registers), 3 with
        :attr:`pair_products` (the products, their sum, the accumulator)."""
        return 3 if self.pair_products else 2

    @property
    def array_latency(self):
        """Cycles from a tile's last beat into the array to its first result row:
        ``cols - 1`` of skew (systolic only), :attr:`pe_latency` in the PE, 1 for the result
        row, and with :attr:`registered_results` 1 for the array's output register
        (``SystolicArray.latency``)."""
        skew = 0 if self.broadcast_operands else self.cols - 1
        return skew + self.pe_latency + 1 + (1 if self.registered_results else 0)

    @property
    def region_start_latency(self):
        """Cycles the region unit takes a start late: 1 without :attr:`registered_decode` (the
        start, decoded from the instruction word on the program memory's output, reaches two
        of its flip-flops and none of its counters, which load while it is idle), 0 with them.
        A ``FILL``, ``INPUT`` or ``OUTPUT`` takes that many cycles more."""
        return 0 if self.registered_decode else 1

    @property
    def pool_latency(self):
        """Cycles from a tile's last beat into the max-pool unit to its result row: 1, and
        without :attr:`registered_operands` 2 (a register on the unit's input: the beats' bytes
        come straight from the activation banks' multiplexer, which the compares would follow
        in one cycle; with the pipeline registers the window registers its offer)
        (``MaxPool.latency``)."""
        return 1 if self.registered_operands else 2

    @property
    def act_read_latency(self):
        """Cycles from an activation-buffer read to its bytes: 1 (the block RAMs' read), 2
        with :attr:`registered_bram_outputs` (a register behind each bank's block RAM)."""
        return 2 if self.registered_bram_outputs else 1

    def first_beat_cycle(self, lanes):
        """Cycle (the engine's start = 0) in which a ``CONV``/``POOL``'s first beat enters the
        window generator's gather stage, for ``LANES = lanes``: the lane walker walks the
        first tile from cycle 1 (``lanes`` cycles), one more cycle loads the beat (``lanes +
        3``), and :attr:`window_start_latency` more. A beat that enters at cycle ``e`` and
        needs ``c`` gather cycles is offered at ``e + c + operand_latency - 1``."""
        return lanes + 3 + self.window_start_latency

    @property
    def window_start_latency(self):
        """Cycles the window generator takes an engine start late: 0, or 1 with
        :attr:`registered_operands` (a register on entry: the start is decoded from the
        instruction in the controller, which is placed far from the window's lane walker).
        One cycle more per ``CONV``/``POOL``."""
        return 1 if self.registered_operands else 0

    @property
    def weight_read_latency(self):
        """Cycles from a weight-buffer read to its word: 1 (the block RAMs' read), 2 with
        :attr:`registered_bram_outputs` (a register behind each block of block RAMs, in front of
        the multiplexer across the blocks): :attr:`act_read_latency`, so that the word
        arrives beside the activation bytes."""
        return self.act_read_latency

    @property
    def weight_blocks(self):
        """The weight buffer's blocks of :data:`WEIGHT_BLOCK_WORDS` words with
        :attr:`registered_bram_outputs`, each behind its own register and read enable (1 without):
        the window generator drives that many equal copies of the read enable, flip-flops of
        their own, so that no one net reaches every block RAM (on the ULX3S's 144 DP16KD the
        one enable was a critical path, 12.9 ns of routing)."""
        if not self.registered_bram_outputs:
            return 1
        return -(-self.weight_buffer_words // WEIGHT_BLOCK_WORDS)

    @property
    def operand_latency(self):
        """Cycles from a beat's last gather cycle to its offer to the array or the pool unit:
        :attr:`act_read_latency`, and with :attr:`registered_operands` one more (the gathered
        beat is registered before its offer): 1 to 3."""
        return self.act_read_latency + (1 if self.registered_operands else 0)

    @property
    def output_latency(self):
        """Cycles from an ``OUTPUT`` byte's read to its offer on the output stream:
        :attr:`act_read_latency`, and with :attr:`registered_bram_outputs` one more (the byte is
        registered behind the banks' multiplexer): 1 or 3. An ``OUTPUT`` of ``N`` bytes takes
        ``N + 2 + region_start_latency + output_latency`` cycles."""
        return self.act_read_latency + (1 if self.registered_bram_outputs else 0)

    @property
    def write_latency(self):
        """Cycles from a lane group's cycle in the result writer to the write of its bytes:
        :attr:`requant_latency`, and with :attr:`registered_results` one more (the lane
        group's sums are registered before the requantizer): 4 to 7."""
        return self.requant_latency + (1 if self.registered_results else 0)

    @property
    def mult_step(self):
        """What every ``fpganet`` multiplier is a multiple of: ``2**(15 - requant_mult_bits)``."""
        return 1 << (MULT_BITS - self.requant_mult_bits)

    @property
    def peak_macs_per_s(self):
        return self.macs_per_cycle * self.clock_hz

    @property
    def product_width(self):
        """Bits of one signed operand product."""
        return 2 * self.operand_width

    @property
    def operand_min(self):
        return -(1 << (self.operand_width - 1))

    @property
    def operand_max(self):
        return (1 << (self.operand_width - 1)) - 1

    @property
    def max_exact_k(self):
        """Longest dot product that cannot overflow the accumulator, whatever the operands.

        The largest product magnitude is ``operand_min ** 2``; the accumulator
        holds ``2 ** (acc_width - 1)`` of either sign.
        """
        return ((1 << (self.acc_width - 1)) - 1) // (self.operand_min ** 2)

    @property
    def weight_word_bytes(self):
        """Bytes the weight buffer delivers per cycle: one operand per array row (two with
        :attr:`pair_products`)."""
        return (self.rows * self.pe_operand_width + 7) // 8

    @property
    def act_word_bytes(self):
        """Bytes the activation buffer delivers per cycle: one operand per array column."""
        return (self.cols * self.operand_width + 7) // 8

    @property
    def act_banks(self):
        """Byte-wide banks of the activation buffer: ``cols`` rounded up to a power of two, times
        ``act_bank_factor``.

        Byte address ``a`` lives in bank ``a % act_banks`` at word ``a // act_banks``. More
        banks than lanes let a stride-2 layer's lanes, which read every other byte, fall in
        different banks.
        """
        return (1 << (self.cols - 1).bit_length()) * self.act_bank_factor

    @property
    def act_bank_depth(self):
        return self.act_buffer_bytes // self.act_banks

    @property
    def host_data_width(self):
        """Bits of the host write port's data: a program word or a weight word."""
        return max(64, 8 * self.weight_word_bytes)

    @property
    def weight_buffer_words(self):
        return self.weight_buffer_bytes // self.weight_word_bytes

    # Widths the hardware derives (its address and register widths) -----------------------

    @property
    def act_addr_width(self):
        """Bits of an activation byte address."""
        return max(1, ceil_log2(self.act_buffer_bytes))

    @property
    def weight_addr_width(self):
        """Bits of a weight word address."""
        return max(1, ceil_log2(self.weight_buffer_words))

    @property
    def param_addr_width(self):
        """Bits of a parameter entry address."""
        return max(1, ceil_log2(self.bias_buffer_words))

    @property
    def program_addr_width(self):
        """Bits of an instruction address."""
        return max(1, ceil_log2(self.program_words))

    @property
    def bank_bits(self):
        """Low activation address bits that select the bank (:attr:`act_banks` is a power of two)."""
        return ceil_log2(self.act_banks)

    @property
    def bank_word_width(self):
        """Bits of a word address inside one activation bank."""
        return max(1, self.act_addr_width - self.bank_bits)

    @property
    def lanes_width(self):
        """Bits of the ``LANES`` register (``1..cols``)."""
        return self.cols.bit_length()

    @property
    def count_width(self):
        """Bits of every count register (:data:`fpganet.isa.ENGINE_COUNTS`,
        :data:`fpganet.isa.REGION_COUNTS`).

        Each count walks data that lives in the activation buffer (a map's channels, rows or
        columns, a kernel no larger than its padded input map, output pixels and channels, the
        bytes of a region), so none exceeds ``act_buffer_bytes <= 2**act_addr_width``: one bit
        more than an activation address holds them all, and every bit beyond that would cost a
        flip-flop per register and per counter that walks it. :data:`fpganet.isa.COUNT_WIDTH`
        at most.
        """
        return min(COUNT_WIDTH, self.act_addr_width + 1)

    @property
    def act_buffer_words(self):
        return self.act_buffer_bytes // self.act_word_bytes

    @property
    def name(self):
        """Short label for file names and reports, for example ``2x8``."""
        return f"{self.rows}x{self.cols}"

    def stores_binary(self, weight):
        """A layer of ``weight`` (every one -1 or +1) can be stored eight to a byte here
        (``CONV binary``); the compiler stores it as without ``binary_weights`` where pair
        products would read a zero weight (an odd number of channels in the walk)."""
        return self.binary_weights and bool(np.all(np.abs(np.asarray(weight, np.int16)) == 1))

    def runs_weights(self, weight):
        """Whether the array computes with ``weight`` (an int array) exactly: any int8 weight,
        but with :attr:`ternary_pairs` only -1, 0 and +1."""
        weight = np.asarray(weight, np.int16)
        return not self.ternary_pairs or bool(np.all(np.abs(weight) <= 1))

    def stores_packed(self, weight_bits):
        """A layer of ``weight_bits``-bit weights is stored two to a byte here (``CONV packed``)."""
        return self.packed_weights and weight_bits <= PACKED_WEIGHT_BITS

    # Serialization -------------------------------------------------------------------------

    def to_dict(self):
        """Parameters and derived values as plain JSON-able data. The timing knobs appear
        only where they differ from :attr:`pipeline_registers`' set
        (:meth:`timing_overrides`), so that a board's set is written as before: one key."""
        overrides = self.timing_overrides()
        data = {name: value for name, value in dataclasses.asdict(self).items()
                if name not in TIMING_SETS or name in overrides}
        data["derived"] = {
            "macs_per_cycle": self.macs_per_cycle,
            "peak_macs_per_s": self.peak_macs_per_s,
            "max_exact_k": self.max_exact_k,
            "products_per_pe": self.products_per_pe,
            "array_latency": self.array_latency,
            "window_start_latency": self.window_start_latency,
            "operand_latency": self.operand_latency,
            "write_latency": self.write_latency,
            "weight_word_bytes": self.weight_word_bytes,
            "act_word_bytes": self.act_word_bytes,
            "act_banks": self.act_banks,
            "mult_step": self.mult_step,
        }
        return data

    def to_json(self, **kwargs):
        return json.dumps(self.to_dict(), **kwargs)

    @classmethod
    def from_dict(cls, data):
        """Build from :meth:`to_dict` output; unknown keys are an error, ``derived`` is ignored."""
        if not isinstance(data, dict):
            raise ConfigError(f"configuration must be a JSON object, not {type(data).__name__}")
        fields = {field.name for field in dataclasses.fields(cls)}
        unknown = sorted(set(data) - fields - {"derived"})
        if unknown:
            raise ConfigError(f"unknown configuration key(s): {', '.join(unknown)}")
        return cls(**{key: value for key, value in data.items() if key in fields})

    @classmethod
    def from_json(cls, text):
        try:
            data = json.loads(text)
        except json.JSONDecodeError as error:
            raise ConfigError(f"configuration is not valid JSON: {error}") from None
        return cls.from_dict(data)

    def replace(self, **changes):
        """A copy with some parameters changed (checked again). A new ``requant_mode`` without a
        ``requant_latency`` brings the mode's first latency if the present one is not the
        mode's; the timing knobs not changed follow a new :attr:`pipeline_registers` unless
        they override the present one's set."""
        following = {name: None for name in TIMING_SETS
                     if name not in changes and name not in self.timing_overrides()}
        return dataclasses.replace(self, **following,
                                   **fit_requant_latency(changes, self.requant_latency))

    @classmethod
    def parse_array(cls, text, **others):
        """Build from an ``RxC`` string as given on the command line (``--array 2x8``)."""
        try:
            rows, cols = (int(part) for part in text.lower().split("x"))
        except ValueError:
            raise ConfigError(f"array size {text!r} is not of the form ROWSxCOLS, e.g. 2x8") from None
        return cls(rows=rows, cols=cols, **others)


def fit_requant_latency(changes, latency):
    """``changes`` (configuration fields) with ``requant_latency`` set to the first of
    :data:`REQUANT_LATENCIES` of a ``requant_mode`` they name, unless they give a latency
    or ``latency`` (the one they would keep) is already the mode's."""
    mode = changes.get("requant_mode")
    if mode in REQUANT_LATENCIES and "requant_latency" not in changes \
            and latency not in REQUANT_LATENCIES[mode]:
        return {**changes, "requant_latency": REQUANT_LATENCIES[mode][0]}
    return changes


DEFAULT_CONFIG = AcceleratorConfig()
