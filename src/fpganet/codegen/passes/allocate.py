"""Pass ``allocate``: the base address of every stored map in the activation buffer.

Disjoint if everything fits, else by liveness (a map's bytes are reused once it is dead),
and whether a map's border is filled once before the image loop or again every image. The
first layout of :data:`ATTEMPTS` that fits is taken.
"""

from .pitches import choose_pitches

__all__ = ["allocate", "ATTEMPTS", "PLACEMENT_ORDERS"]

#: Layouts tried in order until one fits the activation buffer: (search pitches, allocation).
ATTEMPTS = ((True, "disjoint"), (True, "pinned-borders"), (True, "liveness"),
            (False, "disjoint"), (False, "pinned-borders"), (False, "liveness"))

#: Orders in which the first fit places maps; the one that needs the fewest bytes wins (ties:
#: the first). Largest first packs chains well; in production order, maps of a residual network
#: that live side by side stack the way they are born.
PLACEMENT_ORDERS = {
    "largest first": lambda m: (-m.span, m.producer),
    "production order": lambda m: (m.producer, -m.span),
    "longest lived first": lambda m: (m.producer - m.last_use, -m.span, m.producer),
}


def _first_fit(maps, interval, order):
    placed = []
    for m in sorted(maps, key=order):
        start, stop = interval(m)
        busy = sorted((p.base, p.base + p.span) for p in placed
                      if interval(p)[0] <= stop and start <= interval(p)[1])
        offset = 0
        for lo, hi in busy:
            if offset + m.span <= lo:
                break
            offset = max(offset, hi)
        m.base = offset
        placed.append(m)
    return max((m.base + m.span for m in maps), default=0)


def _host(m):
    """The map whose bytes ``m`` occupies: itself, or what it was written over in place."""
    while m.in_place_of is not None:
        m = m.in_place_of
    return m


def _allocate(maps, mode):
    """Base addresses by first fit in the best of :data:`PLACEMENT_ORDERS`; returns the bytes
    used. ``mode``: disjoint, pinned-borders, liveness. A map written in place takes its
    host's bytes, which stay busy until the last of them dies."""
    end = max(m.last_use for m in maps) + 1
    last_use = {}
    for m in maps:
        host = _host(m)
        last_use[id(host)] = max(last_use.get(id(host), 0), m.last_use)
    hosts = [m for m in maps if m.in_place_of is None]

    def interval(m):
        if mode == "disjoint" or (mode == "pinned-borders" and m.padded):
            return (-1, end)
        if m.copies > 1 and not m.interleaved:
            # The batch slot: image j's copy must survive the next images' layers, from INPUT on.
            return (0, m.last_use)
        return (m.producer, last_use[id(m)])

    used = {name: _first_fit(hosts, interval, order) for name, order in PLACEMENT_ORDERS.items()}
    best = min(used, key=used.get)
    if best != list(used)[-1]:
        _first_fit(hosts, interval, PLACEMENT_ORDERS[best])
    for m in maps:
        m.base = _host(m).base
    for m in maps:
        m.fill_per_image = m.padded and any(
            other is not m and other.base < m.base + m.span and m.base < other.base + other.span
            for other in maps)
    return used[best]



def _pitches_name(search):
    return "searched" if search else "compact"


def allocate(plan):
    """Reads the maps' spans (pitches from ``pitches``) and liveness; writes every map's
    ``base`` and ``fill_per_image``, ``plan.allocation``, ``plan.pitches`` and ``plan.act_bytes``
    (the first of :data:`ATTEMPTS` that fits; none: ``allocation`` stays empty),
    ``plan.attempts`` (bytes each layout tried needs; with ``plan.explore`` all of them) and
    ``plan.act_needed`` (the fewest); then a view's base (its parent's) and a batched step's
    stride (the slot's image stride). Falls back to compact pitches (``choose_pitches``) when
    no allocation of the searched ones fits."""
    config, maps = plan.config, plan.maps
    searched = True             # the pitches pass searched
    for search, mode in ATTEMPTS:
        if search != searched:
            choose_pitches(plan, search)
            searched = search
        used = _allocate(maps, mode)
        plan.attempts.append({"pitches": _pitches_name(search), "allocation": mode, "bytes": used})
        plan.act_needed = used if plan.act_needed is None else min(plan.act_needed, used)
        if used <= config.act_buffer_bytes and not plan.allocation:
            plan.allocation, plan.pitches, plan.act_bytes = mode, _pitches_name(search), used
            if not plan.explore:
                break
    if plan.explore and plan.allocation:
        search, mode = next(a for a in ATTEMPTS if a[1] == plan.allocation and
                            _pitches_name(a[0]) == plan.pitches)
        choose_pitches(plan, search)
        _allocate(maps, mode)
    for step in plan.steps:
        if step.src.parent is not None:
            step.src.base = step.src.parent.base
        if step.batched:
            step.stride = (1, step.src.storage.copy_stride)
