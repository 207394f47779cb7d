"""Drive the systolic array with matrix products of any size, and check them.

A product ``C[M, N] = A[M, K] @ B[K, N]`` is cut into tiles of ``rows x cols``
outputs (zero-padded at the edges) and, optionally, chunks of at most
``k_tile`` along K whose partial sums the driver adds up, as a controller does
when a buffer cannot hold the whole reduction. The same plan serves the
amaranth.sim tests, the cocotb testbench and the benchmark, so all three check
the same thing.
"""

import dataclasses
from dataclasses import dataclass

import numpy as np
from amaranth.hdl import Shape

from fpganet.hdl.systolic import operand_layout, result_layout

__all__ = ["Tile", "plan_tiles", "pair_tiles", "reference_matmul", "assemble", "PayloadCodec"]


@dataclass(frozen=True)
class Tile:
    """One tile of the product: the beats to send and where its sums go.

    ``a``: int array [k, rows] (the ``a`` operand of each beat), ``b``: int
    array [k, cols]; the sums belong at ``C[m0:m0+rows, n0:n0+cols]`` (cropped
    to the product's size).
    """
    m0: int
    n0: int
    k0: int
    a: np.ndarray
    b: np.ndarray

    @property
    def beats(self):
        return len(self.a)


def plan_tiles(A, B, rows, cols, k_tile=None):
    """Cut ``A @ B`` into array tiles, M-tile outermost, then N, then K chunks.

    Parameters
    ----------
    A : array [M, K] of int
    B : array [K, N] of int
    rows, cols : int
        Array size.
    k_tile : int, optional
        Longest reduction per tile; the default sends all of K in one tile.
    """
    A = np.asarray(A, dtype=np.int64)
    B = np.asarray(B, dtype=np.int64)
    if A.ndim != 2 or B.ndim != 2 or A.shape[1] != B.shape[0]:
        raise ValueError(f"cannot multiply shapes {A.shape} and {B.shape}")
    M, K = A.shape
    N = B.shape[1]
    if K == 0:
        raise ValueError("K must be at least 1")
    k_tile = K if k_tile is None else k_tile
    tiles = []
    for m0 in range(0, M, rows):
        for n0 in range(0, N, cols):
            for k0 in range(0, K, k_tile):
                k1 = min(K, k0 + k_tile)
                a = np.zeros((k1 - k0, rows), dtype=np.int64)
                b = np.zeros((k1 - k0, cols), dtype=np.int64)
                a_part = A[m0:m0 + rows, k0:k1].T
                b_part = B[k0:k1, n0:n0 + cols]
                a[:, :a_part.shape[1]] = a_part
                b[:, :b_part.shape[1]] = b_part
                tiles.append(Tile(m0, n0, k0, a, b))
    return tiles


def wrap(values, bits):
    """Two's-complement wrap of integers to ``bits`` bits."""
    values = np.asarray(values, dtype=np.int64)
    half = 1 << (bits - 1)
    return ((values + half) & ((1 << bits) - 1)) - half


def pair_tiles(A, B, rows, cols, k_tile=None):
    """:func:`plan_tiles` for an array of pair PEs: the operands of K steps 2t and 2t + 1 as
    one 16-bit pair operand (an odd K's last pair with a zero high half)."""
    def pack(values):
        if len(values) % 2:
            values = np.concatenate([values, np.zeros((1, values.shape[1]), dtype=np.int64)])
        return (values[0::2] & 0xFF) | (values[1::2] << 8)     # the high step's sign carries over

    return [dataclasses.replace(tile, a=pack(tile.a), b=pack(tile.b))
            for tile in plan_tiles(A, B, rows, cols, k_tile)]


def reference_matmul(A, B, acc_width=32):
    """The exact product, wrapped to the accumulator width as the hardware's."""
    return wrap(np.asarray(A, dtype=np.int64) @ np.asarray(B, dtype=np.int64), acc_width)


def assemble(tiles, tile_sums, shape, acc_width=32):
    """Add the ``rows x cols`` sums of each tile into the product of ``shape``."""
    C = np.zeros(shape, dtype=np.int64)
    for tile, sums in zip(tiles, tile_sums, strict=True):
        sums = np.asarray(sums, dtype=np.int64)
        m1 = min(shape[0], tile.m0 + sums.shape[0])
        n1 = min(shape[1], tile.n0 + sums.shape[1])
        C[tile.m0:m1, tile.n0:n1] += sums[:m1 - tile.m0, :n1 - tile.n0]
    return wrap(C, acc_width)


class PayloadCodec:
    """Pack operand beats and unpack result beats as the flat Verilog ports carry them.

    The bit positions come from the Amaranth layouts themselves
    (:func:`operand_layout`, :func:`result_layout`), so the testbench cannot
    drift from the gateware.
    """

    def __init__(self, config):
        self.config = config
        operands = operand_layout(config)
        results = result_layout(config)
        width = config.pe_operand_width          # a pair of operands with pair_products
        self._operand_mask = (1 << width) - 1
        self._a_offsets = [operands["a"].offset + i * width for i in range(config.rows)]
        self._b_offsets = [operands["b"].offset + j * width for j in range(config.cols)]
        self._last_offset = operands["last"].offset
        self._sum_offsets = [results["sums"].offset + j * config.acc_width
                             for j in range(config.cols)]
        self._row_offset = results["row"].offset
        self._row_mask = (1 << Shape.cast(results["row"].shape).width) - 1
        self._result_last_offset = results["last"].offset

    def pack_operands(self, a, b, last):
        """One beat as the integer value of the ``operands__payload`` port."""
        word = int(bool(last)) << self._last_offset
        mask = self._operand_mask
        for offset, value in zip(self._a_offsets, a):
            word |= (int(value) & mask) << offset
        for offset, value in zip(self._b_offsets, b):
            word |= (int(value) & mask) << offset
        return word

    def unpack_results(self, word):
        """``(sums, row, last)`` from the integer value of the ``results__payload`` port."""
        width = self.config.acc_width
        mask, half = (1 << width) - 1, 1 << (width - 1)
        sums = [((word >> offset) & mask) for offset in self._sum_offsets]
        sums = [value - (1 << width) if value >= half else value for value in sums]
        row = (word >> self._row_offset) & self._row_mask
        last = (word >> self._result_last_offset) & 1
        return sums, row, bool(last)
