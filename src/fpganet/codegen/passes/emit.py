"""Pass ``emit``: the program, the weight image and the parameter image of a finished plan."""

from dataclasses import dataclass

import numpy as np

from ...isa import Opcode, Reg
from ..program import Program, generate, param_image, weight_image

__all__ = ["Emission", "emit", "format_emission"]


@dataclass
class Emission:
    """What emission makes of a plan: the code, int8 ``[words, weight_word_bytes]`` weights and
    uint64 parameter entries."""

    program: Program
    weights: np.ndarray
    params: np.ndarray


def emit(plan):
    """Reads the whole plan (layouts, addresses, weight and parameter places); writes nothing in
    it: returns the :class:`Emission` (:func:`fpganet.codegen.program.generate`,
    :func:`~fpganet.codegen.program.weight_image`, :func:`~fpganet.codegen.program.param_image`)."""
    return Emission(generate(plan), weight_image(plan), param_image(plan))


def _labels(plan, program):
    """Instruction index -> what starts there (``INPUT``, a step, ``OUTPUT``)."""
    labels = {}
    for number, (first, _) in sorted(program.layer_ranges.items()):
        if number == 0:
            labels[first] = "INPUT (image 0)"
        elif number == len(plan.steps) + 1:
            labels[first] = "OUTPUT"
        else:
            step = plan.steps[number - 1]
            name = step.layer.name if step.layer is not None else step.dst.name
            labels[first] = f"step {number} {step.kind} {name}"
    return labels


#: Instructions over a region, whose SETs name the registers by their ``IO_*`` names.
REGION_OPCODES = (Opcode.FILL, Opcode.INPUT, Opcode.OUTPUT)
_IO_NAMES = {member: name for name, member in Reg.__members__.items() if name.startswith("IO_")}


def _texts(instructions):
    """Each instruction's text; a SET before a region instruction by its register's ``IO_*``
    name (``IO_LEN``, not ``K_W``: the registers are shared)."""
    texts, region = [], False
    for instruction in reversed(instructions):
        if instruction.opcode is not Opcode.SET:
            region = instruction.opcode in REGION_OPCODES
            texts.append(str(instruction))
        elif region and instruction.reg in _IO_NAMES:
            texts.append(f"SET {_IO_NAMES[instruction.reg]} {instruction.value}")
        else:
            texts.append(str(instruction))
    return texts[::-1]


def format_emission(emission, plan):
    """The emitted program as text (one instruction a line, its index first; each step's first
    instruction marked), then the sizes of the weight and parameter images."""
    program = emission.program
    labels = _labels(plan, program)
    lines = [f"program: {len(program.prologue)} prologue instructions (instruction "
             f"{program.loop_count_index} sets LOOP_COUNT), {len(program.body)} in the loop body, "
             f"then LOOP {len(program.prologue)} and END", "prologue:"]
    lines += [f"  {pc:5d}  {text}" for pc, text in enumerate(_texts(program.prologue))]
    lines.append("body:")
    for pc, text in enumerate(_texts(program.body), len(program.prologue)):
        if pc in labels:
            lines.append(f"        ; {labels[pc]}")
        lines.append(f"  {pc:5d}  {text}")
    lines.append(f"weights: {len(emission.weights):,} words of {emission.weights.shape[1]} bytes; "
                 f"params: {len(emission.params):,} entries")
    return "\n".join(lines) + "\n"
