"""Memory images, the host's byte streams, and the compiled directory's accelerator files.

:func:`build_images` is the one call a runner needs: it plans the network,
generates the program and returns :class:`MemoryImages`, which holds what the
host write port loads (program, weights, parameters) and knows the byte streams
(:meth:`MemoryImages.pack_inputs`, :meth:`MemoryImages.unpack_outputs`).
"""

import dataclasses
import hashlib
import json
import os
from dataclasses import dataclass, field

import numpy as np

from ..config import AcceleratorConfig
from ..errors import FpganetError
from ..files import require_listed, verify_directory
from ..isa import (INSTRUCTION_BITS, LOOP_COUNT_WIDTH, PARAM_BITS, STAMP_BYTES, HostSpace,
                   Instruction, Opcode, Reg, decode, encode, host_memory_words, host_word_bytes)
from ..isasim import engine_read_addresses
from ..perf import pair_beats, superbank_pairs
from .passes import EMIT_PASS, dump_section, emit, format_emission
from .plan import capacity_error, plan_network

__all__ = ["MemoryImages", "StreamLayout", "build_images", "read_images", "NoProgramError", "engine_conflicts",
           "config_digest",
           "STAMP_BYTES", "FILES", "LOAD_ORDER", "pack_weight_word", "memory_words", "host_writes",
           "machine_memories"]

#: The file of a compiled directory that :func:`read_images` reads, beside the manifest.
MEMORIES = "memories.npz"
MANIFEST = "manifest.json"
#: Files :meth:`MemoryImages.save` writes into a compiled directory.
FILES = ("program.hex", "weights.hex", "params.hex", MEMORIES)
FORMAT = "fpganet-accelerator/2"


# Host words ----------------------------------------------------------------------------------
#
# What the host write port takes, one word per (space, address), for every loader: the ISA
# simulator (MemoryImages.load), the RTL simulations (fpganet.sim.rtl_images), the board
# driver (fpganet.link.run_images) and the compiled directory's .hex files.

#: The order every loader writes the memories in: the program last, so that a loader that
#: started the accelerator as soon as its program arrived would find everything else in
#: place. Every loader today starts it explicitly (the start pulse, START) after the whole
#: load, so this keeps the loaders alike rather than meeting a hardware requirement.
LOAD_ORDER = (HostSpace.WEIGHTS, HostSpace.PARAMS, HostSpace.ACTIVATIONS, HostSpace.PROGRAM)



def pack_weight_word(row_bytes):
    """A weight word as an integer: byte ``i`` (array row ``i``) at bits ``[8i+7:8i]``.

    ``row_bytes`` holds the word's signed bytes; any integers are taken modulo 256.
    """
    if isinstance(row_bytes, np.ndarray) and row_bytes.dtype in (np.int8, np.uint8):
        data = row_bytes.tobytes()
    else:
        data = bytes(int(value) & 0xFF for value in row_bytes)
    return int.from_bytes(data, "little")


def memory_words(space, image, rows=None):
    """The words of one memory image as the host write port takes them, address 0 first.

    Parameters
    ----------
    space : fpganet.isa.HostSpace or int
    image : array-like, bytes or None
        Program words (uint64, :func:`fpganet.isa.encode`), weights (int8 ``[words, rows]``),
        parameter entries (uint64, :func:`fpganet.isa.pack_param`) or activation bytes (int8,
        uint8 or ``bytes``); any sequence of integers works. None: no words.
    rows : int, optional
        Bytes per weight word, to split a flat weight image.

    Returns
    -------
    list of int
    """
    space = HostSpace(space)
    if image is None:
        return []
    if isinstance(image, (bytes, bytearray, memoryview)):
        image = np.frombuffer(bytes(image), dtype=np.uint8)
    if space is HostSpace.WEIGHTS:
        image = np.asarray(image)
        if rows is not None:
            image = image.reshape(-1, rows)
        return [pack_weight_word(row) for row in image]
    # Python integers: a list mixing words above 2**63 with small ones would become float64.
    flat = image.reshape(-1) if isinstance(image, np.ndarray) else \
        np.asarray(image, dtype=object).reshape(-1)
    mask = (1 << 8 * host_word_bytes(space, rows or 1)) - 1
    return [int(value) & mask for value in flat]


def host_writes(memories, config=None, *, skip_zeros=False):
    """The ``(space, address, word)`` writes that load ``memories``, in :data:`LOAD_ORDER`.

    Parameters
    ----------
    memories : dict
        ``{space: image}``: a :class:`~fpganet.isa.HostSpace` (or its name, any case) to what
        :func:`memory_words` takes; None images are left out.
    config : fpganet.config.AcceleratorConfig, optional
        Splits flat weight images into words of ``rows`` bytes, and refuses an image larger
        than its memory (ValueError).
    skip_zeros : bool
        Leave out zero words (for a loader whose memories start zeroed, as in a simulation
        from reset).

    Returns
    -------
    list of (HostSpace, int, int)
    """
    images = {(HostSpace[key.upper()] if isinstance(key, str) else HostSpace(key)): image
              for key, image in memories.items()}
    writes = []
    for space in LOAD_ORDER:
        words = memory_words(space, images.get(space), None if config is None else config.weight_word_bytes)
        if config is not None and len(words) > host_memory_words(space, config):
            raise ValueError(f"{space.name.lower()} image of {len(words)} words exceeds the "
                             f"{host_memory_words(space, config)} of its memory")
        writes += [(space, address, word) for address, word in enumerate(words)
                   if word or not skip_zeros]
    return writes


def machine_memories(machine):
    """``{HostSpace: array}``: the memories of an :class:`fpganet.isasim.Machine` (not copies)."""
    return {HostSpace.PROGRAM: machine.program, HostSpace.WEIGHTS: machine.weights,
            HostSpace.PARAMS: machine.params, HostSpace.ACTIVATIONS: machine.act}


@dataclass(frozen=True)
class StreamLayout:
    """What the host sends and receives per image.

    Input: ``input_bytes`` per image, the int8 image ``[C, H, W]`` in channel, row, byte
    order (``q_in[n].tobytes()`` of a C-contiguous array). Output: ``output_bytes`` int8
    (the NCHW flatten of the network output, i.e. the logits) followed by
    ``STAMP_BYTES`` of the cycle counter (unsigned, little-endian) after that image.
    """

    input_shape: tuple
    output_shape: tuple

    @property
    def input_bytes(self):
        return int(np.prod(self.input_shape, dtype=np.int64))

    @property
    def output_bytes(self):
        return int(np.prod(self.output_shape, dtype=np.int64))

    @property
    def output_record_bytes(self):
        """Bytes the accelerator sends per image: outputs then the stamp."""
        return self.output_bytes + STAMP_BYTES

    def pack_inputs(self, q_in):
        """int8 ``[N, C, H, W]`` (or ``[N, *anything with C*H*W elements]``) -> the input stream."""
        q_in = np.asarray(q_in)
        if q_in.dtype != np.int8:
            raise FpganetError(f"accelerator inputs must be int8, not {q_in.dtype}")
        if q_in.ndim < 2 or int(np.prod(q_in.shape[1:], dtype=np.int64)) != self.input_bytes:
            raise FpganetError(f"inputs have shape {list(q_in.shape)}; the program reads images of "
                               f"{list(self.input_shape)} ({self.input_bytes} bytes)")
        return np.ascontiguousarray(q_in).tobytes()

    def unpack_outputs(self, data, n_images):
        """The output stream -> ``(q int8 [N, *output_shape], stamps uint32 [N])``."""
        data = bytes(data)
        expected = n_images * self.output_record_bytes
        if len(data) != expected:
            raise FpganetError(f"the accelerator sent {len(data):,} bytes for {n_images} images; "
                               f"expected {expected:,} ({self.output_bytes} output bytes and "
                               f"{STAMP_BYTES} stamp bytes per image)")
        records = np.frombuffer(data, dtype=np.uint8).reshape(n_images, self.output_record_bytes)
        q = records[:, :self.output_bytes].view(np.int8).reshape(n_images, *self.output_shape)
        stamps = records[:, self.output_bytes:].copy().view("<u4").reshape(n_images)
        return q.copy(), stamps.astype(np.uint32)

    def describe(self):
        return {"input": {"shape": list(self.input_shape), "bytes_per_image": self.input_bytes,
                          "order": "int8, channel, row, byte (the NCHW bytes of one image)"},
                "output": {"shape": list(self.output_shape), "bytes_per_image": self.output_record_bytes,
                           "output_bytes": self.output_bytes, "stamp_bytes": STAMP_BYTES,
                           "order": "int8 outputs (NCHW flatten), then the cycle counter after the "
                                    "image, uint32 little-endian"}}


@dataclass
class MemoryImages:
    """Everything a run needs: memory contents for the host write port and the stream layout.

    Attributes
    ----------
    config : fpganet.config.AcceleratorConfig
    n_images : int
        Images the program processes (the host sends that many).
    program : numpy.ndarray
        uint64 instruction words (:mod:`fpganet.isa` encoding).
    weights : numpy.ndarray
        int8 ``[words, rows]``: word ``w`` byte ``i`` feeds array row ``i``.
    params : numpy.ndarray
        uint64 parameter entries (:func:`fpganet.isa.pack_param`).
    streams : StreamLayout
    layout : dict
        The manifest's ``accelerator`` section (maps, steps, instruction ranges, conflicts).
    plan : fpganet.codegen.plan.Plan or None
        None when read back from a directory.
    batch : int
        Images per pass of the program's loop (``--batch``; 1: one image per pass). The program
        processes ``ceil(n_images / batch)`` groups; :meth:`pack_inputs` pads the last group
        with zero images and :meth:`unpack_outputs` drops their outputs, so the streams a
        runner sees are those of ``n_images`` images whatever the batch.
    """

    config: AcceleratorConfig
    n_images: int
    prologue: np.ndarray
    body: np.ndarray
    loop_count_index: int
    weights: np.ndarray
    params: np.ndarray
    streams: StreamLayout
    layout: dict = field(default_factory=dict)
    plan: object = None
    batch: int = 1

    # Program --------------------------------------------------------------------------------

    @property
    def program(self):
        """uint64 instruction words for :attr:`n_images`."""
        return self.program_for(self.n_images)

    def groups(self, n_images):
        """Passes of the loop for ``n_images``: groups of :attr:`batch` images, the last padded."""
        return -(-n_images // self.batch)

    def padded_images(self, n_images):
        """Images the program actually processes for ``n_images`` (a multiple of the batch)."""
        return self.groups(n_images) * self.batch

    def program_for(self, n_images):
        """uint64 instruction words of the same program for ``n_images`` (only the LOOP_COUNT
        SET changes; 0 images: the prologue, then END). At batch B it runs ``ceil(n/B)``
        groups of B images."""
        # LOOP_COUNT holds groups - 1 in LOOP_COUNT_WIDTH bits.
        most = (1 << LOOP_COUNT_WIDTH) * self.batch
        if not 0 <= n_images <= most:
            raise FpganetError(f"one run takes 0..{most:,} images (the hardware's "
                               f"{LOOP_COUNT_WIDTH}-bit loop counter), not {n_images:,}")
        end = encode(Instruction(Opcode.END))
        if n_images == 0:
            return np.concatenate([self.prologue[:self.loop_count_index],
                                   np.array([end], np.uint64)]).astype(np.uint64)
        head = self.prologue.copy()
        head[self.loop_count_index] = encode(Instruction(Opcode.SET, Reg.LOOP_COUNT,
                                                         self.groups(n_images) - 1))
        tail = np.array([encode(Instruction(Opcode.LOOP, target=len(self.prologue))), end], np.uint64)
        return np.concatenate([head, self.body, tail]).astype(np.uint64)

    def for_images(self, n_images):
        """A copy whose program processes ``n_images`` (checked against the program memory)."""
        copy = MemoryImages(**{**self.__dict__, "n_images": n_images})
        copy.check_program_size()
        return copy

    def check_program_size(self):
        words = len(self.program)
        if words > self.config.program_words:
            flag = "--program-words" if self.batch == 1 else \
                f"--program-words, or a --batch below {self.batch}"
            raise capacity_error("program memory", words * 8, self.config.program_words * 8,
                                 self.config, flag, f"{words:,} instructions of 8 bytes",
                                 f"{self.config.program_words:,} instructions")

    # Host write port ------------------------------------------------------------------------

    @property
    def memories(self):
        """``{HostSpace: array}``: program (uint64), weights (int8 [words, rows]), params (uint64).

        Activations need no image: the program FILLs every border itself.
        """
        return {HostSpace.PROGRAM: self.program, HostSpace.WEIGHTS: self.weights,
                HostSpace.PARAMS: self.params}

    def words(self, space):
        """The words of one memory as Python ints, address 0 first (:func:`memory_words`;
        activations: none)."""
        return memory_words(space, self.memories.get(HostSpace(space)))

    def host_writes(self):
        """``(space, address, word)`` for every word to load, in :data:`LOAD_ORDER`
        (:func:`host_writes`)."""
        yield from host_writes(self.memories)

    def load(self, machine):
        """Copy the memories into a :class:`fpganet.isasim.Machine`, in :data:`LOAD_ORDER`
        (its program memory cleared first: no word of an older program is left behind)."""
        targets = machine_memories(machine)
        targets[HostSpace.PROGRAM][:] = 0
        memories = self.memories
        for space in LOAD_ORDER:
            if space in memories:
                targets[space][:len(memories[space])] = memories[space]

    # Streams ---------------------------------------------------------------------------------

    def pack_inputs(self, q_in):
        """int8 ``[N, C, H, W]`` -> the bytes of the input stream (N must be :attr:`n_images`)."""
        if len(q_in) != self.n_images:
            raise FpganetError(f"the program reads {self.n_images} images, {len(q_in)} given "
                               f"(use for_images({len(q_in)}))")
        padding = self.padded_images(len(q_in)) - len(q_in)
        if padding:
            # The last group is not full: zero images fill it (their outputs are dropped).
            q_in = np.asarray(q_in)
            q_in = np.concatenate([q_in, np.zeros((padding, *q_in.shape[1:]), q_in.dtype)])
        return self.streams.pack_inputs(q_in)

    def unpack_outputs(self, data, n_images=None):
        """The output stream -> ``(q int8 [N, *output_shape], stamps uint32 [N])`` (without the
        outputs of the images that pad the last group of a batched program)."""
        n_images = self.n_images if n_images is None else n_images
        q, stamps = self.streams.unpack_outputs(data, self.padded_images(n_images))
        return q[:n_images], stamps[:n_images]

    # Files -----------------------------------------------------------------------------------

    def save(self, directory):
        """Write ``program.hex``, ``weights.hex``, ``params.hex`` (``$readmemh``: one word per
        line, most significant digit first) and ``memories.npz`` into ``directory``; the
        last holds :func:`config_digest` of the configuration the images were built for."""
        directory = os.fspath(directory)
        for name, space, bits in (("program.hex", HostSpace.PROGRAM, INSTRUCTION_BITS),
                                  ("weights.hex", HostSpace.WEIGHTS, 8 * self.config.weight_word_bytes),
                                  ("params.hex", HostSpace.PARAMS, PARAM_BITS)):
            with open(os.path.join(directory, name), "w") as handle:
                handle.writelines(f"{word:0{bits // 4}x}\n" for word in self.words(space))
        with open(os.path.join(directory, "memories.npz"), "wb") as handle:
            np.savez(handle, program=self.program, prologue=self.prologue, body=self.body,
                     weights=self.weights, params=self.params,
                     config_digest=np.array(config_digest(self.config)))

    def describe(self):
        return self.layout


# Build -------------------------------------------------------------------------------------

def _beat_extra_cycles(addresses, valid, banks, passes=1):
    """Bank-conflict cycles of engine beats.

    Parameters
    ----------
    addresses : numpy.ndarray
        ``[TILES, K, LANES]`` activation addresses (:func:`fpganet.isasim.engine_read_addresses`).
    valid : numpy.ndarray
        ``[TILES, LANES]`` valid lanes.
    banks : int
        ``act_banks`` (or superbanks: :func:`fpganet.perf.superbank_pairs`).
    passes : int
        The reads of a beat are made this many times (pairs in two passes, one a channel).

    Returns
    -------
    extra : int
        Cycles beyond one per beat: a beat whose valid lanes put up to ``m`` addresses in one
        bank takes ``m`` cycles (lanes sharing a bank are read in successive cycles), ``m``
        cycles a pass.
    conflicted : int
        Beats that take more than one cycle.
    """
    tiles, k, lanes = addresses.shape
    if tiles == 0 or k == 0 or banks == 1 and lanes == 1 and passes == 1:
        return 0, 0
    mask = np.broadcast_to(valid[:, None, :], addresses.shape)
    beat = np.broadcast_to(np.arange(tiles * k).reshape(tiles, k, 1), addresses.shape)
    counts = np.bincount((beat[mask] * banks + addresses[mask] % banks), minlength=tiles * k * banks)
    worst = counts.reshape(tiles * k, banks).max(axis=1)
    worst = worst[worst > 0] * passes
    return int((worst - 1).sum()), int((worst > 1).sum())


def engine_conflicts(program, config):
    """Bank conflicts of every CONV/POOL of a program, measured from its words alone.

    Registers are followed through the program in order (LOOP not taken), and each engine
    instruction's read addresses come from :func:`fpganet.isasim.engine_read_addresses`
    (with ``config.pair_products`` two channels a beat: :func:`_beat_reads`).

    Returns
    -------
    list of dict
        ``{"pc", "opcode", "beats", "extra_cycles", "conflicted_beats"}`` per engine instruction;
        ``beats`` counts (group, tile, k) beats, ``extra_cycles`` the cycles beyond one per beat.
    """
    regs = {reg: 0 for reg in Reg}
    result = []
    for pc, word in enumerate(program):
        instruction = decode(int(word))
        if instruction.opcode is Opcode.SET:
            regs[instruction.reg] = instruction.value
        elif instruction.opcode in (Opcode.CONV, Opcode.POOL):
            k_c = regs[Reg.K_C] if instruction.opcode is Opcode.CONV else 1
            beats = extra = conflicted = 0
            groups = regs[Reg.GROUPS]
            same = regs[Reg.IN_GSTEP] % config.act_banks == 0
            for group in range(1 if same else groups):
                addresses, valid = engine_read_addresses({**regs, Reg.K_C: k_c}, group,
                                                         config.act_buffer_bytes)
                weight = groups if same else 1
                for beat_addresses, beat_valid, banks, passes in _beat_reads(addresses, valid, regs,
                                                                              k_c, config):
                    e, c = _beat_extra_cycles(beat_addresses, beat_valid, banks, passes)
                    extra, conflicted = extra + weight * e, conflicted + weight * c
                    beats += weight * int(valid.any(axis=1).sum()) * beat_addresses.shape[1]
            result.append({"pc": pc, "opcode": instruction.opcode.name, "beats": beats,
                           "extra_cycles": extra, "conflicted_beats": conflicted})
    return result


def _beat_reads(addresses, valid, regs, k_c, config):
    """The reads of an engine instruction's beats, as ``(addresses, valid, banks, passes)`` of
    :func:`_beat_extra_cycles`' arguments: each lane's byte, and in the beats that
    :func:`fpganet.perf.pair_beats` counts as reading two, its byte ``IN_CSTRIDE`` on (channel
    ``c + 1``; past an odd ``K_C``'s last channel, the byte there). With scheduled bank
    access a lane's two reads are one superbank's (:func:`fpganet.perf.superbank_pairs`),
    or the beat reads the first channels and then the second ones."""
    regs = {**regs, Reg.K_C: k_c}
    two, _ = pair_beats(regs, config)
    banks = config.act_banks
    if not two:
        return [(addresses, valid, banks, 1)]
    tiles, _, lanes = addresses.shape
    by_channel = addresses.reshape(tiles, k_c, -1, lanes)
    if config.bank_access == "scheduled":      # every beat reads two: costed by its first channel's
        first = by_channel[:, 0::2].reshape(tiles, -1, lanes)
        if superbank_pairs(regs, config):
            return [(first, valid, banks // 2, 1)]
        return [(first, valid, banks, 2)]
    if k_c % 2:
        past = (by_channel[:, -1:] + regs[Reg.IN_CSTRIDE]) % config.act_buffer_bytes
        by_channel = np.concatenate([by_channel, past], axis=1)
    pairs = np.concatenate([by_channel[:, 0::2], by_channel[:, 1::2]], axis=3).reshape(tiles, -1, 2 * lanes)
    reads = [(pairs[:, :two], np.concatenate([valid, valid], axis=1), banks, 1)]
    if two < pairs.shape[1]:        # the last channel alone
        reads.append((by_channel[:, -2], valid, banks, 1))
    return reads


def build_images(net, n_images=1, config=None, batch=1, dump=None):
    """Plan, generate and lay out ``net`` for ``config`` (default ``net.config``): the passes
    of :data:`fpganet.codegen.passes.PLAN_PASSES`, then ``emit``.

    Parameters
    ----------
    net : fpganet.qnet.QNetwork
    n_images : int
        Images the program processes in its loop (the host sends that many).
    config : fpganet.config.AcceleratorConfig, optional
    batch : int
        1..cols: the dense layers at the end of the network run once per group of ``batch``
        images, one array column per image (docs/reference/compiler.md, "Batching").
    dump : text stream, optional
        Gets the intermediate form after each pass (``fpganet compile --dump-ir``).

    Returns
    -------
    MemoryImages

    Raises
    ------
    fpganet.errors.FpganetError
        The network does not fit a buffer or the program memory, or a layer cannot run.
    """
    config = config or net.config
    plan = plan_network(net, config, batch=batch, dump=dump)
    emission = emit(plan)
    dump_section(dump, EMIT_PASS, format_emission(emission, plan))
    code = emission.program
    prologue = np.array([encode(i) for i in code.prologue], dtype=np.uint64)
    body = np.array([encode(i) for i in code.body], dtype=np.uint64)
    streams = StreamLayout(tuple(net.input_chw), tuple(net.output_shape))
    images = MemoryImages(config, n_images, prologue, body, code.loop_count_index,
                          emission.weights, emission.params, streams, plan=plan,
                          batch=batch)
    images.check_program_size()
    images.layout = _plain(_describe(plan, code, images))
    return images


def _plain(value):
    """JSON-able copy: numpy scalars to Python numbers, tuples to lists."""
    if isinstance(value, dict):
        return {str(key): _plain(item) for key, item in value.items()}
    if isinstance(value, (list, tuple)):
        return [_plain(item) for item in value]
    if isinstance(value, np.integer):
        return int(value)
    if isinstance(value, np.floating):
        return float(value)
    return value


def _describe(plan, code, images):
    config = plan.config
    conflicts = {entry["pc"]: entry for entry in engine_conflicts(images.program_for(1), config)}
    steps_by_layer = {}
    for step in plan.steps:
        steps_by_layer.setdefault(step.layer_index, []).append(step)
    layers = []
    for index, layer in enumerate(plan.net.layers):
        entry = {"index": index, "name": layer.name, "type": layer.type}
        if layer.type == "reshape":
            how = plan.reshape_steps.get(index, "free")
            entry["cost"] = "free (the stored map is read in place)" if how == "free" else \
                f"copy (POOL 1x1, instruction {code.layer_ranges[how.number][1] - 1})"
        for step in steps_by_layer.get(index, []):
            first, end = code.layer_ranges[step.number]
            # The step's CONV/POOL: the last engine instruction of its range (a FILL may follow).
            measured = next((conflicts[pc] for pc in range(end - 1, first - 1, -1) if pc in conflicts),
                            {})
            entry.setdefault("steps", []).append({
                "kind": step.kind, "instructions": [first, end],
                "lanes": step.lanes, "tiles": step.tiles, "groups": step.groups(config.rows),
                "k": step.k, "weight_words": [step.w_base, step.w_base + step.weight_words(config)],
                "param_entries": [step.p_base, step.p_base + step.param_entries(config.rows)],
                "src": step.src.describe(), "dst": step.dst.name,
                "read_beats": measured.get("beats"),
                "read_conflict_cycles": measured.get("extra_cycles"),
                "conflict_free": measured.get("extra_cycles") == 0,
                "pitch_candidates": {str(p): cost for p, cost in step.src.pitch_costs.items()}
                or None, **({"packed": True} if step.packed else {}),
                **({"binary": True} if step.binary else {})})
        layers.append(entry)
    program = images.program
    batch = {} if images.batch == 1 else {  # only batched manifests say so
        "batch": images.batch,
        "batching": {"images_per_group": images.batch,
                     "dense_layers": [step.layer.name for step in plan.group_steps],
                     "slot": plan.slot_map.name, "slot_image_stride": plan.slot_map.copy_stride,
                     "streams": "per image as at batch 1; the last group is padded with zero "
                                "images whose outputs the host drops"}}
    return {
        "format": FORMAT,
        "n_images": images.n_images,
        **batch,
        "program": {"file": "program.hex", "ranges": "instruction ranges are [first, end)",
                    "words": int(len(program)),
                    "capacity": config.program_words, "prologue_words": int(len(images.prologue)),
                    "loop_count_instruction": code.loop_count_index,
                    "input_instructions": list(code.layer_ranges[0]),
                    "output_instructions": list(code.layer_ranges[len(plan.steps) + 1])},
        "activations": {"bytes": plan.act_bytes, "capacity": config.act_buffer_bytes,
                        "banks": config.act_banks, "allocation": plan.allocation,
                        "pitches": plan.pitches, "attempts": plan.attempts,
                        "maps": [m.describe() for m in plan.maps]},
        "weights": {"file": "weights.hex", "words": plan.weight_words, "bytes": plan.weight_bytes,
                    "capacity_bytes": config.weight_buffer_words * config.weight_word_bytes,
                    "word_bytes": config.weight_word_bytes},
        "params": {"file": "params.hex", "entries": plan.param_entries, "bytes": plan.param_bytes,
                   "capacity_entries": config.bias_buffer_words},
        "streams": images.streams.describe(),
        "layers": layers,
    }


class NoProgramError(FpganetError):
    """A compiled directory written with ``--no-program``: a network, no memory images."""


def read_images(directory):
    """The :class:`MemoryImages` a compiled directory holds (``plan`` is None).

    The manifest and ``memories.npz`` must be listed in, and match, the directory's
    ``SHA256SUMS`` (:func:`fpganet.files.verify_directory`), and the images must be the
    manifest's configuration's (:func:`_images_mismatch`).

    Raises
    ------
    fpganet.errors.FpganetError
        The directory was compiled without a program (``--no-program``) or is damaged.
    """
    directory = os.fspath(directory)
    manifest_path = os.path.join(directory, MANIFEST)
    digests = verify_directory(directory, needed=(MANIFEST,))
    try:
        with open(manifest_path) as handle:
            manifest = json.load(handle)
    except (OSError, ValueError) as error:
        raise FpganetError(f"cannot read '{manifest_path}': {error}") from None
    section = manifest.get("accelerator") if isinstance(manifest, dict) else None
    if not isinstance(section, dict) or section.get("format") != FORMAT:
        raise NoProgramError(f"'{directory}' holds no accelerator program (compiled with "
                             f"--no-program, or by an older fpganet): compile it again")
    require_listed(directory, digests, (MEMORIES,))
    try:
        with np.load(os.path.join(directory, MEMORIES), allow_pickle=False) as data:
            arrays = {key: data[key] for key in data.files}
        if "config_digest" not in arrays:
            raise FpganetError(f"the accelerator images in '{directory}' record no digest of "
                               f"their configuration: an older fpganet compiled it; compile it "
                               f"again")
        config = AcceleratorConfig.from_dict(manifest["config"])
        mismatch = _images_mismatch(arrays, section, config)
        streams = StreamLayout(tuple(section["streams"]["input"]["shape"]),
                               tuple(section["streams"]["output"]["shape"]))
        images = None if mismatch else MemoryImages(
            config, int(section["n_images"]), arrays["prologue"].astype(np.uint64),
            arrays["body"].astype(np.uint64), int(section["program"]["loop_count_instruction"]),
            arrays["weights"].astype(np.int8), arrays["params"].astype(np.uint64), streams,
            layout=section, batch=int(section.get("batch", 1)))
    except FpganetError:
        raise
    except Exception as error:
        raise FpganetError(f"cannot read the accelerator images in '{directory}': "
                           f"{type(error).__name__}: {error}") from None
    if mismatch:
        raise FpganetError(f"the accelerator images in '{directory}' are not its manifest's "
                           f"configuration's: {mismatch} (was the manifest edited?); compile it "
                           f"again")
    return images


#: Configuration fields added after compiled folders recorded :func:`config_digest`, left out of
#: it at their defaults, so that those folders still load.
DIGEST_LATER_FIELDS = {"binary_weights": False, "ternary_pairs": False}


def config_digest(config):
    """SHA-256 of every parameter of ``config`` (but :data:`DIGEST_LATER_FIELDS` at their
    defaults): the images record it, so that a manifest whose configuration was edited, in a
    field the images' shapes do not show (``requant_mode``, ``pipeline_registers``, ...), and
    signed again is refused. It guards against mistakes, not tampering: whoever re-signs the
    folder can recompute it."""
    fields = {name: value for name, value in dataclasses.asdict(config).items()
              if DIGEST_LATER_FIELDS.get(name, object()) != value}
    return hashlib.sha256(json.dumps(fields, sort_keys=True).encode()).hexdigest()


def _images_mismatch(arrays, section, config):
    """Why the images are not ``config``'s, or None: the capacities, word width, banks and
    array columns the manifest's ``accelerator`` section recorded when they were built, and
    the arrays' shapes, against those ``config`` gives (an edited ``rows`` changes the weight
    word, ``cols`` the banks or the columns), then every other field through
    :func:`config_digest`."""
    recorded = {"bytes per weight word": (section["weights"]["word_bytes"],
                                          config.weight_word_bytes),
                "weight buffer bytes": (section["weights"]["capacity_bytes"],
                                        config.weight_buffer_words * config.weight_word_bytes),
                "parameter entries": (section["params"]["capacity_entries"], config.bias_buffer_words),
                "instruction words": (section["program"]["capacity"], config.program_words),
                "activation buffer bytes": (section["activations"]["capacity"],
                                            config.act_buffer_bytes),
                "activation banks": (section["activations"]["banks"], config.act_banks)}
    for what, (built, given) in recorded.items():
        if built != given:
            return f"they were built for {built:,} {what}, the configuration has {given:,}"
    lanes = max((step["lanes"] for layer in section["layers"] for step in layer.get("steps", [])),
                default=0)
    if lanes > config.cols:
        return f"they use {lanes} array columns, the configuration has {config.cols}"
    shapes = {"weights": (int(section["weights"]["words"]), config.weight_word_bytes),
              "params": (int(section["params"]["entries"]),),
              "prologue": (int(section["program"]["prologue_words"]),)}
    for name, shape in shapes.items():
        if arrays[name].shape != shape:
            return f"'{name}' has shape {list(arrays[name].shape)}, the manifest says {list(shape)}"
    words = {HostSpace.WEIGHTS: len(arrays["weights"]), HostSpace.PARAMS: len(arrays["params"]),
             HostSpace.PROGRAM: len(arrays["prologue"]) + len(arrays["body"])}
    for space, count in words.items():
        if count > host_memory_words(space, config):
            return (f"the {space.name.lower()} image of {count:,} words exceeds the "
                    f"{host_memory_words(space, config):,} of its memory")
    if str(arrays["config_digest"]) != config_digest(config):
        return "they were built for a configuration other than the manifest's"
    return None
