"""Counting a node list's nodes per node set without expanding it equals expanding it
(accounting.costs.costmodels.nodelist_node_set_counts against expand_nodelist + node_set_counts)."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from accounting.costs.costmodels import (
    NodelistError,
    cost_model_parse,
    expand_nodelist,
    node_set_counts,
    nodelist_node_set_counts,
)

MODEL = cost_model_parse(
    """\
currency Euro
nodes Lean m[10000-10199] m[0009-0011] n[1-12] 7 7[1-2]x
rate Hardware 1 k/a
nodes Fat m[10150-10299] n[01-03] gpu
rate Hardware 2 k/a
nodes Tiny mg[100-109],login1
rate Hardware 3 k/a
"""
)


def _slow(text):
    nodes = expand_nodelist(text)
    counts, unknown = node_set_counts(MODEL, nodes)
    return len(nodes), counts, bool(unknown)


@pytest.mark.parametrize(
    "text",
    [
        "m10000", "m[10000-10015]", "m[10140-10160,10190]", "m[10000-10005,10003-10010]",
        "m[9-11]", "m[0009-0011]", "m[009-011]", "m[98-102]", "n[1-3],n[01-03]", "n01,n1",
        "m10001,m[10000-10002]", "[1-9]", "7,[7-8]", "gpu,login1,unknown", "mg[100-120],m10000",
        "m[10000-10001]x", "m1[0000-0010]", "a[1-2]b[1-2]", "m[10000-10001] n[1-2]",
        "m[0-0]", "m[00-05]", "",
    ],
)  # fmt: skip
def test_counting_agrees_with_expanding(text):
    assert nodelist_node_set_counts(MODEL, text) == _slow(text)


@pytest.mark.parametrize("text", ["m[5-2]", "m[1-", "m[[1]]", "m[a-b]"])
def test_bad_node_lists_raise_like_the_expansion(text):
    with pytest.raises(NodelistError):
        expand_nodelist(text)
    with pytest.raises(NodelistError):
        nodelist_node_set_counts(MODEL, text)


_prefix = st.sampled_from(["m", "n", "mg", "", "x", "7", "m1"])
_number = st.integers(min_value=0, max_value=10_400)
_width = st.integers(min_value=0, max_value=6)


@st.composite
def _range(draw):
    low = draw(_number)
    width = draw(_width)
    low_text = str(low).zfill(width)
    if draw(st.booleans()):
        return low_text
    return f"{low_text}-{low + draw(st.integers(min_value=0, max_value=300))}"


@st.composite
def _item(draw):
    prefix = draw(_prefix)
    if draw(st.booleans()):
        return f"{prefix}{str(draw(_number)).zfill(draw(_width))}"
    ranges = draw(st.lists(_range(), min_size=1, max_size=4))
    return f"{prefix}[{','.join(ranges)}]"


@settings(max_examples=400, deadline=None)
@given(st.lists(_item(), min_size=1, max_size=5))
def test_random_node_lists_count_as_they_expand(items):
    text = ",".join(items)
    assert nodelist_node_set_counts(MODEL, text) == _slow(text)
