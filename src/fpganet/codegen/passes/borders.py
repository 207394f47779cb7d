"""Pass ``borders``: the padding and border value of every stored map."""

from ...errors import FpganetError

__all__ = ["settle_borders"]


def settle_borders(plan):
    """Reads each map's readers' demands (``pads``, ``fill_demands``, ``tie``, ``viewed``);
    writes ``pads`` (an add's tied maps take the largest of the group: the flat walk needs one
    geometry) and ``fill`` (what the padded readers ask for: a conv's zero point, a max-pool's
    -128, or the zero point when only the tie pads it; None when unpadded). Refuses a map that
    two readers want in different layouts or with different borders."""
    maps = plan.maps
    for m in maps:
        if m.tie:
            m.pads = tuple(max(member.pads[i] for member in m.tie) for i in range(4))
    for m in maps:
        if m.viewed and m.padded:
            raise FpganetError(f"map '{m.name}' is read through a reshape and by a padded layer "
                               f"(or an add), which need different layouts; the accelerator "
                               f"stores one layout per map")
        if not m.padded:
            m.fill = None
            continue
        if len(m.fill_demands) > 1:
            raise FpganetError(f"map '{m.name}' is read by a padded max-pool and a padded conv, "
                               f"whose borders differ (-128 and the zero point {m.zero_point}); "
                               f"the accelerator stores one border per map")
        m.fill = next(iter(m.fill_demands), m.zero_point)
