"""Pair products (two channels a beat): the planner's channel-stride search, the compile
report's conflict count and the cycle model agree on what a beat's two reads cost."""

import numpy as np
import pytest

from fpganet.codegen import build_images, engine_conflicts
from fpganet.codegen.fuzz import random_network
from fpganet.config import AcceleratorConfig
from fpganet.errors import FpganetError
from fpganet.isa import Opcode, Reg, decode
from fpganet.perf import engine_beats, gather_cycles

CONFIGS = {
    "pairs": AcceleratorConfig(rows=4, cols=4, act_bank_factor=2, pair_products=True,
                               weight_buffer_bytes=8 * 8192),
    "pipelined pairs": AcceleratorConfig(rows=4, cols=4, act_bank_factor=2, pair_products=True,
                                         pipeline_registers=True, weight_buffer_bytes=8 * 8192),
}


def _compiled(rng, config):
    while True:
        net = random_network(rng, config)
        try:
            return build_images(net, 1, config)
        except FpganetError:
            continue


def _engine_registers(program):
    """The registers in force at each CONV/POOL, in program order."""
    regs, found = {reg: 0 for reg in Reg}, []
    for word in program:
        instruction = decode(int(word))
        if instruction.opcode is Opcode.SET:
            regs[instruction.reg] = instruction.value
        elif instruction.opcode in (Opcode.CONV, Opcode.POOL):
            found.append((instruction.opcode, dict(regs)))
    return found


@pytest.mark.parametrize("name", sorted(CONFIGS))
def test_pair_read_conflicts_agree_and_the_channel_stride_removes_them(name):
    config = CONFIGS[name]
    rng = np.random.default_rng(31)
    checked = slack = 0
    for _ in range(100):
        images = _compiled(rng, config)
        plan, program = images.plan, images.program_for(1)
        measured, registers = engine_conflicts(program, config), _engine_registers(program)
        assert len(plan.steps) == len(measured) == len(registers)
        for step, entry, (opcode, regs) in zip(plan.steps, measured, registers):
            # The compile report's count is the cycle model's.
            if opcode is Opcode.CONV:
                tiles = gather_cycles(regs, config)
                model = int(tiles.sum() - tiles.size * engine_beats(regs, config)) * regs[Reg.GROUPS]
                assert entry["extra_cycles"] == model
            if plan.pitches != "searched" or step.src.parent is not None or step.kind != "conv":
                continue
            assert [reader.src for reader in plan.steps].count(step.src) == 1     # a chain
            # ...and the planner's (one reader: its read conflicts, no write conflicts with one
            # requantizer lane).
            assert entry["extra_cycles"] == step.src.pitch_costs[step.src.pitch]
            slack += step.src.cstride != step.src.packed_cstride(step.src.pitch)
            # A stride-1 conv whose tiles keep to one output row: its lanes take half the banks,
            # consecutive ones, and the channel stride puts the odd channel's reads in the others.
            if step.stride == (1, 1) and step.walk[0] > 1 and step.out_hw[1] % step.lanes == 0:
                assert entry["extra_cycles"] == 0
                checked += 1
    assert checked >= 5 and slack > 0, (checked, slack)
