"""Deliberately faulty processing elements, to show that the checks catch a wrong array."""

from amaranth import Module
from amaranth.lib import wiring

from fpganet.hdl.systolic import ProcessingElement


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
