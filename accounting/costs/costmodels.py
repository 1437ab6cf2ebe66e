"""Money cost models of jobs: the description format of the PeCoH report (DESIGN section 6).

Pure: no Django, no settings, no ORM. The report is "Modelling HPC Usage Costs", PeCoH
deliverable D3.1 & D3.3 (Huebbe, 2018); chapters are cited as "ch." below.

The format (ch. 4), one command per line:

* ``#`` starts a comment that runs to the end of the line; runs of whitespace are one space;
  empty lines and leading whitespace are ignored.
* ``currency NAME`` -- at most once; the default is ``dollar``. Output only, never converted.
* ``nodes NAME HOSTLIST...`` -- a node set, in Slurm hostlist syntax, over one or more
  arguments (``m[1-3] mg[1,4]``).
* ``rate NAME VALUE MULT/TIME`` -- a cost per node and TIME of the node set declared last
  ("all the following rates will be relative to this node set until the next nodes command").
* ``energy-rate NAME VALUE MULT/kWh`` -- a cost per kWh of the job's recorded energy, for the
  node set declared last.
* ``nodes-are exclusive|shared`` -- at most once; the default is ``exclusive``. Not in the
  report, whose models were written for DKRZ's exclusive nodes (see below).

MULT is one of ``M k 1 c m`` (10^6, 10^3, 1, 10^-2, 10^-3); TIME one of ``a mon w d h min s``.

Decisions (the report leaves them open):

* A year ``a`` is 365 days (8760 h), as in the report's own tool, job-cost-meter.sh;
  ``mon`` is a/12 (the report converts with "a / 12 mon", ch. 3.5), ``w`` is 7 days.
  Table 3.1 comes out the same with 365.25 days; the test pins 365.
* Node sets may overlap: a node pays the rates of every set it is in (ch. 3.3, "these six node
  groups are not all mutually exclusive"). A node listed twice in one set is an error.
* Nodes of a job that are in no node set cost nothing and are listed as unknown nodes.
* An energy rate prices the share of the job's energy that its nodes in the set used, pro rata
  by node count (Slurm records one total per job). A job without an energy record (None, or
  the 0 J Slurm writes when no energy plugin runs) gets no energy cost (ch. 4), and
  :attr:`JobCost.missing_data` says that a rate could not be priced.
* Rates are costs: a negative value is an error.
* Node sharing. ``exclusive`` (the report's case): a job pays its nodes whole, as Table 3.1
  and Listing 5 do. ``shared``: a time rate costs ``rate * nodes * share * runtime``, where
  ``share`` is the job's share of each of its nodes, the max fraction of cores, GPUs and
  memory of eq 1 (:func:`accounting.clusters.charging.node_share_even`); a job that holds its
  nodes whole has share 1. So the jobs on a node never pay more than the node's time rates
  while they fit on it. Energy rates price the job's own energy either way.

Money is ``Decimal`` throughout. Rates are kept exact (value x multiplier over seconds or joules
per unit) and each cost is one division at the context's 28 significant digits; outputs round
only for display.
"""

from __future__ import annotations

import bisect
import json
import re
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from decimal import ROUND_HALF_UP, Decimal
from fractions import Fraction
from functools import cached_property
from pathlib import Path
from typing import Any, Final, Literal

import hostlist

from kit.errors import ApplicationError

DEFAULT_CURRENCY: Final = "dollar"

MULTIPLIERS: Final[Mapping[str, Decimal]] = {
    "M": Decimal(1_000_000),
    "k": Decimal(1000),
    "1": Decimal(1),
    "c": Decimal("0.01"),
    "m": Decimal("0.001"),
}

SECONDS_PER_DAY: Final = 86_400
SECONDS_PER_YEAR: Final = 365 * SECONDS_PER_DAY
TIME_UNITS_SECONDS: Final[Mapping[str, int]] = {
    "a": SECONDS_PER_YEAR,
    "mon": SECONDS_PER_YEAR // 12,  # ch. 3.5 converts with a / 12 mon
    "w": 7 * SECONDS_PER_DAY,
    "d": SECONDS_PER_DAY,
    "h": 3600,
    "min": 60,
    "s": 1,
}
ENERGY_UNIT: Final = "kWh"
JOULES_PER_KWH: Final = 3_600_000
SECONDS_PER_HOUR: Final = 3600

DISPLAY_QUANTUM: Final = Decimal("0.01")
"""Costs are shown to the cent (Listing 5); they are computed and kept exact."""

JSON_QUANTUM: Final = Decimal("0.000001")
"""Machine-readable costs keep 6 places, like the ledger's SU."""

RateKind = Literal["time", "energy"]
NodeSharing = Literal["exclusive", "shared"]
NODE_SHARING: Final[tuple[NodeSharing, ...]] = ("exclusive", "shared")
DEFAULT_NODE_SHARING: Final[NodeSharing] = "exclusive"
WHOLE_NODE: Final = Fraction(1)

_NUMBER = re.compile(r"[+-]?(?:\d+(?:\.\d*)?|\.\d+)(?:[eE][+-]?\d+)?", re.ASCII)
_MAX_MAGNITUDE: Final = 30  # decimal exponent bound: keeps every product inside 28 digits' range


class CostModelError(ApplicationError):
    """A cost model that cannot be read; ``str()`` is ``source:line: message``."""

    def __init__(self, message: str, *, source: str, line_number: int | None) -> None:
        self.message = message
        self.source = source
        self.line_number = line_number
        where = f"{source}:{line_number}" if line_number is not None else source
        super().__init__(f"{where}: {message}")


class NodelistError(ApplicationError):
    """Text that is not a Slurm hostlist."""


@dataclass(frozen=True)
class Rate:
    """One ``rate`` or ``energy-rate`` line, as written and as an exact ratio."""

    name: str
    kind: RateKind
    value: Decimal
    multiplier: str
    unit: str  # a time unit, or "kWh"
    line_number: int

    @property
    def amount(self) -> Decimal:
        """``value * multiplier``, exactly: currency per node and ``per`` seconds (or joules)."""
        return self.value * MULTIPLIERS[self.multiplier]

    @property
    def per(self) -> int:
        """Seconds in the time unit, or joules in a kWh."""
        return JOULES_PER_KWH if self.kind == "energy" else TIME_UNITS_SECONDS[self.unit]

    @property
    def exact_unit_cost(self) -> Fraction:
        """Currency per node-second (time rates) or per joule (energy rates), exactly."""
        return Fraction(self.amount) / self.per

    @property
    def unit_text(self) -> str:
        return f"{self.multiplier}/{self.unit}"


@dataclass(frozen=True)
class NodeSet:
    """A named set of nodes and the rates declared after it (ch. 4)."""

    name: str
    nodes: frozenset[str]
    hostlists: tuple[str, ...]
    rates: tuple[Rate, ...]
    line_number: int

    @property
    def node_count(self) -> int:
        return len(self.nodes)

    @property
    def time_unit_cost(self) -> Fraction:
        """Currency per node-second of all time rates of this set, exactly."""
        return sum((r.exact_unit_cost for r in self.rates if r.kind == "time"), Fraction(0))

    @property
    def energy_unit_cost(self) -> Fraction:
        """Currency per joule of all energy rates of this set, exactly."""
        return sum((r.exact_unit_cost for r in self.rates if r.kind == "energy"), Fraction(0))


@dataclass(frozen=True)
class CostModel:
    """A parsed cost model description."""

    currency: str
    node_sets: tuple[NodeSet, ...]
    source: str = "<model>"
    nodes_are: NodeSharing = DEFAULT_NODE_SHARING
    """Whether a job pays its nodes whole (``exclusive``) or its share of them (``shared``)."""

    def charged_share(self, node_share: Fraction | None) -> Fraction:
        """The part of each of its nodes a job pays time rates for: the whole node under an
        exclusive model or when the share is not known (None), else ``node_share``.

        Raises ValueError for a share outside (0, 1].
        """
        if node_share is None or self.nodes_are == "exclusive":
            return WHOLE_NODE
        if not 0 < node_share <= 1:
            raise ValueError(f"a job's share of a node must be in (0, 1], got {node_share}")
        return node_share

    @cached_property
    def membership(self) -> Mapping[str, tuple[int, ...]]:
        """Each known node and the indexes of the node sets it is in."""
        sets_of: dict[str, list[int]] = {}
        for index, node_set in enumerate(self.node_sets):
            for node in node_set.nodes:
                sets_of.setdefault(node, []).append(index)
        return {node: tuple(indexes) for node, indexes in sets_of.items()}

    @cached_property
    def numbered_nodes(self) -> Mapping[tuple[str, int], tuple[list[int], list[list[int]]]]:
        """The known nodes whose names end in digits, for counting without expanding: per
        (name without its trailing digits, number of digits), the sorted numbers of all of
        them and of each node set's."""
        index: dict[tuple[str, int], tuple[list[int], list[list[int]]]] = {}
        for node, sets in self.membership.items():
            match = _TRAILING_DIGITS.fullmatch(node)
            if match is None:
                continue
            prefix, digits = match.groups()
            every, per_set = index.setdefault(
                (prefix, len(digits)), ([], [[] for _ in self.node_sets])
            )
            every.append(int(digits))
            for set_index in sets:
                per_set[set_index].append(int(digits))
        for every, per_set in index.values():
            every.sort()
            for numbers in per_set:
                numbers.sort()
        return index

    @property
    def rates(self) -> tuple[tuple[NodeSet, Rate], ...]:
        """Every rate with its node set, in file order."""
        return tuple((node_set, rate) for node_set in self.node_sets for rate in node_set.rates)

    @property
    def has_energy_rates(self) -> bool:
        return any(rate.kind == "energy" for _, rate in self.rates)


@dataclass(frozen=True)
class RateCost:
    """The cost of one rate for one job; ``cost`` is None for an energy rate without energy."""

    name: str
    kind: RateKind
    cost: Decimal | None


@dataclass(frozen=True)
class NodeSetCost:
    """The job's nodes in one node set and what each rate of the set costs for them."""

    name: str
    node_count: int
    rates: tuple[RateCost, ...]

    @property
    def total(self) -> Decimal:
        return sum((rate.cost for rate in self.rates if rate.cost is not None), Decimal(0))


@dataclass(frozen=True)
class JobCost:
    """A job's cost estimate (the job cost meter of ch. 5.1)."""

    currency: str
    node_count: int
    runtime_seconds: int
    energy_joules: int | None
    node_sets: tuple[NodeSetCost, ...]
    """Only the node sets that hold at least one of the job's nodes, in model order."""
    unknown_nodes: tuple[str, ...]
    """The job's nodes that are in no node set (they cost nothing)."""
    total: Decimal
    missing_data: bool
    """True when a rate could not be priced: an energy rate and no energy record (ch. 4)."""
    nodes_are: NodeSharing = DEFAULT_NODE_SHARING
    node_share: Fraction = WHOLE_NODE
    """The part of each node the time rates were charged for (1 under an exclusive model)."""


# -- parsing ------------------------------------------------------------------------------------


def cost_model_parse(text: str, *, source: str = "<model>") -> CostModel:
    """Parse a cost model description (ch. 4); raise :class:`CostModelError` with the line."""
    return _Parser(source).parse(text)


def cost_model_load(path: str | Path) -> CostModel:
    """Read and parse a cost model file; an unreadable file raises :class:`CostModelError` too."""
    source = str(path)
    try:
        text = Path(path).read_text(encoding="utf-8")
    except UnicodeDecodeError as error:
        raise CostModelError(
            f"not UTF-8 text (byte {error.start})", source=source, line_number=None
        ) from None
    except OSError as error:
        raise CostModelError(
            f"cannot read the model: {error.strerror or error}", source=source, line_number=None
        ) from None
    return cost_model_parse(text, source=source)


class _Parser:
    """One pass over the lines; remembers where each name was defined for the messages."""

    def __init__(self, source: str) -> None:
        self.source = source
        self.line_number = 0
        self.currency: str | None = None
        self.currency_line = 0
        self.nodes_are: NodeSharing | None = None
        self.nodes_are_line = 0
        self.node_sets: list[NodeSet] = []
        self.node_set_lines: dict[str, int] = {}
        # The node set being read: rates attach to the one declared last (ch. 4).
        self.open_set: tuple[str, frozenset[str], tuple[str, ...], int] | None = None
        self.open_rates: list[Rate] = []

    def error(self, message: str) -> CostModelError:
        return CostModelError(message, source=self.source, line_number=self.line_number)

    def parse(self, text: str) -> CostModel:
        lines = text.split("\n")
        for self.line_number, line in enumerate(lines, start=1):
            words = line.split("#", 1)[0].split()
            if not words:
                continue
            command, arguments = words[0], words[1:]
            if command == "currency":
                self.set_currency(arguments)
            elif command == "nodes":
                self.start_node_set(arguments)
            elif command in ("rate", "energy-rate"):
                self.add_rate(command, arguments)
            elif command == "nodes-are":
                self.set_nodes_are(arguments)
            else:
                raise self.error(
                    f"unknown command {command!r} "
                    "(expected currency, nodes, rate, energy-rate or nodes-are)"
                )
        self.close_node_set()
        if not self.node_sets:
            self.line_number = len(lines)
            raise self.error("no nodes command: the model defines no node sets")
        return CostModel(
            currency=self.currency or DEFAULT_CURRENCY,
            node_sets=tuple(self.node_sets),
            source=self.source,
            nodes_are=self.nodes_are or DEFAULT_NODE_SHARING,
        )

    def set_currency(self, arguments: Sequence[str]) -> None:
        if len(arguments) != 1:
            raise self.error(f"currency takes one name, got {len(arguments)} arguments")
        if self.currency is not None:
            raise self.error(f"currency set twice (first on line {self.currency_line})")
        self.currency, self.currency_line = arguments[0], self.line_number

    def set_nodes_are(self, arguments: Sequence[str]) -> None:
        expected = " or ".join(NODE_SHARING)
        if len(arguments) != 1:
            raise self.error(f"nodes-are takes one word, {expected}; got {len(arguments)}")
        if self.nodes_are is not None:
            raise self.error(f"nodes-are set twice (first on line {self.nodes_are_line})")
        word = arguments[0]
        if word not in NODE_SHARING:
            raise self.error(f"nodes-are {word!r}: expected {expected}")
        self.nodes_are, self.nodes_are_line = word, self.line_number

    def start_node_set(self, arguments: Sequence[str]) -> None:
        if len(arguments) < 2:
            raise self.error("nodes takes a name and at least one hostlist")
        name, hostlists = arguments[0], tuple(arguments[1:])
        if name in self.node_set_lines:
            raise self.error(
                f"node set {name!r} already defined on line {self.node_set_lines[name]}"
            )
        nodes: set[str] = set()
        for text in hostlists:
            try:
                expanded = _expand(text, allow_duplicates=True)
            except NodelistError as error:
                raise self.error(f"node set {name!r}: {error}") from None
            for node in expanded:
                if node in nodes:
                    raise self.error(f"node {node!r} is listed twice in node set {name!r}")
                nodes.add(node)
        if not nodes:
            raise self.error(f"node set {name!r} has no nodes")
        self.close_node_set()
        self.node_set_lines[name] = self.line_number
        self.open_set = (name, frozenset(nodes), hostlists, self.line_number)

    def close_node_set(self) -> None:
        if self.open_set is None:
            return
        name, nodes, hostlists, line_number = self.open_set
        self.node_sets.append(
            NodeSet(
                name=name,
                nodes=nodes,
                hostlists=hostlists,
                rates=tuple(self.open_rates),
                line_number=line_number,
            )
        )
        self.open_set, self.open_rates = None, []

    def add_rate(self, command: str, arguments: Sequence[str]) -> None:
        if self.open_set is None:
            raise self.error(
                f"{command} before any nodes command "
                "(a rate applies to the node set declared before it)"
            )
        if len(arguments) != 3:
            raise self.error(f"{command} takes NAME VALUE UNIT, got {len(arguments)} arguments")
        name, value_text, unit_text = arguments
        for earlier in self.open_rates:
            if earlier.name == name:
                raise self.error(
                    f"rate {name!r} already defined for node set {self.open_set[0]!r} "
                    f"on line {earlier.line_number}"
                )
        value = self.number(command, name, value_text)
        multiplier, slash, unit = unit_text.partition("/")
        if command == "rate":
            if not slash or multiplier not in MULTIPLIERS or unit not in TIME_UNITS_SECONDS:
                raise self.error(
                    f"rate {name}: bad unit {unit_text!r}: expected MULT/TIME with MULT one of "
                    f"{' '.join(MULTIPLIERS)} and TIME one of {' '.join(TIME_UNITS_SECONDS)}"
                )
            kind: RateKind = "time"
        else:
            if not slash or multiplier not in MULTIPLIERS or unit != ENERGY_UNIT:
                raise self.error(
                    f"energy-rate {name}: bad unit {unit_text!r}: expected MULT/kWh with MULT "
                    f"one of {' '.join(MULTIPLIERS)}"
                )
            kind = "energy"
        self.open_rates.append(
            Rate(
                name=name,
                kind=kind,
                value=value,
                multiplier=multiplier,
                unit=unit,
                line_number=self.line_number,
            )
        )

    def number(self, command: str, name: str, text: str) -> Decimal:
        # A plain decimal or float literal; Decimal() alone would also take "NaN", "1_000" and
        # non-ASCII digits.
        if not _NUMBER.fullmatch(text):
            raise self.error(f"{command} {name}: {text!r} is not a number")
        value = Decimal(text)
        if value and abs(value.adjusted()) > _MAX_MAGNITUDE:
            raise self.error(f"{command} {name}: {text!r} is out of range")
        if value < 0:
            raise self.error(f"{command} {name}: a rate is a cost and cannot be negative")
        return value


# -- node lists ---------------------------------------------------------------------------------


def expand_nodelist(text: str) -> list[str]:
    """The distinct nodes of a Slurm hostlist (whitespace may separate several hostlists).

    Raises :class:`NodelistError` for text that is not a hostlist.
    """
    parts = text.split()
    if len(parts) == 1:
        return list(dict.fromkeys(_expand(parts[0], allow_duplicates=True)))
    nodes: dict[str, None] = {}
    for part in parts:
        nodes.update(dict.fromkeys(_expand(part, allow_duplicates=True)))
    return list(nodes)


def _expand(text: str, *, allow_duplicates: bool) -> list[str]:
    try:
        return list(hostlist.expand_hostlist(text, allow_duplicates=allow_duplicates))
    except (hostlist.BadHostlist, ValueError, RecursionError) as error:
        raise NodelistError(f"{text!r} is not a Slurm hostlist ({error or 'too deep'})") from None


def node_set_counts(
    model: CostModel, nodes: Iterable[str]
) -> tuple[tuple[int, ...], tuple[str, ...]]:
    """How many of the (distinct) nodes each node set holds, and the nodes in none (sorted)."""
    job_nodes = nodes if isinstance(nodes, (set, frozenset)) else set(nodes)
    counts = tuple(len(node_set.nodes.intersection(job_nodes)) for node_set in model.node_sets)
    unknown = job_nodes.difference(model.membership)
    return counts, tuple(sorted(unknown)) if unknown else ()


# Counting a node list's nodes per node set without naming every node. Slurm writes node lists
# as prefix[ranges] items; a million jobs hold a hundred thousand distinct lists, and expanding
# each into names was most of coststats' time. Ranges are counted against the sorted numbers
# of each node set instead (bisect), with exactly hostlist's naming rules: a single number is
# kept as written, a range "lo-hi" is zero-padded to the width of "lo". Anything else (several
# bracket groups, a prefix ending in a digit, whitespace, errors) takes the full expansion.
_TRAILING_DIGITS: Final = re.compile(r"(.*?)([0-9]+)")
_SIMPLE_ITEM: Final = re.compile(
    r"((?:[^\[\],\s]*[^\[\],\s0-9])?)\[([0-9]+(?:-[0-9]+)?(?:,[0-9]+(?:-[0-9]+)?)*)\]"
)
_TOP_LEVEL_COMMA: Final = re.compile(r",(?![^\[]*\])")
_PLAIN_NAME: Final = re.compile(r"[^\[\],\s]+")


def nodelist_node_set_counts(model: CostModel, text: str) -> tuple[int, tuple[int, ...], bool]:
    """(distinct nodes, nodes in each node set, whether some node is in none) of a Slurm
    hostlist: what :func:`expand_nodelist` then :func:`node_set_counts` give, faster.

    Raises :class:`NodelistError` for text that is not a hostlist.
    """
    counted = _counts_without_expanding(model, text)
    if counted is not None:
        return counted
    nodes = expand_nodelist(text)
    counts, unknown = node_set_counts(model, nodes)
    return len(nodes), counts, bool(unknown)


def _counts_without_expanding(
    model: CostModel, text: str
) -> tuple[int, tuple[int, ...], bool] | None:
    intervals: dict[tuple[str, int], list[tuple[int, int]]] = {}
    plain: set[str] = set()
    for item in _TOP_LEVEL_COMMA.split(text):
        bracketed = _SIMPLE_ITEM.fullmatch(item)
        if bracketed is not None:
            prefix, ranges = bracketed.groups()
            for range_ in ranges.split(","):
                if not _range_intervals(prefix, range_, intervals):
                    return None
        elif _PLAIN_NAME.fullmatch(item):
            numbered = _TRAILING_DIGITS.fullmatch(item)
            if numbered is None:
                plain.add(item)
            else:
                prefix, digits = numbered.groups()
                number = int(digits)
                intervals.setdefault((prefix, len(digits)), []).append((number, number))
        else:
            return None  # empty items, several brackets, errors: the full expansion decides
    counts = [0] * len(model.node_sets)
    size = len(plain)
    known = 0
    for node in plain:
        sets = model.membership.get(node)
        if sets:
            known += 1
            for set_index in sets:
                counts[set_index] += 1
    index = model.numbered_nodes
    for key, spans in intervals.items():
        known_numbers = index.get(key)
        for low, high in _merged(spans):
            size += high - low + 1
            if known_numbers is None:
                continue
            every, per_set = known_numbers
            known += bisect.bisect_right(every, high) - bisect.bisect_left(every, low)
            for set_index, numbers in enumerate(per_set):
                if numbers:
                    counts[set_index] += bisect.bisect_right(numbers, high) - bisect.bisect_left(
                        numbers, low
                    )
    return size, tuple(counts), known < size


def _range_intervals(
    prefix: str, range_: str, intervals: dict[tuple[str, int], list[tuple[int, int]]]
) -> bool:
    """Add the (digit count, numbers) intervals a range names; False to take the slow path."""
    low_text, _, high_text = range_.partition("-")
    if not high_text:  # a single number, kept as written
        intervals.setdefault((prefix, len(low_text)), []).append((int(low_text), int(low_text)))
        return True
    low, high, width = int(low_text), int(high_text), len(low_text)
    if high < low or high - low > hostlist.MAX_SIZE:
        return False  # hostlist's own error
    digits = width
    while low <= high:
        # Numbers below 10**digits print with `digits` digits (zero-padded to the width).
        top = min(high, 10**digits - 1)
        if low <= top:
            intervals.setdefault((prefix, digits), []).append((low, top))
            low = top + 1
        digits += 1
    return True


def _merged(spans: list[tuple[int, int]]) -> list[tuple[int, int]]:
    spans.sort()
    merged = [spans[0]]
    for low, high in spans[1:]:
        last_low, last_high = merged[-1]
        if low <= last_high + 1:
            merged[-1] = (last_low, max(last_high, high))
        else:
            merged.append((low, high))
    return merged


# -- costs --------------------------------------------------------------------------------------


def node_hour_costs(model: CostModel) -> dict[str, Decimal]:
    """Cost of one node-hour per node set: the sum of its time rates (Table 3.1's unit).

    The exact sum of the rates' ratios, divided once.
    """
    return {
        node_set.name: _decimal(node_set.time_unit_cost * SECONDS_PER_HOUR)
        for node_set in model.node_sets
    }


def node_hour_cost_range(model: CostModel) -> tuple[Decimal, Decimal]:
    """The cheapest and the dearest node-hour over all nodes of the model (Table 3.1).

    A node pays the time rates of every node set it is in (ch. 3.3).
    """
    per_set = [node_set.time_unit_cost * SECONDS_PER_HOUR for node_set in model.node_sets]
    costs = {
        sum((per_set[index] for index in indexes), Fraction(0))
        for indexes in set(model.membership.values())
    }
    return _decimal(min(costs)), _decimal(max(costs))


def job_cost(
    model: CostModel,
    *,
    nodes: Sequence[str],
    runtime_seconds: int,
    energy_joules: int | None,
    node_share: Fraction | None = None,
) -> JobCost:
    """Price one job: every rate of every node set that holds some of its nodes (ch. 4, 5.1).

    A time rate costs ``rate * nodes in the set * runtime``, times the job's ``node_share`` of
    each node under a shared model (:meth:`CostModel.charged_share`); an energy rate costs
    ``rate * energy * nodes in the set / nodes of the job`` and nothing (None) when the job has
    no energy record (None or 0 J).
    """
    if runtime_seconds < 0:
        raise ValueError(f"runtime_seconds must not be negative, got {runtime_seconds}")
    if energy_joules is not None and energy_joules < 0:
        raise ValueError(f"energy_joules must not be negative, got {energy_joules}")
    share = model.charged_share(node_share)
    job_nodes = set(nodes)
    counts, unknown = node_set_counts(model, job_nodes)
    node_count = len(job_nodes)
    # Slurm writes 0 J when no energy plugin runs: that is no record, not free energy.
    energy = energy_joules or None
    node_set_costs: list[NodeSetCost] = []
    for node_set, count in zip(model.node_sets, counts, strict=True):
        if count:
            costs = tuple(
                RateCost(
                    name=rate.name,
                    kind=rate.kind,
                    cost=rate_cost(
                        rate,
                        nodes_in_set=count,
                        node_count=node_count,
                        runtime_seconds=runtime_seconds,
                        energy_joules=energy,
                        node_share=share,
                    ),
                )
                for rate in node_set.rates
            )
            node_set_costs.append(NodeSetCost(name=node_set.name, node_count=count, rates=costs))
    missing = any(rate.cost is None for node_set in node_set_costs for rate in node_set.rates)
    return JobCost(
        currency=model.currency,
        node_count=node_count,
        runtime_seconds=runtime_seconds,
        energy_joules=energy,
        node_sets=tuple(node_set_costs),
        unknown_nodes=unknown,
        total=sum((node_set.total for node_set in node_set_costs), Decimal(0)),
        missing_data=missing,
        nodes_are=model.nodes_are,
        node_share=share,
    )


def rate_cost(
    rate: Rate,
    *,
    nodes_in_set: int,
    node_count: int,
    runtime_seconds: int,
    energy_joules: int | None,
    node_share: Fraction = WHOLE_NODE,
) -> Decimal | None:
    """What one rate costs for a job with ``nodes_in_set`` of its ``node_count`` nodes in the
    rate's node set, holding ``node_share`` of each (:meth:`CostModel.charged_share`); None for
    an energy rate when the job has no energy record (ch. 4)."""
    # One division per cost, last: exact up to the context's 28 significant digits.
    if rate.kind == "time":
        numerator, denominator = node_share.numerator, node_share.denominator
        return rate.amount * (nodes_in_set * runtime_seconds * numerator) / (rate.per * denominator)
    if not energy_joules:
        return None
    # The job's energy shared out by node count: Slurm records one total per job.
    return rate.amount * (energy_joules * nodes_in_set) / (rate.per * node_count)


# -- the four output forms of the job cost meter (ch. 5.1) -----------------------------------------


def money_display(amount: Decimal) -> str:
    """A cost to the cent, rounded half up: for display only."""
    return str(amount.quantize(DISPLAY_QUANTUM, rounding=ROUND_HALF_UP))


def job_cost_quiet(cost: JobCost) -> str:
    """``--quiet``: the bare total, for scripts ("0.43")."""
    return money_display(cost.total)


def job_cost_short(cost: JobCost) -> str:
    """``--short``: one line ("job cost estimate: 0.43 Euro")."""
    return f"job cost estimate: {money_display(cost.total)} {cost.currency}"


def job_cost_verbose(cost: JobCost) -> str:
    """``--verbose``: the block of Listing 5, one line per rate of each node set used."""
    labels = [f"{rate.name}:" for node_set in cost.node_sets for rate in node_set.rates]
    label_width = max((len(label) for label in labels), default=0)
    total_text = money_display(cost.total)
    amounts = [
        money_display(rate.cost) if rate.cost is not None else "n/a"
        for node_set in cost.node_sets
        for rate in node_set.rates
    ]
    amount_width = max(len(text) for text in [total_text, *amounts])
    body = [f"({cost.node_count} nodes total)"]
    if cost.nodes_are == "shared":
        body.append(f"(nodes shared: the job pays {share_text(cost.node_share)} of each node)")
    for node_set in cost.node_sets:
        body.append(f"{node_set.name} ({node_set.node_count} nodes):")
        for rate in node_set.rates:
            label = f"{rate.name}:"
            if rate.cost is None:
                body.append(f"  {label:<{label_width}} {'n/a':>{amount_width}}  (no energy record)")
            else:
                amount = money_display(rate.cost)
                body.append(f"  {label:<{label_width}} {amount:>{amount_width}} {cost.currency}")
    if cost.unknown_nodes:
        body.append(
            f"({len(cost.unknown_nodes)} nodes in no node set, not priced: "
            f"{_collect(cost.unknown_nodes)})"
        )
    total_line = f"{'total:':<{label_width + 2}} {total_text:>{amount_width}} {cost.currency}"
    width = max(len(line) for line in [*body, total_line])
    title = "job cost estimate"
    lines = [
        "=" * width,
        title.center(width).rstrip(),
        "=" * width,
        "",
        *body,
        "-" * len(total_line),
        total_line,
        "=" * width,
    ]
    return "\n".join(lines)


def job_cost_as_dict(cost: JobCost) -> dict[str, Any]:
    """``--json``: the same information for tools; costs are decimal strings with 6 places."""
    return {
        "currency": cost.currency,
        "nodes": cost.node_count,
        "runtime_seconds": cost.runtime_seconds,
        "energy_joules": cost.energy_joules,
        "node_sets": [
            {
                "name": node_set.name,
                "nodes": node_set.node_count,
                "rates": [
                    {"name": rate.name, "kind": rate.kind, "cost": _json_money(rate.cost)}
                    for rate in node_set.rates
                ],
                "total": _json_money(node_set.total),
            }
            for node_set in cost.node_sets
        ],
        "unknown_nodes": list(cost.unknown_nodes),
        "missing_data": cost.missing_data,
        "nodes_are": cost.nodes_are,
        "node_share": str(cost.node_share),
        "total": _json_money(cost.total),
    }


def share_text(share: Fraction) -> str:
    """A node share for people: "1/8", "all" of a whole node, or a percentage when the
    fraction has a long denominator (10 cores over 3 nodes)."""
    if share == WHOLE_NODE:
        return "all"
    if share.denominator <= 10_000:
        return f"{share.numerator}/{share.denominator}"
    percent = Decimal(share.numerator * 100) / share.denominator
    return f"{percent.quantize(Decimal('0.01'), rounding=ROUND_HALF_UP)} %"


def job_cost_json(cost: JobCost) -> str:
    return json.dumps(job_cost_as_dict(cost), indent=2)


def _json_money(amount: Decimal | None) -> str | None:
    return None if amount is None else str(amount.quantize(JSON_QUANTUM, rounding=ROUND_HALF_UP))


def _decimal(ratio: Fraction) -> Decimal:
    """A ratio as a decimal: one division, at the context's precision."""
    return Decimal(ratio.numerator) / ratio.denominator


def _collect(nodes: Sequence[str]) -> str:
    try:
        return str(hostlist.collect_hostlist(list(nodes)))
    except (hostlist.BadHostlist, ValueError):
        return ",".join(nodes)
