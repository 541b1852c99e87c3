"""Config: presets as data, CLI overrides, help strings on every field."""
import dataclasses

import pytest

from lab import cli
from harness.config import PRESETS, SECTION_TYPES, RunConfig, resolve


def test_no_preset_sets_a_methods_option():
    """A preset is a setting for every method: the options of a method other than the
    preset's own are compared with their defaults (harness.results.preset_value), which is
    exact only while no preset sets one."""
    from harness.config import all_fields

    method_options = {n for n, (section, _) in all_fields().items()
                      if section == "method" and n != "method"}
    assert "mrtpo_beta" in method_options  # the check can fail: it sees the options
    for name in PRESETS.names():
        assert not set(PRESETS.get(name).overrides) & method_options, name


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
    assert c.rollout.group_size == 8 and c.method.options.whiten == "none"
    assert c.rollout.prompts_per_step == PRESETS.get("smoke").overrides["prompts_per_step"]


def test_round_trip_through_dict():
    c = resolve("smoke", {"group_size": 3})
    assert RunConfig.from_dict(c.to_dict()) == c


def test_unknown_field_fails():
    with pytest.raises(ValueError, match="unknown config field"):
        resolve("smoke", {"group_sizes": 3})


def test_a_renamed_option_is_read_under_its_former_name_for_one_release():
    """MRTPO's replay options carry the method's name now; flags, overrides and stored
    configs under the former names still mean them, and folder names do not move."""
    import hashlib
    import json

    import pytest

    from harness.results import setting_name
    from harness.results import config_hash

    new = resolve("smoke", {"method": "mrtpo", "mrtpo_replay": "joint"})
    assert resolve("smoke", {"method": "mrtpo", "replay": "joint"}) == new
    args = cli.build_parser().parse_args(["run", "--replay", "joint", "--shuffle-relevance"])
    assert args.mrtpo_replay == "joint" and args.mrtpo_shuffle_relevance is True
    # a config stored before the rename reads back as the same setting, with its own hash
    old = new.to_dict()
    old["method"] = {("replay" if k == "mrtpo_replay" else k): v
                     for k, v in old["method"].items()}
    assert RunConfig.from_dict(old) == new
    assert config_hash(old) != config_hash(new.to_dict())  # hashed under the names it holds
    # the folder a run made before the rename is found again: hashed under the former name
    assert setting_name(new) == "smoke-" + hashlib.sha256(
        json.dumps({"replay": "joint"}, sort_keys=True).encode()).hexdigest()[:8]
    with pytest.raises(ValueError, match="name one field"):
        resolve("smoke", {"replay": "joint", "mrtpo_replay": "single"})
