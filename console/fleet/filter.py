"""The fleet table's filter: `name~b300 state=down group=pro6000`, parsed and matched.

A filter is terms separated by spaces, each `FIELD OP VALUE`:

- fields: `name` (the host), `state` (see STATES), `group` (an inventory group, or a
  profile's `groups`, at any depth: `group=gpu` matches the hosts of its child groups too);
- operators: `=` equals, `~` contains, `!=` and `!~` their negations; case never matters;
- a bare word is `name~WORD`.

Terms on one field are alternatives (`state=down state=failed`: either), a negated term
excludes, and different fields must all hold (`group=b300 state=down`: the B300s that are
down). Bad input is refused with a message naming the term, the field and the value, before
anything is filtered. Plain data in, plain data out: the widget maps its rows to the words.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from dataclasses import dataclass

FIELDS = ("name", "state", "group")
OPERATORS = ("!=", "!~", "=", "~")
STATES = (
    # the connection, and a summary of it
    "connected",
    "connecting",
    "reconnecting",
    "unreachable",
    "refused",
    "closed",
    "idle",
    "up",
    "down",
    # the unit (systemd's ActiveState), or `error` when it could not be read
    "active",
    "activating",
    "deactivating",
    "inactive",
    "failed",
    "reloading",
    "error",
    # what the console saw
    "crashed",
    "crash-loop",
    "alerting",
    "stale",
)
"""The words a host's state can be matched against with `state=`."""
UNOPENED = ("idle", "stale")
"""States that opening a host would end: in on-demand mode the rows a filter for them shows
are not opened (each page opened would leave the filter and bring the next, through the whole
fleet)."""

_TERM = re.compile(r"^(?P<field>[A-Za-z]*)(?P<op>!=|!~|=|~)(?P<value>.*)$")


class FilterError(ValueError):
    """A filter that cannot be applied; the message names the term, field and value."""


@dataclass(frozen=True)
class Term:
    field: str
    op: str
    value: str

    @property
    def negated(self) -> bool:
        return self.op.startswith("!")

    def hit(self, words: Iterable[str]) -> bool:
        """Whether any of the host's words for this field satisfies the (un-negated) term."""
        if self.op.endswith("~"):
            return any(self.value in w for w in words)
        return self.value in words


@dataclass(frozen=True)
class HostFacts:
    """What a filter can see of one host."""

    name: str
    states: frozenset[str]
    groups: tuple[str, ...]


@dataclass(frozen=True)
class FleetFilter:
    text: str
    terms: tuple[Term, ...]

    @property
    def empty(self) -> bool:
        return not self.terms

    def selects_state(self, *states: str) -> bool:
        """Whether a term asks for hosts in any of `states` (`state=idle`, `state~stal`)."""
        wanted = (t for t in self.terms if t.field == "state" and not t.negated)
        return any(t.hit(states) for t in wanted)

    def matches(self, host: HostFacts) -> bool:
        words = {
            "name": (host.name.lower(),),
            "state": tuple(host.states),
            "group": tuple(g.lower() for g in host.groups),
        }
        for field in FIELDS:
            terms = [t for t in self.terms if t.field == field]
            wanted = [t for t in terms if not t.negated]
            if wanted and not any(t.hit(words[field]) for t in wanted):
                return False
            if any(t.hit(words[field]) for t in terms if t.negated):
                return False
        return True


NO_FILTER = FleetFilter("", ())


def parse_filter(text: str, groups: Iterable[str] = ()) -> FleetFilter:
    """The filter `text` means; FilterError for an unknown field, state or group, or a term
    with no value. `groups` are the fleet's groups (an unknown one is most likely a typo)."""
    known_groups = {g.lower() for g in groups}
    terms: list[Term] = []
    for word in text.split():
        match = _TERM.match(word)
        if match is None:  # no operator: a part of a host name
            terms.append(Term("name", "~", word.lower()))
            continue
        field, op, value = match["field"].lower(), match["op"], match["value"].lower()
        if not field:
            raise FilterError(f"{word!r}: no field before {op!r} (fields: {', '.join(FIELDS)})")
        if field not in FIELDS:
            raise FilterError(f"{word!r}: unknown field {field!r} (fields: {', '.join(FIELDS)})")
        if not value:
            raise FilterError(f"{word!r}: field {field!r} has no value after {op!r}")
        if any(value.startswith(o) for o in OPERATORS):
            raise FilterError(f"{word!r}: field {field!r}: value {value!r} starts with an operator")
        if field == "state" and op.endswith("=") and value not in STATES:
            raise FilterError(
                f"{word!r}: field 'state': unknown value {value!r} (states: {', '.join(STATES)})"
            )
        if field == "group" and op.endswith("=") and value not in known_groups:
            shown = ", ".join(sorted(known_groups)) or "none (the hosts name no groups)"
            raise FilterError(f"{word!r}: field 'group': no host is in group {value!r} ({shown})")
        terms.append(Term(field, op, value))
    return FleetFilter(" ".join(text.split()), tuple(terms))
