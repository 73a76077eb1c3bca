"""GRES strings and hostlists as Slurm 22.05 prints them."""

from __future__ import annotations

import pytest

from whale_opt.slurm import gres
from whale_opt.slurm.gres import GresEntry, GresError
from whale_opt.slurm.hostlist import HostlistError, expand, join


@pytest.mark.parametrize(
    ("text", "hosts"),
    [
        ("", []),
        ("n1", ["n1"]),
        ("n[1-3,5]", ["n1", "n2", "n3", "n5"]),
        ("n[1,4]", ["n1", "n4"]),
        ("gpu[08-10],login", ["gpu08", "gpu09", "gpu10", "login"]),
        ("a[1-2]-ib", ["a1-ib", "a2-ib"]),
        ("n1,n4", ["n1", "n4"]),
    ],
)
def test_expand(text: str, hosts: list[str]) -> None:
    assert expand(text) == hosts


@pytest.mark.parametrize("text", ["n[1-", "n]1[", "n[a-b]", "n[3-1]", "n[1][2]"])
def test_expand_rejects_what_slurm_does_not_print(text: str) -> None:
    with pytest.raises(HostlistError):
        expand(text)


def test_join_is_a_plain_comma_list() -> None:
    assert join(["n1", "n4"]) == "n1,n4"


@pytest.mark.parametrize(
    ("text", "entries"),
    [
        ("gpu:a100:8", (GresEntry("gpu", "a100", 8),)),
        ("gpu:8", (GresEntry("gpu", None, 8),)),
        ("gpu:a100:8(S:0-1)", (GresEntry("gpu", "a100", 8),)),
        ("gpu:a100:5(IDX:0-4)", (GresEntry("gpu", "a100", 5, (0, 1, 2, 3, 4)),)),
        ("gpu:a100:3(IDX:0-1,6)", (GresEntry("gpu", "a100", 3, (0, 1, 6)),)),
        (
            "gpu:g0:0(IDX:N/A),gpu:g2:1(IDX:2)",
            (GresEntry("gpu", "g0", 0, ()), GresEntry("gpu", "g2", 1, (2,))),
        ),
        ("gpu:g0:0(IDX:)", (GresEntry("gpu", "g0", 0, ()),)),
        ("(null)", ()),
        ("", ()),
        (None, ()),
    ],
)
def test_parse_gres(text: str | None, entries: tuple[GresEntry, ...]) -> None:
    assert gres.parse_gres(text) == entries


@pytest.mark.parametrize("text", ["gpu:a100:x", "gpu:a:b:c", "gpu:a100:2(IDX:1-x)"])
def test_parse_gres_names_a_bad_string(text: str) -> None:
    with pytest.raises(GresError, match="bad"):
        gres.parse_gres(text)


def test_tres_strings() -> None:
    assert gres.gpu_count(gres.parse_tres_gres("gres:gpu:2")) == 2
    typed = gres.parse_tres_gres("gres:gpu:g2:1,gres:gpu:g5:1")
    assert gres.gpu_count(typed) == 2
    assert gres.requested_indices(typed) == (2, 5)
    assert gres.parse_tres_gres("gres:") == ()  # what a cleared request looks like
    assert gres.parse_tres_gres("gres/gpu:4") == (GresEntry("gpu", None, 4),)
    assert gres.parse_tres_gres("license/x:1,gres:gpu:1") == (GresEntry("gpu", None, 1),)


def test_requested_indices_only_for_an_indexed_request() -> None:
    assert gres.requested_indices(gres.parse_tres_gres("gres:gpu:2")) is None
    assert gres.requested_indices(gres.parse_tres_gres("gres:gpu:a100:2")) is None
    assert gres.requested_indices(gres.parse_tres_gres("gres:gpu:g1:2")) is None
    # Zero counts are what Slurm keeps of an earlier request: not asked.
    leftover = gres.parse_tres_gres("gres:gpu:g0:0,gres:gpu:g3:1")
    assert gres.requested_indices(leftover) == (3,)


def test_used_and_requested_round_trip() -> None:
    detail = gres.parse_gres("gpu:g0:0(IDX:),gpu:g3:1(IDX:3),gpu:g6:1(IDX:6)")
    assert gres.used_indices(detail) == (3, 6)
    assert gres.indexed_request((6, 3)) == "gres:gpu:g3:1,gres:gpu:g6:1"
    assert gres.type_index("g12") == 12
    assert gres.type_index("a100") is None
