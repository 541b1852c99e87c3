"""What an unknown flag or name is told: other tools' flag names (TRL, transformers,
lm-eval-harness) point at flags that exist, no abbreviation is guessed, registry names are
suggested in any case and by family; `--help` defaults and `sft --help`'s shorter list."""
import re

import pytest

from common.registry import close_names
from lab import cli
from lab.flags import FOREIGN_FLAGS, _default_text, foreign_hint, unknown_flag_hint


def subparser(name: str):
    return cli.build_parser()._subparsers._group_actions[0].choices[name]


@pytest.fixture(scope="module")
def run_parser():
    return subparser("run")


def flags_of(parser) -> set[str]:
    return {s for a in parser._actions for s in a.option_strings}


def test_every_foreign_flag_points_at_flags_run_has(run_parser):
    known = flags_of(run_parser)
    for name, (target, why) in FOREIGN_FLAGS.items():
        assert name == name.lower().replace("_", "-") and name.startswith("--"), name
        assert name not in known, f"{name} is a flag of run: its hint would never be shown"
        assert target or why, name
        named = ([target.split()[0]] if target else []) + re.findall(r"--[a-z][a-z0-9-]*", why)
        missing = [f for f in named if f not in known]
        assert not missing, f"{name}'s hint names {missing}, which run does not have"


@pytest.mark.parametrize("flag, right, wrong", [
    ("--save-steps", "use --save-every", "--max-steps"),
    ("--save_steps", "use --save-every", "--max-steps"),
    ("--eval-steps", "use --eval-every", "--eval-seed"),
    ("--use-vllm", "use --engine vllm", "--use-gpu"),
    ("--use_vllm", "use --engine vllm", "--use-gpu"),
    ("--logging-steps", "every step is logged", "--steps"),
    ("--scale-rewards", "--method grpo", "--seeds"),
    ("--warmup-steps", "learning rate is constant", "did you mean"),
    ("--seed", "use --seed-list", "did you mean"),
    ("--SAVE-STEPS", "use --save-every", "--max-steps"),
])
def test_the_reported_mistakes_get_the_right_hint(run_parser, flag, right, wrong):
    hint = unknown_flag_hint(flag, run_parser)
    assert right in hint and wrong not in hint, hint


@pytest.mark.parametrize("flag, target", [
    ("--num_fewshot", ""), ("--batch_size", "--eval-batch-size"), ("--limit", "--eval-limit"),
    ("--tasks", "--task"), ("--model_args", "--model"), ("--output_path", "--results-dir"),
    ("--log_samples", ""), ("--device", "--use-gpu"),
    ("--gen_kwargs", "--eval-max-response-tokens"),
    ("--apply_chat_template", ""), ("--seed", "--seed-list"),
])
def test_lm_eval_flags_as_lm_eval_spells_them(flag, target):
    hint = foreign_hint(flag)
    assert hint.startswith(f"{flag}: ")
    assert hint.startswith(f"{flag}: use {target}") if target else ": use " not in hint, hint


def test_own_flags_are_suggested_in_any_case_and_spelling(run_parser):
    assert "did you mean --group-size?" in unknown_flag_hint("--Group-Size", run_parser)
    assert "did you mean --group-size?" in unknown_flag_hint("--group_size=4", run_parser)
    assert "did you mean --group-size" in unknown_flag_hint("--gruop-size", run_parser)
    assert "--eval-limit" in unknown_flag_hint("--eval", run_parser)  # the flags it begins


def test_no_flag_is_abbreviated(capsys):
    # argparse's prefix matching made --seed "ambiguous" and --max-step mean --max-steps
    assert cli.main(["run", "--method", "grpo", "--task", "bfcl", "--seed", "3"]) == 2
    err = capsys.readouterr().err
    assert "ambiguous" not in err and "--seed: use --seed-list K" in err
    assert cli.main(["run", "--method", "grpo", "--task", "bfcl", "--max-step", "3"]) == 2
    assert "--max-step: unknown; did you mean --max-steps?" in capsys.readouterr().err
    assert cli.main(["run", "--method", "grpo", "--task", "bfcl", "--save-steps", "5"]) == 2
    err = capsys.readouterr().err
    assert "use --save-every" in err and "--max-steps" not in err


def test_registry_names_are_suggested_in_any_case_and_by_family():
    import methods
    from tasks import TASKS

    assert "Did you mean 'gdpo'?" in methods.METHODS.unknown_message("GDPO")
    assert "Did you mean 'gdpo'?" in methods.METHODS.unknown_message("gdpoo")
    message = TASKS.unknown_message("spider")
    hint = message.split("Known")[0]
    assert "'spider-dev'" in hint and "'spider-test'" in hint and "one of" in hint
    assert "Did you mean 'bfcl-live'?" in TASKS.unknown_message("bfcl-lvie")
    assert close_names("smok", ["smoke", "smoke-learn", "smoke-learn-30"]) == ["smoke"]


def test_an_unset_default_differs_from_a_value_named_none(capsys):
    assert _default_text(None) != _default_text("none") and _default_text("") == "unset"
    assert _default_text("\n\n") == repr("\n\n") and _default_text(False) == "off"
    with pytest.raises(SystemExit):
        cli.main(["run", "--help"])
    out = capsys.readouterr().out
    whiten = out[out.index("--whiten"):out.index("--cort-clip")]
    assert whiten.split()[-1] == "[unset]", whiten


def test_sft_help_lists_what_the_warm_start_reads(capsys):
    with pytest.raises(SystemExit):
        cli.main(["sft", "--help"])
    out = capsys.readouterr().out
    assert len(out.splitlines()) < 120
    for flag in ("--warm-start-steps", "--task", "--model", "--data-dir", "--workers",
                 "--group-size", "--probe"):
        assert flag in out, flag
    for flag in ("--mrtpo-beta", "--steps", "--lr", "--kl-coef", "--eval-every", "--engine",
                 "--save-every", "--method"):
        assert re.search(rf"^\s+{flag}\b", out, re.M) is None, flag


def test_sft_still_takes_a_runs_flags():
    # the message of a missing warm start says: make it with `sft` and the same flags
    from lab.flags import overrides_from

    args = cli.build_parser().parse_args(["sft", "--task", "bfcl", "--method", "mrtpo",
                                          "--mrtpo-beta", "0.3", "--steps", "7",
                                          "--warm-start-steps", "3"])
    given = {"task": "bfcl", "method": "mrtpo", "mrtpo_beta": 0.3, "steps": 7,
             "warm_start_steps": 3}
    assert overrides_from(args).items() >= given.items()
