"""A figure with its unit and where it comes from.

Every number the estimator reports is a :class:`Quantity`: a value, a unit, a
*source* saying what kind of number it is, and a *basis* saying what it rests
on (a citation, a measurement, a formula). Estimates carry a ``low``/``high``
range instead of false precision; the ``value`` is then the midpoint, or
whatever the basis says.

Sources:

``measured``
    measured on real hardware (this machine, or a cited bench measurement);
``simulated``
    from the project's own simulation: the cycle-exact performance model
    (``fpganet.perf``), or toggle counts of the RTL (``fpganet.sim.activity``);
``published``
    copied from a cited publication or datasheet;
``estimated``
    computed here from other figures, by the formula the basis states;
``not available``
    no figure (the basis says why): the value is ``None``.
"""

from dataclasses import dataclass, field

__all__ = ["Quantity", "SOURCES", "quantity_dict", "ratio", "product", "missing"]

SOURCES = ("measured", "simulated", "published", "estimated", "not available")


@dataclass(frozen=True)
class Quantity:
    """A value with unit, source and basis.

    Attributes
    ----------
    value : float, int, str or None
        The figure. Strings for named outcomes (a bottleneck); None when not available.
    unit : str or None
        SI-style unit (``"images/s"``, ``"W"``, ``"s"``, ``"J"``, ``"cycles"``, ``"mm^2"``).
    source : str
        One of :data:`SOURCES`.
    basis : str
        What the figure rests on: citation, measurement conditions or formula.
    low, high : float or None
        Range of an estimate (both or neither).
    unverified : bool
        The figure, or one it rests on, is marked "unverified" in the reference
        material (docs/guide/estimator.md lists them).
    extra : dict
        Further figures of the same measurement, reported beside it (:meth:`to_dict`); a key
        that starts with ``_`` is for the code that made it and stays out of reports.
    """

    value: object
    unit: object
    source: str
    basis: str
    low: object = None
    high: object = None
    unverified: bool = False
    extra: dict = field(default_factory=dict, compare=False)

    def __post_init__(self):
        if self.source not in SOURCES:
            raise ValueError(f"unknown source {self.source!r}; expected one of {SOURCES}")
        if (self.low is None) != (self.high is None):
            raise ValueError("give both low and high, or neither")

    @property
    def has_range(self):
        return self.low is not None

    def to_dict(self):
        """Plain JSON-able data: value, unit, source, basis (and low, high, unverified when set)."""
        data = {"value": _plain(self.value), "unit": self.unit, "source": self.source,
                "basis": self.basis}
        if self.has_range:
            data["low"] = _plain(self.low)
            data["high"] = _plain(self.high)
        if self.unverified:
            data["unverified"] = True
        for key, value in self.extra.items():
            if not key.startswith("_"):         # "_key": for the code that made it, not reports
                data[key] = _plain(value)
        return data

    def scaled(self, factor, unit=None, basis=None):
        """This quantity times a constant (unit and basis optionally replaced)."""
        def mul(v):
            return None if v is None else v * factor
        return Quantity(mul(self.value), unit or self.unit, self.source, basis or self.basis,
                        mul(self.low), mul(self.high), self.unverified)


def _plain(value):
    """Python scalars for JSON (numpy scalars become int/float)."""
    if value is None or isinstance(value, (str, bool)):
        return value
    if isinstance(value, dict):
        return {k: _plain(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_plain(v) for v in value]
    if hasattr(value, "item"):
        value = value.item()
    if isinstance(value, float) and value.is_integer() and abs(value) < 2 ** 53:
        return value
    return value


def quantity_dict(mapping):
    """Recursively turn Quantities inside dicts and lists into their ``to_dict()`` form."""
    if isinstance(mapping, Quantity):
        return mapping.to_dict()
    if isinstance(mapping, dict):
        return {key: quantity_dict(value) for key, value in mapping.items()}
    if isinstance(mapping, (list, tuple)):
        return [quantity_dict(value) for value in mapping]
    return _plain(mapping)


def missing(unit, basis):
    """A figure that is not available (value None), with the reason as its basis."""
    return Quantity(None, unit, "not available", basis)


def _bounds(q):
    if q.value is None:
        return None, None, None
    if q.has_range:
        return q.value, q.low, q.high
    return q.value, q.value, q.value


def ratio(numerator, denominator, unit, basis):
    """``numerator / denominator`` as an estimate; ranges combine worst case (low/high, high/low)."""
    n, n_lo, n_hi = _bounds(numerator)
    d, d_lo, d_hi = _bounds(denominator)
    if n is None or d is None or not d or not d_lo or not d_hi:
        return missing(unit, f"not available: {basis} (an input is missing)")
    ranged = numerator.has_range or denominator.has_range
    return Quantity(n / d, unit, "estimated", basis,
                    n_lo / d_hi if ranged else None, n_hi / d_lo if ranged else None,
                    numerator.unverified or denominator.unverified)


def product(a, b, unit, basis):
    """``a * b`` as an estimate; ranges combine (low*low, high*high) for positive figures."""
    x, x_lo, x_hi = _bounds(a)
    y, y_lo, y_hi = _bounds(b)
    if x is None or y is None:
        return missing(unit, f"not available: {basis} (an input is missing)")
    ranged = a.has_range or b.has_range
    return Quantity(x * y, unit, "estimated", basis, x_lo * y_lo if ranged else None,
                    x_hi * y_hi if ranged else None, a.unverified or b.unverified)
