"""The fleet table's filter syntax: what each term keeps, and bad input refused by name."""

from __future__ import annotations

import pytest

from console.fleet.filter import FilterError, HostFacts, parse_filter

GROUPS = ("gpu", "b300", "pro6000")
FLEET = [
    HostFacts("b300-01", frozenset({"connected", "up", "active"}), ("gpu", "b300")),
    HostFacts("b300-02", frozenset({"unreachable", "down"}), ("gpu", "b300")),
    HostFacts(
        "pro6000-01", frozenset({"connected", "up", "failed", "crashed"}), ("gpu", "pro6000")
    ),
    HostFacts("spare", frozenset({"reconnecting", "down"}), ()),
]


def kept(text: str) -> list[str]:
    query = parse_filter(text, GROUPS)
    return [h.name for h in FLEET if query.matches(h)]


def test_each_field_and_operator() -> None:
    assert kept("name~b300") == ["b300-01", "b300-02"]
    assert kept("name=spare") == ["spare"]
    assert kept("state=down") == ["b300-02", "spare"]
    assert kept("group=pro6000") == ["pro6000-01"]
    assert kept("group=gpu") == ["b300-01", "b300-02", "pro6000-01"]  # parents match too
    assert kept("group!=gpu") == ["spare"]
    assert kept("name!~b300") == ["pro6000-01", "spare"]
    assert kept("state~reach") == ["b300-02"]


def test_bare_words_name_hosts_and_case_does_not_matter() -> None:
    assert kept("PRO") == ["pro6000-01"]
    assert kept("Group=B300 State=UP") == ["b300-01"]


def test_same_field_is_either_other_fields_are_all() -> None:
    assert kept("state=unreachable state=crashed") == ["b300-02", "pro6000-01"]
    assert kept("name~b300 state=down group=b300") == ["b300-02"]
    assert kept("group=gpu state=down") == ["b300-02"]
    assert kept("") == [h.name for h in FLEET]
    assert parse_filter("  state=up   b300 ").text == "state=up b300"


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("stat=down", "'stat=down': unknown field 'stat' (fields: name, state, group)"),
        ("state=dwn", "'state=dwn': field 'state': unknown value 'dwn' (states: connected,"),
        ("group=b30", "'group=b30': field 'group': no host is in group 'b30' (b300, gpu, pro6000)"),
        ("name=", "'name=': field 'name' has no value after '='"),
        ("=down", "'=down': no field before '='"),
        ("state==up", "'state==up': field 'state': value '=up' starts with an operator"),
    ],
)
def test_bad_input_names_term_field_and_value(text: str, message: str) -> None:
    with pytest.raises(FilterError) as caught:
        parse_filter(text, GROUPS)
    assert str(caught.value).startswith(message)


def test_a_fleet_without_groups_says_so() -> None:
    with pytest.raises(FilterError, match=r"no host is in group 'b300' \(none"):
        parse_filter("group=b300", ())


def test_a_filter_says_whether_it_asks_for_a_state() -> None:
    assert parse_filter("state=idle").selects_state("idle", "stale")
    assert parse_filter("group=b300 state~stal", ["b300"]).selects_state("idle", "stale")
    assert not parse_filter("state!=idle").selects_state("idle", "stale")
    assert not parse_filter("state=down idle").selects_state("idle", "stale")  # a name
