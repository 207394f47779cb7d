"""Deliberately faulty gateware (a miswired PE, an off-by-one window generator, a late result
writer, a result writer whose pooled maximum never restarts, a tflite requantizer rounding ties
the wrong way), to show that the checks catch a wrong design."""

from types import SimpleNamespace

from amaranth import C, Cat, Module
from amaranth.lib import wiring

from fpganet.hdl.postproc import TfliteRequantizer
from fpganet.hdl.scatter import ArbitratedResultWriter, result_writer
from fpganet.hdl.systolic import ProcessingElement
from fpganet.hdl.window import window_generator


class MiswiredPE(wiring.Component):
    """A correct PE whose south output is wired to its east operand: ``b_out`` carries ``a``."""

    def __init__(self, config):
        self.inner = ProcessingElement(config)
        super().__init__(self.inner.signature)

    def elaborate(self, platform):
        m = Module()
        m.submodules.inner = inner = self.inner
        for name, member in self.signature.members.items():
            if member.flow == wiring.In:
                m.d.comb += getattr(inner, name).eq(getattr(self, name))
            elif name == "b_out":
                m.d.comb += self.b_out.eq(inner.a_out)
            else:
                m.d.comb += getattr(self, name).eq(getattr(inner, name))
        return m


def _member(obj, path):
    for part in path:
        obj = obj[part] if isinstance(part, int) else getattr(obj, part)
    return obj


class _Wrapper(wiring.Component):
    """A component that passes every port of ``inner`` through, except those ``patch`` drives."""

    def __init__(self, inner):
        self.inner = inner
        super().__init__(inner.signature)

    def patch(self, m, path):
        """Return True if this wrapper drives the port at ``path`` itself."""
        return False

    def elaborate(self, platform):
        m = Module()
        m.submodules.inner = inner = self.inner
        for path, member in self.signature.members.flatten():
            if not member.is_port or self.patch(m, path):
                continue
            outer_port, inner_port = _member(self, path), _member(inner, path)
            if member.flow == wiring.In:
                m.d.comb += inner_port.eq(outer_port)
            else:
                m.d.comb += outer_port.eq(inner_port)
        return m


class OffByOneWindow(_Wrapper):
    """A window generator that walks kernel rows one byte too far apart (``IN_PITCH + 1``)."""

    def __init__(self, config):
        super().__init__(window_generator(config))

    def patch(self, m, path):
        if path == ("regs",):
            m.d.comb += self.inner.regs.eq(self.regs)
            m.d.comb += self.inner.regs.in_pitch.eq(self.regs.in_pitch + 1)
            return True
        return False


class LateWriter(_Wrapper):
    """A result writer whose `done` comes one cycle late (right data, wrong timing)."""

    def __init__(self, config):
        super().__init__(result_writer(config))

    def patch(self, m, path):
        if path == ("done",):
            m.d.sync += self.done.eq(self.inner.done)
            return True
        return False


class UnopenedPoolWriter(ArbitratedResultWriter):
    """A result writer whose ``CONV pool`` maximum never restarts at a row pair: each pooled
    byte is the largest since the instruction began (or before)."""

    def _running_max(self, m, y, served, pool):
        return super()._running_max(m, y, served, SimpleNamespace(opens=C(0, 1), writes=pool.writes))


class TiesTowardInfinityDivide(TfliteRequantizer):
    """A tflite requantizer whose rounding divide rounds negative ties toward +inf (it drops
    the ``- (high < 0)`` of TFLite's ``RoundingDivideByPOT``): -2.5 gives -2, not -3."""

    def _divide(self, m, index, high):
        return Cat(C(0, 1), high).as_signed() >> self._right
