"""Pass ``pitches``: each stored map's pitch and channel stride, for the fewest bank conflicts.

Costs are the cycle model's (:func:`fpganet.perf.gather_cycles`): the conflict cycles of the
map's readers' reads and its producer's writes.
"""

from ...isa import Reg
from ...perf import engine_beats, gather_cycles, pair_beats
from ..ir import write_extra_cycles

__all__ = ["search_pitches", "choose_pitches"]


def _read_cost(step, pitch, config, cstride):
    """Bank-conflict cycles of ``step``'s reads from a source map of ``pitch`` and channel
    stride ``cstride`` (all groups): the cycle model's gather cycles beyond one a beat."""
    if step.batched or step.kind == "add":
        # A batched dense layer's lanes are images: they differ by the image stride, not the
        # pitch; an add's lanes read consecutive bytes.
        return 0
    regs = step.read_regs(pitch, cstride=cstride)
    tiles = gather_cycles(regs, config)
    return (int(tiles.sum() - tiles.size * engine_beats(regs, config)) * step.groups(config.rows)
            * step.passes(config.rows))


def _reads_channel_pairs(step, config):
    """``step``'s beats read two channels a lane (:func:`fpganet.perf.pair_beats`), so its
    source's channel stride moves the second read's banks."""
    if step.batched or step.kind == "add":
        return False
    return pair_beats(step.read_regs(1), config)[0] > 0


def _write_cost(step, pitch, config):
    """Bank-conflict cycles of ``step``'s result writes into a destination map of ``pitch``."""
    if step.kind == "add":
        return 0                     # consecutive bytes
    per_row = write_extra_cycles(step.out_hw[1], step.npix, step.lanes, pitch, config.act_banks,
                                 config.requant_lanes)
    return per_row * step.dst.shape[0]


def choose_pitches(plan, search):
    """Reads the maps' geometry, roles, ties and readers; writes each map's ``pitch``,
    ``cstride``, ``pitch_costs`` and, for a batch slot, ``copy_stride``; an add step's flat walk
    (``out_hw``, ``lanes``).

    Pitch of every stored map: its direct readers' reads plus the producer's writes, fewest
    conflict cycles, then the smallest pitch; ``search=False``: the smallest pitch. Maps an add
    ties together get one pitch, chosen for all of them. With ``config.pair_products`` and a
    reader whose beats read two channels, the channel stride too: packed, or up to
    ``act_banks - 1`` bytes more (the same for the tied maps); fewest conflict cycles, then the
    smallest pitch, then the smallest channel stride. A compact map (read by dense layers only)
    keeps its pitch and gets the channel stride search alone."""
    steps, maps, config = plan.steps, plan.maps, plan.config
    readers, producers = {}, {id(step.dst): step for step in steps}
    for step in steps:
        for source in step.sources:
            readers.setdefault(id(source), []).append(step)
    done = set()
    for stored in maps:
        if id(stored) in done:
            continue
        group = stored.tie or [stored]
        done.update(id(member) for member in group)
        smallest = max(member.padded_w for member in group)
        for member in group:
            member.pitch_costs = {}
        costed = [member for member in group if member.role in ("conv", "pool")
                  and readers.get(id(member))]
        pair_read = any(_reads_channel_pairs(step, config)
                        for member in group for step in readers.get(id(member), []))
        # A pooled conv writes channel c's bytes at rows 2c + 1 of a half channel stride.
        even = any(id(member) in producers and producers[id(member)].pooled for member in group)

        def odd_cstrides(pitch, slack):
            return even and any((member.packed_cstride(pitch) + slack) % 2 for member in group)

        if not search or not (costed or pair_read) or any(member.viewed for member in group):
            for member in group:
                member.set_pitch(smallest, int(odd_cstrides(smallest, 0)))
            continue
        best = None
        slacks = range(config.act_banks if pair_read else 2 if even else 1)
        # A compact map (a dense layer's input) keeps its pitch; its channel stride may move.
        pitches = range(smallest, smallest + (config.act_banks if costed else 1))
        for pitch in pitches:
            writes = sum(_write_cost(producers[id(member)], pitch, config) for member in group
                         if id(member) in producers)
            at_pitch = None
            for slack in slacks:
                if odd_cstrides(pitch, slack):
                    continue
                cost = writes + sum(_read_cost(step, pitch, config, member.packed_cstride(pitch) + slack)
                                    for member in group for step in readers.get(id(member), []))
                if at_pitch is None or cost < at_pitch[0]:
                    at_pitch = (cost, pitch, slack)
                if cost == 0:
                    break
            for member in costed:
                member.pitch_costs[pitch] = at_pitch[0]
            if best is None or at_pitch[0] < best[0]:
                best = at_pitch
            if best[0] == 0:
                break
        for member in group:
            member.set_pitch(best[1], best[2])
    for step in steps:
        if step.kind == "add":
            # The flat walk: rows pt .. pt+H-1 of the padded maps, all pitch bytes of each but
            # the last, whose walk ends at the right border.
            dst = step.dst
            step.out_hw = (1, (dst.shape[1] - 1) * dst.pitch + dst.padded_w)
            step.lanes = max(1, min(config.cols, step.npix))
    for stored in maps:
        if stored.interleaved:
            # Image j's channel c at origin + c*B + j: a batched dense layer writes, and the next
            # one reads, B consecutive bytes, which fall in B different banks (B <= act_banks).
            stored.cstride, stored.copy_stride = stored.copies, 1
        elif stored.copies > 1:
            reader = next(step for step in steps if step.batched and step.src.storage is stored)
            stored.copy_stride = _image_stride(stored, reader, config, search)


def _image_stride(slot, reader, config, search):
    """Bytes between the images' copies of ``slot``, which the batched dense layer ``reader``
    reads with lane j at ``j*stride``: from the copy's span up, the first stride that puts the
    lanes' reads in different banks (with pair products each lane reads two channels, and the
    slot's channel stride may move too: up to ``act_banks - 1`` bytes more), else the one with
    the fewest conflict cycles, as the cycle model counts them; ``search=False``: the span."""
    if not search:
        return slot.image_span
    banks, pitch = config.act_banks, slot.pitch
    regs = reader.read_regs(pitch, cstride=slot.cstride)
    slacks = range(banks) if pair_beats(regs, config)[0] else range(1)
    best = None
    for slack in slacks:
        slot.set_pitch(pitch, slack)
        span = slot.image_span
        for stride in range(span, span + banks):
            regs.update({Reg.IN_CSTRIDE: slot.cstride, Reg.STRIDE_X: stride})
            cost = int(gather_cycles(regs, config).sum() - engine_beats(regs, config))
            if best is None or cost < best[0]:
                best = (cost, slack, stride)
            if cost == 0:
                break
        if best[0] == 0:
            break
    slot.set_pitch(pitch, best[1])
    return best[2]



def search_pitches(plan):
    """Reads the maps' geometry, roles, ties and readers; writes each map's ``pitch``,
    ``cstride``, ``pitch_costs`` and ``copy_stride``, and an add step's flat walk:
    :func:`choose_pitches` with the search (the allocation falls back to compact pitches when
    no allocation of these fits)."""
    choose_pitches(plan, search=True)
