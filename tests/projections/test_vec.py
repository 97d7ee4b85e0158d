from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from projections.vec import Vec


def test_append_leaves_older_views_alone() -> None:
    empty: Vec[int] = Vec()
    one = empty.append(1)
    two = one.append(2)
    assert list(empty) == [] and list(one) == [1] and list(two) == [1, 2]
    # Appending to an older view branches off instead of disturbing the newer one.
    other = one.append(9)
    assert list(other) == [1, 9] and list(two) == [1, 2] and list(one) == [1]
    assert two != other and one == Vec([1])


def test_indexing_and_slicing() -> None:
    vec = Vec([1, 2, 3]).append(4)
    assert vec[0] == 1 and vec[-1] == 4 and vec[1:3] == [2, 3] and len(vec) == 4
    shorter = Vec([1, 2, 3])
    assert shorter.extend([7])[-1] == 7
    with pytest.raises(IndexError, match="out of range"):
        _ = shorter[3]
    assert not Vec() and bool(shorter)
    assert repr(Vec([1])) == "Vec([1])"


def test_vec_is_not_hashable_and_not_equal_to_a_list() -> None:
    with pytest.raises(TypeError):
        hash(Vec([1]))
    assert Vec([1]) != [1]


@given(st.lists(st.tuples(st.integers(0, 20), st.integers())))
def test_any_branching_matches_plain_lists(ops: list[tuple[int, int]]) -> None:
    """Each op appends a value to some earlier version; every version keeps its content."""
    versions: list[Vec[int]] = [Vec()]
    expected: list[list[int]] = [[]]
    for base, value in ops:
        index = base % len(versions)
        versions.append(versions[index].append(value))
        expected.append([*expected[index], value])
    assert [v.to_list() for v in versions] == expected
