"""Adders, shifts and radix-4 Booth products built from fabric logic for the requantizers.

Plain functions that add gateware to a module; the requantizer variants
(:mod:`fpganet.hdl.requant_base`, :mod:`fpganet.hdl.requant_fabric`) compose them.
"""

from amaranth import *

__all__ = ["DIGITS", "add_terms", "booth_digits", "booth_product", "booth_rows", "coarse_shift",
           "shifted_sum"]

#: Radix-4 digits of the 15-bit unsigned ``mult`` for the Booth requantizers.
DIGITS = 8


def coarse_shift(value, amount):
    """``value >> 16 * amount`` (arithmetic) for a 2-bit ``amount``: two mux levels."""
    return Mux(amount[1], Mux(amount[0], value >> 48, value >> 32),
               Mux(amount[0], value >> 16, value))


def add_terms(m, a, b, width, *, name, extras=()):
    """``a + b + extras`` of ``(value, lsb)`` terms (each ``value << lsb``), modulo
    ``2**width``, as one two-operand adder (combinational): ``a`` the lower, ``extras`` bits
    of ``b``'s operand below ``b``'s lsb (a Booth row's ``+1``), which extend the adder
    downwards; the bits of ``a`` below the adder pass through. Yosys maps the one ``+`` to an
    iCE40 carry chain, one logic cell per adder bit.

    Returns
    -------
    (Signal, int)
        The sum and its lsb, ``a``'s.
    """
    (va, la), (vb, lb) = a, b
    start = min([lb] + [position for _, position in extras])
    assert la <= start
    operand = [C(0, 1)] * (lb - start)
    for bit, position in extras:
        operand[position - start] = bit
    high = Cat(*operand, vb).as_signed()
    upper = va[start - la:].as_signed() if start > la else va
    total_width = min(max(len(upper), len(high)) + 1, width - start)
    total = Signal(signed(total_width), name=name)
    m.d.comb += total.eq(upper + high)
    if start == la:
        return total, la
    low = va[:start - la]
    joined = Signal(signed(len(low) + total_width), name=f"{name}_all")
    m.d.comb += joined.eq(Cat(low, total))
    return joined, la


def shifted_sum(m, terms, width, *, name):
    """The sum of ``(value, lsb)`` terms, each ``value << lsb``, modulo ``2**width``, as a
    tree of :func:`add_terms` adders (combinational).

    Returns
    -------
    Value
        Signed; its bits below the lowest ``lsb`` are zero.
    """
    terms = sorted(terms, key=lambda term: term[1])
    level = 0
    while len(terms) > 1:
        pairs = zip(terms[0::2], terms[1::2])
        terms = [add_terms(m, low, high, width, name=f"{name}_{level}_{j}")
                 for j, (low, high) in enumerate(pairs)] + terms[len(terms) - len(terms) % 2:]
        level += 1
    value, lsb = terms[0]
    return Cat(C(0, lsb), value).as_signed()


def booth_digits(mult):
    """The radix-4 recoding of the unsigned ``mult`` (combinational).

    The digits are ``d_k`` in {-1, 0, 1, 2} with ``mult = sum(d_k 4^k)``: digit ``k`` is
    ``v = mult[2k] + 2 mult[2k+1] + c_k`` reduced mod 4 into that set, the carry ``c_(k+1)``
    set for ``v >= 3``. Unlike the usual {-2..2} digits, four row choices remain
    (0, x, 2x, ~x), so a partial-product bit is one 4-input function of
    (``x[j]``, ``x[j-1]``, two select bits): one LUT4 on an iCE40, the negation
    included (:func:`booth_rows`); the ``+1`` that completes ``-x = ~x + 1`` goes into
    the adders (:func:`booth_product`). The top digit is in 0..2 (``mult < 2 * 4^7``),
    never negative.

    Returns
    -------
    list of (Value, Value, Value)
        ``(sel0, sel1, neg)`` per digit: the row is ``0, x, 2x, ~x`` for
        ``(sel1, sel0)`` = 00, 01, 10, 11, and ``neg = sel1 & sel0``.
    """
    bits = Cat(mult, C(0, 2 * DIGITS - len(mult)))
    low, high = bits[0::2], bits[1::2]                  # mult[2k], mult[2k+1]
    # c_k: the low 2k bits exceed what digits 0..k-1 reach, 2 (4^k - 1) / 3. One compare
    # with a constant per digit: a short carry chain each, not a ripple through the digits.
    digits = []
    for k in range(DIGITS):
        carry = mult[:2 * k] >= (2 * 4 ** k + 1) // 3 if k else C(0, 1)
        b0, b1 = low[k], high[k]
        odd = b0 ^ carry                                # v = b0 + 2 b1 + carry is 1 or 3
        digits.append((odd,                             # sel0
                       b1 ^ (b0 & carry),               # sel1: v is 2 or 3
                       odd & b1))                       # neg: v is 3
    return digits


def booth_rows(x, digits):
    """The partial products ``r_k`` of :func:`booth_digits`: ``0, x, 2x`` or ``~x``, each
    ``len(x) + 1`` signed bits, one LUT4 per bit (combinational)."""
    x_one = Cat(x, x[-1])             # x, sign-extended by one bit
    x_two = Cat(C(0, 1), x)           # 2x
    return [Mux(sel1, Mux(sel0, ~x_one, x_two), Mux(sel0, x_one, 0)).as_signed()
            for sel0, sel1, _ in digits]


def booth_product(m, rows, negs, width, *, pipelined, name):
    """``x * mult`` from :func:`booth_rows` and the digits' ``neg``, as a tree of
    two-operand adders.

    The eight rows (row ``k`` weighs ``4^k``) are added in pairs (level 1), the pairs
    into two half-sums (level 2), the halves into the product (level 3). The ``+1`` of
    each negative row (``negs[k]`` at bit ``2k``) rides in a zero bit of an adder
    operand just below the other operand's lowest bit, which extends that adder by two
    bits. Each adder is one ``+`` of two signals, which Yosys maps to an iCE40 carry
    chain (one logic cell per bit); the bits below an adder's operands pass through.
    Everything is modulo ``2^width`` (``width`` holds the product).

    With ``pipelined``, the two half-sums (and the one ``neg`` the last adder takes) are
    registered, the first of two stages, and the returned value is the last adder, for the
    caller's register; otherwise the whole tree is combinational.

    Returns
    -------
    Value
        ``x * mult``, signed ``width`` bits.
    """
    rows = [(row, 2 * k) for k, row in enumerate(rows)]
    negs = [(neg, 2 * k) for k, neg in enumerate(negs)]

    def add(a, b, extras, label):
        return add_terms(m, a, b, width, name=f"{name}_{label}", extras=extras)

    # Level 1: pairs of rows, each with the lower row's +1.
    pairs = [add(rows[2 * j], rows[2 * j + 1], [negs[2 * j]], f"pair{j}") for j in range(4)]
    # Level 2: two half-sums, each with the +1 of its first pair's upper row.
    halves = [add(pairs[2 * h], pairs[2 * h + 1], [negs[4 * h + 1]], f"half{h}") for h in range(2)]
    last_neg = negs[3]
    if pipelined:
        registered = []
        for h, (value, lsb) in enumerate(halves):
            reg = Signal(signed(len(value)), name=f"{name}_half{h}_reg")
            m.d.sync += reg.eq(value)
            registered.append((reg, lsb))
        halves = registered
        neg = Signal(name=f"{name}_neg3_reg")     # the digits belong to the next set by now
        m.d.sync += neg.eq(last_neg[0])
        last_neg = (neg, last_neg[1])
    # Level 3: the product, with digit 3's +1 (digit 7 is never negative).
    return add(halves[0], halves[1], [last_neg], "sum")[0]
