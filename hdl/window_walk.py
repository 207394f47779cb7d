"""The order in which an engine in logic cells reads a layer: output pixels, groups of
channels, pool windows, then each window's words (:class:`WindowWalk`)."""

from amaranth import *
from amaranth.lib import data

__all__ = ["walk_layout", "walk_params", "WindowWalk"]


def walk_layout(folded):
    """The layout of one layer's walk parameters, each field as wide as the widest layer of
    ``folded`` (a :class:`~fpganet.codegen.binary.FoldedNetwork`) needs."""
    params = [walk_params(layer) for layer in folded.layers]
    return data.StructLayout({name: range(max(p[name] for p in params) + 1)
                              for name in params[0]})


def walk_params(layer):
    """The walk parameters of a :class:`~fpganet.codegen.binary.FoldedLayer` as a dict: the
    last index of each loop (``*_last``) and the address steps between the words the loops
    start at (``*_step``, ``row_stride``)."""
    pixel_words = layer.pixel_words
    row_stride = layer.in_w * pixel_words
    return {
        "col_last": layer.kernel_w * pixel_words - 1,      # a window row: consecutive words
        "row_last": layer.kernel_h - 1,
        "row_stride": row_stride,
        "pixel_words": pixel_words,
        "pool_last": layer.pool - 1,
        "subs_last": layer.pool * layer.pool - 1,
        "group_last": layer.groups - 1,
        "x_last": layer.out_w - 1,
        "y_last": layer.out_h - 1,
        "pixels_last": layer.out_h * layer.out_w - 1,
        "x_step": layer.pool * pixel_words,
        "y_step": layer.pool * row_stride,
        "weight_base": layer.weight_base,
        "threshold_base": layer.threshold_base,
    }


class WindowWalk(Elaboratable):
    """The addresses of a layer's beats, one beat a step.

    For each output pixel (row-major, of the pooled map), each group of channels, each of
    the pool's windows (row-major), the window's rows of ``col_last + 1`` consecutive words,
    ``row_stride`` apart: :attr:`act_addr` the input map's word, :attr:`weight_addr` the
    group's weight word for that beat (a group's words are re-read for each window),
    :attr:`threshold_addr` the group's thresholds. A dense layer is the one-pixel case: every
    group reads words ``0..beats - 1``.

    Attributes
    ----------
    start : Signal, in
        Load :attr:`load` as the layer's parameters and point at its first beat (takes
        precedence over ``step``).
    load : View of :func:`walk_layout`, in
    step : Signal, in
        Move to the next beat.
    params : View of :func:`walk_layout`, out
        The layer's parameters, registered at ``start``.
    act_addr, weight_addr, threshold_addr : Signal, out
        The current beat's addresses, registers.
    closing : Signal, out
        The current beat is its window's last.
    final : Signal, out
        The current beat is the layer's last.

    Latency: the addresses are registers; each changes the cycle after a ``step``.
    Throughput: one beat a ``step``, back to back across windows, groups and pixels.
    Back-pressure: the walk holds while ``step`` is low.
    """

    def __init__(self, layout, act_depth, weight_depth, threshold_depth):
        self.start, self.step = Signal(), Signal()
        self.load = Signal(layout)
        self.params = Signal(layout)
        self.act_addr = Signal(range(max(act_depth, 2)))
        self.weight_addr = Signal(range(max(weight_depth, 2)))
        self.threshold_addr = Signal(range(max(threshold_depth, 2)))
        self.closing, self.final = Signal(), Signal()

    def elaborate(self, platform):
        m = Module()
        p = self.params
        act, weight, threshold = self.act_addr, self.weight_addr, self.threshold_addr
        col, row = Signal.like(p.col_last), Signal.like(p.row_last)
        sub_x, sub_y = Signal.like(p.pool_last), Signal.like(p.pool_last)
        group, x, y = Signal.like(p.group_last), Signal.like(p.x_last), Signal.like(p.y_last)
        # The first word of: the window's current row, the window, the pool window row of
        # the windows, the output pixel's first window, the output row's first.
        row_start, window, sub_row, pixel, line = (Signal.like(act, name=name) for name in
                                                   ("row_start", "window", "sub_row", "pixel",
                                                    "line"))
        group_weight = Signal.like(weight)       # the group's first weight word
        col_end, row_end = col == p.col_last, row == p.row_last
        sub_x_end, last_sub = sub_x == p.pool_last, (sub_x == p.pool_last) & (sub_y == p.pool_last)
        group_end, x_end, y_end = group == p.group_last, x == p.x_last, y == p.y_last
        m.d.comb += [self.closing.eq(col_end & row_end),
                     self.final.eq(self.closing & last_sub & group_end & x_end & y_end)]

        def at(address):
            m.d.sync += [act.eq(address), row_start.eq(address), window.eq(address)]

        with m.If(self.start):
            m.d.sync += [p.eq(self.load), col.eq(0), row.eq(0), sub_x.eq(0), sub_y.eq(0),
                         group.eq(0), x.eq(0), y.eq(0), sub_row.eq(0), pixel.eq(0), line.eq(0),
                         weight.eq(self.load.weight_base), group_weight.eq(self.load.weight_base),
                         threshold.eq(self.load.threshold_base)]
            at(0)
        with m.Elif(self.step):
            with m.If(~col_end):
                m.d.sync += [col.eq(col + 1), act.eq(act + 1), weight.eq(weight + 1)]
            with m.Elif(~row_end):
                m.d.sync += [col.eq(0), row.eq(row + 1), weight.eq(weight + 1),
                             row_start.eq(row_start + p.row_stride),
                             act.eq(row_start + p.row_stride)]
            with m.Else():
                m.d.sync += [col.eq(0), row.eq(0)]
                with m.If(~last_sub):
                    # The pool's next window: the same group's weights again.
                    m.d.sync += weight.eq(group_weight)
                    with m.If(~sub_x_end):
                        m.d.sync += sub_x.eq(sub_x + 1)
                        at(window + p.pixel_words)
                    with m.Else():
                        m.d.sync += [sub_x.eq(0), sub_y.eq(sub_y + 1),
                                     sub_row.eq(sub_row + p.row_stride)]
                        at(sub_row + p.row_stride)
                with m.Else():
                    m.d.sync += [sub_x.eq(0), sub_y.eq(0)]
                    with m.If(~group_end):
                        m.d.sync += [group.eq(group + 1), weight.eq(weight + 1),
                                     group_weight.eq(weight + 1), threshold.eq(threshold + 1),
                                     sub_row.eq(pixel)]
                        at(pixel)
                    with m.Else():
                        m.d.sync += [group.eq(0), weight.eq(p.weight_base),
                                     group_weight.eq(p.weight_base),
                                     threshold.eq(p.threshold_base)]
                        with m.If(~x_end):
                            m.d.sync += [x.eq(x + 1), pixel.eq(pixel + p.x_step),
                                         sub_row.eq(pixel + p.x_step)]
                            at(pixel + p.x_step)
                        with m.Else():
                            m.d.sync += [x.eq(0), y.eq(y + 1), line.eq(line + p.y_step),
                                         pixel.eq(line + p.y_step), sub_row.eq(line + p.y_step)]
                            at(line + p.y_step)
        return m
