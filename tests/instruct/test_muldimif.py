"""MulDimIF: the published test format, scored through a checkout's own evaluation code (here a
small stand-in checkout with the same module layout and module-level imports: evaluation.py
prints on import and imports scripts/ beside it and utils.data_utils from Code/, which imports
openai and pandas)."""
import json

import pytest

from tasks import TASKS
from tasks.instruct import muldimif

EVALUATION_PY = '''
import sys
print("Python version:", sys.version)  # NOQA
from scripts import *
from utils.data_utils import *

class_mapping = {"Length_Words": Length_Words(), "Content_Keywords": Content_Keywords(),
                 "Length_Words: At most": Length_Words()}

def get_instance(class_name):
    cls = class_mapping.get(class_name)
    if cls:
        return cls
    raise ValueError(f"Class '{class_name}' not found")
'''
DATA_UTILS_PY = '''
import json
import pandas as pd
from openai import OpenAI


def load_json(path):
    with open(path) as f:
        return json.load(f)
'''
SCRIPTS_INIT = '''
import re

class Length_Words:
    def check(self, constraint, text):
        limit = int(re.search(r"(\\d+)", constraint).group(1))
        return len(text.split()) <= limit

class Content_Keywords:
    def check(self, constraint, text):
        if "explode" in constraint:
            raise ValueError("checker bug on this text")
        word = re.search(r"'(\\w+)'", constraint).group(1)
        return word in text
'''
ROWS = [
    {"id": "a", "conversations": [{"role": "user", "content": "Describe rain."}],
     "constraints": [["Length", "Words", "At most 5 words"],
                     ["Content", "Keywords", "Must include 'wet'"]],
     "contraint_pattern": "Listing", "difficulty": "Level I"},
    {"id": "b", "conversations": [{"role": "user", "content": "Describe snow."}],
     "constraints": [["Length", "Words: At most", "At most 3 words"]],
     "contraint_pattern": "Example", "difficulty": "Level II"},
    {"id": "c", "conversations": [{"role": "user", "content": "Describe fog."}],
     "constraints": [["Content", "Keywords", "explode 'x'"]],
     "contraint_pattern": "Listing", "difficulty": "Level I"},
]


@pytest.fixture()
def data_dir(tmp_path):
    root = tmp_path / "muldimif"
    (root / "Data").mkdir(parents=True)
    (root / "Data" / "test.json").write_text(json.dumps(ROWS))
    scripts = root / "Code" / "evaluation" / "scripts"
    scripts.mkdir(parents=True)
    (root / "Code" / "evaluation" / "evaluation.py").write_text(EVALUATION_PY)
    (scripts / "__init__.py").write_text(SCRIPTS_INIT)
    (root / "Code" / "utils").mkdir()
    (root / "Code" / "utils" / "data_utils.py").write_text(DATA_UTILS_PY)
    muldimif._official.cache_clear()  # each test's checkout is imported afresh
    return tmp_path


def test_scores_through_the_checkout_code(data_dir):
    task = TASKS.get("muldimif")
    examples = task.load_eval(data_dir)
    assert [e.id for e in examples] == ["muldimif-a", "muldimif-b", "muldimif-c"]
    scored = task.score(examples, ["it is wet", "cold white flakes everywhere", "grey"])
    m = scored["metrics"]
    # a: both pass; b: 4 words > 3 fails; c: the checker raises -> failed, counted
    assert [i["judges"] for i in scored["items"]] == [[1, 1], [0], [0]]
    assert m["accuracy"] == pytest.approx(100 / 3)
    assert m["macro"] == pytest.approx(100 / 3)
    assert m["micro"] == pytest.approx(100 * 2 / 4)
    assert m["checker_errors"] == 1
    assert m["accuracy/Listing"] == 50.0 and m["accuracy/Level II"] == 0.0


def test_missing_checkout_and_bad_rows(tmp_path, data_dir):
    with pytest.raises(FileNotFoundError, match="test.json"):
        muldimif.load(tmp_path / "nowhere")
    (data_dir / "muldimif" / "Data" / "test.json").write_text(json.dumps(
        [{"id": "x", "conversations": [{"role": "user", "content": "q"}],
          "constraints": [["Length", "Words"]]}]))
    with pytest.raises(ValueError, match=r"test.json: item 0: 'constraints'"):
        muldimif.load(data_dir)


def test_a_missing_dependency_is_named_before_training(data_dir):
    from harness import checks, launch
    from harness.run import of_config
    from harness.config import RunConfig, TaskConfig

    config = RunConfig(task=TaskConfig(task="muldimif", data_dir=str(data_dir),
                                       train_data="if-synth"))
    assert checks.task_problems(of_config(config).task, config.task.data_dir) == []
    launch.validate(of_config(config))  # passes: the checkout imports
    utils = data_dir / "muldimif" / "Code" / "utils" / "data_utils.py"
    utils.write_text("import zz_not_installed_anywhere\n" + DATA_UTILS_PY)
    muldimif._official.cache_clear()
    with pytest.raises(ValueError) as err:
        launch.validate(of_config(config))
    message = str(err.value)
    assert "imports 'zz_not_installed_anywhere', which is not installed" in message
    assert "'.[muldimif]'" in message and "task 'muldimif'" in message
