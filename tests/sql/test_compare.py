"""Result equality under Spider's test-suite semantics and BIRD's, on hand-written pairs."""
import pytest

from tasks.sql.compare import (
    bird_equal,
    order_matters,
    remove_distinct,
    results_equal,
    spider_equal,
    spider_postprocess,
)


@pytest.mark.parametrize("gold, pred, ordered, expected", [
    # ordering: bags unless the gold query orders them
    ([(1,), (2,)], [(2,), (1,)], False, True),
    ([(1,), (2,)], [(2,), (1,)], True, False),
    ([(1,), (2,)], [(1,), (2,)], True, True),
    # duplicates: bag semantics, so multiplicity matters
    ([(1,), (1,), (2,)], [(1,), (2,), (2,)], False, False),
    ([(1,), (1,), (2,)], [(1,), (2,), (1,)], False, True),
    ([(1,), (1,)], [(1,)], False, False),
    # column order: any one permutation applied to every row
    ([(1, "a"), (2, "b")], [("a", 1), ("b", 2)], False, True),
    ([(1, "a"), (2, "b")], [("b", 1), ("a", 2)], False, False),  # rows would need different perms
    ([(1, 2, 3, 4, 5)], [(5, 4, 3, 2, 1)], True, True),  # wider than three columns
    ([(1, 1, 2, 3), (1, 2, 2, 3)], [(3, 2, 1, 1), (3, 2, 1, 2)], False, True),
    ([(1, 1, 2, 3), (1, 2, 2, 3)], [(3, 2, 1, 1), (3, 1, 2, 2)], False, False),
    # column count, row count, emptiness
    ([(1, 2)], [(1,)], False, False),
    ([], [], False, True),
    ([], [(None,)], False, False),
    # NULLs compare equal to NULLs, not to 0 or ''
    ([(None, 1)], [(None, 1)], False, True),
    ([(None,)], [(0,)], False, False),
    ([(None,)], [("",)], False, False),
    # types: INTEGER 1 == REAL 1.0, TEXT '1' != INTEGER 1; floats are exact
    ([(1,)], [(1.0,)], False, True),
    ([(1,)], [("1",)], False, False),
    ([(0.1 + 0.2,)], [(0.3,)], False, False),
    ([(2.5, "x")], [("x", 2.5)], False, True),
])
def test_spider_semantics(gold, pred, ordered, expected):
    assert spider_equal(gold, pred, ordered) is expected
    assert results_equal(gold, pred, "spider", ordered) is expected


def test_permutation_search_checks_every_candidate():
    # Columns 0 and 1 hold the same multiset of values; only one assignment matches row-wise.
    gold = [(1, 2, "x", 0), (2, 1, "y", 0)]
    pred = [(0, "x", 2, 1), (0, "y", 1, 2)]
    assert spider_equal(gold, pred, False)
    assert not spider_equal(gold, [(0, "x", 1, 2), (0, "y", 1, 2)], False)


@pytest.mark.parametrize("gold, pred, expected", [
    ([(1,), (2,)], [(2,), (1,)], True),
    ([(1,), (1,), (2,)], [(1,), (2,)], True),  # duplicates ignored
    ([(1, "a")], [("a", 1)], False),  # no column permutation
    ([(1,)], [(1.0,)], True),
    ([], [], True),
    ([(None,)], [], False),
])
def test_bird_semantics(gold, pred, expected):
    assert bird_equal(gold, pred) is expected
    assert results_equal(gold, pred, "bird", order_matters=False) is expected


def test_unknown_semantics_is_an_error():
    with pytest.raises(ValueError, match="unknown result semantics"):
        results_equal([], [], "mysql", False)


def test_query_normalisation():
    assert spider_postprocess("SELECT a FROM t WHERE b > = 3 AND c ! = 2") == \
        "SELECT a FROM t WHERE b >= 3 AND c != 2"
    assert spider_postprocess("SELECT YEAR(CURDATE()) - born FROM t") == "SELECT 2020- born FROM t"
    assert order_matters("select a from t ORDER  BY a") is False  # Spider's literal test
    assert order_matters("select a from t order by a") is True
    assert remove_distinct("SELECT DISTINCT a, count(distinct b) FROM t WHERE c = 'distinct'") \
        == "SELECT  a, count( b) FROM t WHERE c = 'distinct'"
    with pytest.raises(ValueError, match="cannot be tokenised"):
        remove_distinct("SELECT 'unterminated")
