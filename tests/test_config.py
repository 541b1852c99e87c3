"""Config: presets as data, CLI overrides, help strings on every field."""
import dataclasses

import pytest

from lab import cli
from harness.config import PRESETS, SECTION_TYPES, RunConfig, resolve


def test_every_field_has_help():
    for cls in (*SECTION_TYPES.values(), RunConfig):
        for f in dataclasses.fields(cls):
            if f.name in SECTION_TYPES:
                continue
            assert f.metadata.get("help"), f"{cls.__name__}.{f.name} has no help string"


def test_configs_are_frozen():
    c = resolve("smoke", {})
    with pytest.raises(dataclasses.FrozenInstanceError):
        c.rollout.group_size = 3


def test_preset_then_flags():
    paper = resolve("paper-tool", {})
    assert (paper.rollout.prompts_per_step, paper.rollout.group_size, paper.training.steps) == \
        (512, 4, 100)
    assert paper.training.lr == 1e-6 and paper.rollout.max_response_tokens == 1024
    sql = resolve("paper-sql", {"task": "text2sql"})  # Table 9, text-to-SQL column
    assert (sql.rollout.prompts_per_step, sql.rollout.group_size, sql.training.steps,
            sql.rollout.temperature, sql.rollout.top_k) == (32, 8, 100, 1.1, 0)
    args = cli.build_parser().parse_args(
        ["run", "--preset", "smoke", "--group-size", "8", "--no-use-gpu", "--whiten", "none"])
    c = resolve(args.preset, cli.overrides_from(args))
    assert c.rollout.group_size == 8 and c.method.whiten == "none"
    assert c.rollout.prompts_per_step == PRESETS.get("smoke").overrides["prompts_per_step"]


def test_round_trip_through_dict():
    c = resolve("smoke", {"group_size": 3})
    assert RunConfig.from_dict(c.to_dict()) == c


def test_unknown_field_fails():
    with pytest.raises(ValueError, match="unknown config field"):
        resolve("smoke", {"group_sizes": 3})
