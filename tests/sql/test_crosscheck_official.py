"""Cross-check against the official Spider test-suite execution code (nl2sql360's copy).

nl2sql360 (a test-only dependency, installed without its dependencies) ships
``evaluator/test_suite_sql_eval/exec_eval.py`` and ``parse.py``; they are loaded here by file,
because the package's ``__init__`` imports database drivers the harness does not need.
"""
import importlib.util
import random
import shutil
import sys
import types
from pathlib import Path

import pytest

from tasks.sql import evaluate
from tasks.sql.compare import remove_distinct, spider_equal
from tasks.sql.evaluate import SqlOptions
from tasks.sql.loaders import load_split


def _official():
    spec = importlib.util.find_spec("nl2sql360")
    if spec is None:
        pytest.fail("the cross-check needs nl2sql360 (requirements/no-deps.txt; "
                    "scripts/setup.sh installs it) and sqlparse")
    folder = Path(list(spec.submodule_search_locations)[0]) / "evaluator" / "test_suite_sql_eval"
    package = types.ModuleType("official_eval")
    package.__path__ = [str(folder)]
    sys.modules["official_eval"] = package
    modules = {}
    for name in ("parse", "exec_eval"):
        s = importlib.util.spec_from_file_location(f"official_eval.{name}", folder / f"{name}.py")
        module = importlib.util.module_from_spec(s)
        sys.modules[s.name] = module
        s.loader.exec_module(module)
        modules[name] = module
    return modules["exec_eval"], modules["parse"]


OFFICIAL, OFFICIAL_PARSE = _official()
POOL = [1, 1.0, 2, 2.5, "1", "a", "A", None, 0, ""]


def _mutate(rng, rows):
    rows = [list(r) for r in rows]
    width = len(rows[0]) if rows else 0
    op = rng.randrange(7)
    if op == 0 and width > 1:  # permute columns
        perm = rng.sample(range(width), width)
        rows = [[r[j] for j in perm] for r in rows]
    elif op == 1:
        rng.shuffle(rows)
    elif op == 2 and rows:
        rows[rng.randrange(len(rows))][rng.randrange(width)] = rng.choice(POOL)
    elif op == 3 and rows:
        rows.append(list(rng.choice(rows)))
    elif op == 4 and rows:
        rows.pop(rng.randrange(len(rows)))
    elif op == 5 and width > 1:
        rows = [r[:-1] for r in rows]
    return [tuple(r) for r in rows]


def test_result_equality_agrees_with_official_on_random_pairs():
    rng = random.Random(0)
    agree, trues = 0, 0
    for _ in range(4000):
        width = rng.randint(1, 5)
        gold = [tuple(rng.choice(POOL[:5]) for _ in range(width)) for _ in range(rng.randint(0, 4))]
        pred = gold
        for _ in range(rng.randint(0, 3)):
            pred = _mutate(rng, pred)
        if rng.random() < 0.1 and width > 1:  # pred with two equal-multiset columns swapped
            pred = [r[1::-1] + r[2:] for r in pred]
        for ordered in (False, True):
            ours = spider_equal(gold, pred, ordered)
            theirs = OFFICIAL.result_eq(gold, pred, order_matters=ordered)
            assert ours == theirs, (gold, pred, ordered)
            agree += 1
            trues += ours
    assert trues > 500  # the generator produces plenty of equal pairs too


@pytest.mark.parametrize("query", [
    "SELECT DISTINCT name FROM singer",
    "SELECT count(DISTINCT country) FROM singer WHERE name != 'distinct'",
    "select distinct T1.name from owner as T1 join pet as T2 on T1.owner_id = T2.owner_id",
    'SELECT "distinct" FROM t',
])
def test_distinct_removal_executes_like_official(query):
    ours = remove_distinct(query)
    theirs = OFFICIAL_PARSE.remove_distinct(query)
    assert ours.split() == theirs.split()


PAIRS = [  # (gold, prediction) on the pets database
    ("SELECT count(*) FROM pet WHERE kind = 'dog'", "SELECT count(pet_id) FROM pet WHERE kind='dog'"),
    ("SELECT count(*) FROM pet WHERE kind = 'dog'", "SELECT count(*) FROM pet"),
    ("SELECT kind, weight FROM pet ORDER BY weight", "SELECT weight, kind FROM pet ORDER BY weight"),
    ("SELECT kind, weight FROM pet ORDER BY weight", "SELECT weight, kind FROM pet ORDER BY kind"),
    ("SELECT kind FROM pet", "SELECT DISTINCT kind FROM pet"),
    ("SELECT DISTINCT kind FROM pet", "SELECT kind FROM pet"),
    ("SELECT name FROM owner WHERE owner_id NOT IN (SELECT owner_id FROM pet)",
     "SELECT name FROM owner EXCEPT SELECT T1.name FROM owner AS T1 JOIN pet AS T2 "
     "ON T1.owner_id = T2.owner_id"),
    ("SELECT avg(weight) FROM pet", "SELECT sum(weight) / count(*) FROM pet"),
    ("SELECT max(weight) FROM pet", "SELECT weight FROM pet ORDER BY weight DESC LIMIT 1"),
    ("SELECT weight FROM pet WHERE weight > = 3", "SELECT weight FROM pet WHERE weight >= 3"),
    ("SELECT kind FROM pet", "SELECT kind FROM pets"),
    ("SELECT kind FROM pet", "DELETE FROM pet"),
]


def test_execution_verdicts_agree_with_official(tmp_path, data_dir):
    # The official code opens databases read-write: give it a copy.
    copy = tmp_path / "spider"
    shutil.copytree(data_dir / "spider", copy)
    db = copy / "database" / "pets" / "pets.sqlite"
    ex = [e for e in load_split(data_dir, "spider-dev", use_test_suite=False)
          if e.metadata["db_id"] == "pets"][0]
    from dataclasses import replace
    examples = [replace(ex, reference=g) for g, _ in PAIRS]
    responses = [f"<answer>```sql\n{p}\n```</answer>" for _, p in PAIRS]
    ours = [r[2] for r in evaluate.reward_rows(examples, responses, SqlOptions())]
    theirs = [float(OFFICIAL.eval_exec_match(str(db), p, g, plug_value=False, keep_distinct=False,
                                             progress_bar_for_each_datapoint=False))
              for g, p in PAIRS]
    assert ours == theirs
    assert 0 < sum(ours) < len(ours)
