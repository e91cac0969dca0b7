"""A failing fuzz names what it poisoned: each accepted write is kept with its text decoded, and a
dead letter's or a drift's item ids find the requests that wrote them (`hybridsync.testing.fuzz`)."""

from __future__ import annotations

from hybridsync.testing import fuzz


def test_an_accepted_write_is_found_by_the_ids_its_poisoned_item_holds():
    figures = fuzz.Figures()
    written = fuzz.Request("PUT /users/u1/follows/%09%0D%0A", "PUT", "/users/u1/follows/%09%0D%0A", (), b"")
    other = fuzz.Request("PUT /users/u2/follows/u3", "PUT", "/users/u2/follows/u3", (), b'{"Note": "x"}')
    figures.accepted_writes += [(r.shown(), fuzz.decoded(r)) for r in (written, other)]
    assert fuzz.accepted_matching(figures, ["u1", "\t\r\n"]) == [written.shown()]
    assert fuzz.accepted_matching(figures, ["u3"]) == [other.shown()]
    assert fuzz.accepted_matching(figures, ["nobody"]) == fuzz.accepted_matching(figures, [""]) == []
