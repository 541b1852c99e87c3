"""When two query results count as equal: Spider's test-suite semantics and BIRD's.

Standard library only: the sandbox worker imports this module by file, without the package.

Spider (test-suite evaluation, ``exec_eval.result_eq``), re-implemented from its description:

* two empty results are equal; results with different row counts or column counts are not;
* rows are a multiset (bag) unless the gold query has ``ORDER BY``, then the order matters too;
* a permutation of the predicted columns may be applied (the same one to every row);
* values are compared with Python's ``==`` after SQLite's conversion: INTEGER 1 equals REAL
  1.0, TEXT '1' does not equal INTEGER 1, NULL equals NULL, floats compare exactly; TEXT is
  decoded as UTF-8 with undecodable bytes dropped (the official connection's ``text_factory``);
* the official quick pre-check (each row sorted by ``str(value) + str(type(value))``, then the
  sets of such rows, or their lists when order matters, must agree) is kept, so the rare pairs
  it rejects are rejected here too.

The official code samples 20 rows to prune column permutations of results wider than three
columns; here the candidates for each gold column are the predicted columns with the same
multiset of values (a necessary condition for equality), which prunes at least as much and is
deterministic. Both then search the remaining permutations exhaustively, so the verdicts agree.

BIRD (``calculate_ex``): the sets of rows are equal (duplicates and order ignored, no column
permutation).
"""
from __future__ import annotations

import functools
import re
from collections import Counter
from typing import Iterator, Sequence

Row = tuple
SEMANTICS = ("spider", "bird")


def _unorder_row(row: Row) -> Row:
    return tuple(sorted(row, key=lambda v: str(v) + str(type(v))))


def _quick_check(gold: Sequence[Row], pred: Sequence[Row], order_matters: bool) -> bool:
    a = [_unorder_row(r) for r in gold]
    b = [_unorder_row(r) for r in pred]
    return a == b if order_matters else set(a) == set(b)


def _permutations(gold: Sequence[Row], pred: Sequence[Row]) -> Iterator[tuple[int, ...]]:
    """Column permutations ``perm`` (pred column ``perm[i]`` plays gold column ``i``) whose
    columns hold the same multiset of values, in lexicographic order."""
    width = len(gold[0])
    gold_cols = [Counter(r[i] for r in gold) for i in range(width)]
    pred_cols = [Counter(r[j] for r in pred) for j in range(width)]
    candidates = [[j for j in range(width) if pred_cols[j] == gold_cols[i]] for i in range(width)]
    chosen: list[int] = []
    used: set[int] = set()

    def search(i: int) -> Iterator[tuple[int, ...]]:
        if i == width:
            yield tuple(chosen)
            return
        for j in candidates[i]:
            if j not in used:
                chosen.append(j)
                used.add(j)
                yield from search(i + 1)
                used.discard(j)
                chosen.pop()

    return search(0)


def spider_equal(gold: Sequence[Row], pred: Sequence[Row], order_matters: bool) -> bool:
    """Spider test-suite denotation equality of two results (lists of row tuples)."""
    if not gold and not pred:
        return True
    if len(gold) != len(pred):
        return False
    width = len(gold[0])
    if len(pred[0]) != width:
        return False
    if not _quick_check(gold, pred, order_matters):
        return False
    gold_bag = Counter(gold)
    for perm in _permutations(gold, pred):
        permuted = [tuple(row[j] for j in perm) for row in pred]
        if order_matters:
            if list(gold) == permuted:
                return True
        elif Counter(permuted) == gold_bag:
            return True
    return False


def bird_equal(gold: Sequence[Row], pred: Sequence[Row]) -> bool:
    """BIRD execution accuracy: the sets of rows are equal."""
    return set(pred) == set(gold)


def results_equal(gold: Sequence[Row], pred: Sequence[Row], semantics: str,
                  order_matters: bool) -> bool:
    if semantics == "spider":
        return spider_equal(gold, pred, order_matters)
    if semantics == "bird":
        return bird_equal(gold, pred)
    raise ValueError(f"unknown result semantics {semantics!r}; known: {', '.join(SEMANTICS)}")


# ------------------------------------------------------------------------------------------------
# Query text normalisation done before execution (Spider's evaluation does these too)
# ------------------------------------------------------------------------------------------------
_CUR_YEAR = re.compile(r"YEAR\s*\(\s*CURDATE\s*\(\s*\)\s*\)\s*", re.IGNORECASE)


def spider_postprocess(query: str) -> str:
    """Spider's repairs of split comparison operators and MySQL's current year (as 2020)."""
    query = query.replace("> =", ">=").replace("< =", "<=").replace("! =", "!=")
    return _CUR_YEAR.sub("2020", query)


def order_matters(gold_query: str) -> bool:
    """Spider's rule: row order matters when the gold query has ORDER BY."""
    return "order by" in gold_query.lower()


def prepare_gold(gold: str, semantics: str, keep_distinct: bool) -> tuple[str, bool]:
    """(gold query as executed, whether row order matters); ValueError when Spider's
    preprocessing cannot tokenise it (a fault of the item, not of any prediction)."""
    if semantics == "bird":
        return gold, False
    if semantics != "spider":
        raise ValueError(f"unknown result semantics {semantics!r}; known: {', '.join(SEMANTICS)}")
    return _spider_gold(gold, keep_distinct)


def prepare_prediction(pred: str, semantics: str, keep_distinct: bool) -> str:
    """A predicted query as it is executed (ValueError when it cannot be tokenised)."""
    if semantics == "bird":
        return pred
    if semantics != "spider":
        raise ValueError(f"unknown result semantics {semantics!r}; known: {', '.join(SEMANTICS)}")
    pred = spider_postprocess(pred)
    return pred if keep_distinct else remove_distinct(pred)


@functools.lru_cache(maxsize=4096)
def _spider_gold(gold: str, keep_distinct: bool) -> tuple[str, bool]:
    """A gold query as it is executed, and whether its order matters (cached: the G responses of
    a prompt share it)."""
    gold = spider_postprocess(gold)
    if not keep_distinct:
        gold = remove_distinct(gold)
    return gold, order_matters(gold)


def remove_distinct(query: str) -> str:
    """The query without its DISTINCT keywords (Spider's default evaluation drops them from
    both queries). Raises ValueError when the query cannot be tokenised."""
    from sqlglot.errors import TokenError
    from sqlglot.tokens import Tokenizer, TokenType

    try:
        tokens = Tokenizer().tokenize(query)
    except (TokenError, ValueError) as exc:
        raise ValueError(f"query cannot be tokenised: {exc}") from None
    # sqlglot's token positions are absolute character offsets, ``end`` inclusive
    cuts = [(t.start, t.end + 1) for t in tokens if t.token_type == TokenType.DISTINCT]
    out, last = [], 0
    for start, end in cuts:
        out.append(query[last:start])
        last = end
    out.append(query[last:])
    return "".join(out)
