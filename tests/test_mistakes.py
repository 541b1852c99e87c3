"""The mistakes table: each mistake a user made goes through `run --dry-run`, the real `run` and
`api.run`; all three refuse it with the same exit status and the same problems (the one
resolution, harness.run, and the one check, harness.preflight), before Ray starts and without
writing a file."""
import json
from pathlib import Path

import pytest

from harness import api
from harness.preflight import PreflightError
from lab import cli

NOWHERE = "/nonexistent-harness-folder"
REFERENCE = Path(__file__).resolve().parent.parent / "results"  # the committed results
PLUGINS = Path(__file__).parent / "plugins"


def _setup(tmp: Path) -> dict[str, str]:
    """Files and folders the mistakes name (none of them is an output)."""
    (tmp / "a-file").write_text("x")
    (tmp / "spider-only" / "spider").mkdir(parents=True)
    (tmp / "empty-model").mkdir()
    (tmp / "syntax.py").write_text("import methods\nx = (\n")
    (tmp / "builtin.py").write_text("import methods\nimport methods.gdpo\n"
                                    "methods.METHODS.add('gdpo', methods.METHODS.get('gdpo'))\n")
    (tmp / "broken_import.py").write_text("import zz_not_installed_anywhere\n")
    for name, files in (("no-weights", {"config.json": "{}", "tokenizer.json": "{}"}),
                        ("no-tokenizer", {"config.json": "{}", "model.safetensors": ""}),
                        ("truncated-config", {"config.json": '{"a": 1,'}),
                        ("sql-value-model", {"config.json": json.dumps(
                            {"tcrm_rewards": ["format", "executable", "execution"]}),
                            "model.safetensors": "", "tokenizer.json": "{}"})):
        (tmp / name).mkdir()
        for file, text in files.items():
            (tmp / name / file).write_text(text)
    (tmp / "lr_option.py").write_text(
        "from dataclasses import dataclass, replace\nimport methods\n"
        "from methods.base import option\n\n\n@dataclass(frozen=True)\nclass LrOptions:\n"
        "    lr: float = option(0.1, 'a learning rate of its own')\n\n"
        "    def problems(self):\n        return []\n\n\n"
        "gdpo = methods.METHODS.get('gdpo')\nmethods.METHODS.add('lr-credit', replace(\n"
        "    gdpo, name='lr-credit', options=gdpo.options + (LrOptions,)))\n")
    (tmp / "raising_check.py").write_text(
        "from dataclasses import dataclass, replace\nimport methods\n"
        "from methods.base import option\n\n\n@dataclass(frozen=True)\n"
        "class RaisingOptions:\n    raising_x: float = option(0.1, 'x')\n\n"
        "    def problems(self):\n        raise RuntimeError('a bug in the check')\n\n\n"
        "gdpo = methods.METHODS.get('gdpo')\nmethods.METHODS.add('raising-credit', replace(\n"
        "    gdpo, name='raising-credit', options=gdpo.options + (RaisingOptions,)))\n")
    other = tmp / "ckpt" / "bfcl" / "gdpo" / "smollm2-135m-instruct" / "smoke" / "seed0"
    other.mkdir(parents=True)  # checkpoints another setting wrote
    (other / "settings.json").write_text('{"config_hash": "0000", "workers": 1}')
    return {"CKPT": str(tmp / "ckpt"), "FILE": str(tmp / "a-file"), "SPIDER": str(tmp / "spider-only"),
            "EMPTY": str(tmp / "empty-model"), "SYNTAX": str(tmp / "syntax.py"),
            "BUILTIN": str(tmp / "builtin.py"), "BROKEN": str(tmp / "broken_import.py"),
            "PROC": "/proc/harness-x/runs", "NOWEIGHTS": str(tmp / "no-weights"),
            "NOTOKENIZER": str(tmp / "no-tokenizer"), "BADCONFIG": str(tmp / "truncated-config"),
            "SQLVALUE": str(tmp / "sql-value-model"), "LRPLUGIN": str(tmp / "lr_option.py"),
            "RAISING": str(tmp / "raising_check.py"), "REFERENCE": str(REFERENCE)}


# (what, extra flags after --method M --task T, method, task, expected text of a problem)
MISTAKES = [
    ("data dir that does not exist", ["--data-dir", NOWHERE], "gdpo", "bfcl", "does not exist"),
    ("data dir that is a file", ["--data-dir", "FILE"], "gdpo", "bfcl", "is a file"),
    ("data dir without the task's set", ["--data-dir", "SPIDER"], "gdpo", "bfcl",
     "does not hold it"),
    ("data dir without HIR", ["--data-dir", "SPIDER"], "gdpo", "ifeval", "hir"),
    ("paper preset without its data", ["--preset", "paper-tool", "--no-use-gpu"], "gdpo", "bfcl",
     "preset 'paper-tool' trains on it"),
    ("paper preset on the embedded model", ["--preset", "paper-tool", "--no-use-gpu"], "gdpo",
     "bfcl", "trains a paper model"),
    ("paper preset on a generator", ["--preset", "paper-sql", "--no-use-gpu", "--train-data",
                                     "spider-mini-train"], "gdpo", "spider-mini",
     "published data only"),
    ("paper model preset without --model-dir", ["--preset", "paper-tool-3b", "--no-use-gpu",
                                                "--engine", "hf"], "gdpo", "bfcl",
     "neither an embedded model nor a folder"),
    ("empty model folder", ["--model", "EMPTY"], "gdpo", "bfcl", "holds no config.json"),
    ("warm-start batch not divisible by workers", ["--warm-start", "--workers", "3",
                                                   "--prompts-per-step", "3"], "gdpo", "bfcl",
     "warm_start_batch (4) is not divisible by workers (3)"),
    ("warm start from a set without answers", ["--warm-start"], "gdpo", "ifeval",
     "no reference answers"),
    ("results under /proc", ["--results-dir", "PROC"], "gdpo", "bfcl", "cannot be written"),
    ("results dir that is a file", ["--results-dir", "FILE"], "gdpo", "bfcl",
     "exists and is not a folder"),
    ("checkpoints under a file", ["--checkpoint-dir", "FILE/sub"], "gdpo", "bfcl", "is a file"),
    ("misspelt method", [], "gdop", "bfcl", "Did you mean 'gdpo'"),
    ("method in capitals", [], "GDPO", "bfcl", "Did you mean 'gdpo'"),
    ("a family for a task", [], "gdpo", "spider", "'spider-dev'"),
    ("a plugin's method without --plugin", [], "my-credit", "bfcl", "--plugin FILE.py"),
    ("unknown engine", ["--engine", "vlm"], "gdpo", "bfcl", "unknown rollout engine 'vlm'"),
    ("a group of one", ["--group-size", "1"], "gdpo", "bfcl", "group of 1"),
    ("negative steps", ["--steps", "-1"], "gdpo", "bfcl", "steps is -1"),
    ("zero learning rate", ["--lr", "0"], "gdpo", "bfcl", "positive --lr"),
    ("another method's option", ["--mrtpo-beta", "0.25"], "gdpo", "bfcl",
     "is an option of mrtpo"),
    ("another family's option", ["--sql-timeout", "2"], "gdpo", "bfcl",
     "is an option of the sql tasks"),
    ("evaluation past the last step", ["--eval-every", "9"], "gdpo", "bfcl",
     "would never happen"),
    ("prompts not divisible by workers", ["--prompts-per-step", "3", "--workers", "2"], "gdpo",
     "bfcl", "not divisible"),
    ("top-p above one", ["--top-p", "1.5"], "gdpo", "bfcl", "top_p is 1.5"),
    ("zero temperature", ["--temperature", "0"], "gdpo", "bfcl", "positive --temperature"),
    ("ZeRO stage 5", ["--zero-stage", "5"], "gdpo", "bfcl", "zero_stage is 5"),
    ("unknown loss aggregation", ["--loss-agg", "mean"], "gdpo", "bfcl", "unknown loss_agg"),
    ("unknown KL estimator", ["--kl-type", "k9"], "gdpo", "bfcl", "unknown kl_type"),
    ("negative evaluation subset", ["--eval-limit", "-1"], "gdpo", "bfcl", "eval_limit is -1"),
    ("another family evaluated", ["--also-evaluate", "ifeval"], "gdpo", "bfcl",
     "evaluate it in a run of its own"),
    ("plugin with a syntax error", ["--plugin", "SYNTAX"], "gdpo", "bfcl", "syntax.py:2: syntax"),
    ("plugin reusing a built-in name", ["--plugin", "BUILTIN"], "gdpo", "bfcl",
     "method 'gdpo' is built-in"),
    ("plugin importing what is not installed", ["--plugin", "BROKEN"], "gdpo", "bfcl",
     "broken_import.py:1: ModuleNotFoundError"),
    ("checkpoints of other settings", ["--checkpoint-dir", "CKPT"], "gdpo", "bfcl",
     "holds checkpoints of other settings"),
    ("plugin file that does not exist", ["--plugin", NOWHERE + ".py"], "gdpo", "bfcl",
     "the file does not exist"),
    ("infinite learning rate", ["--lr", "inf"], "gdpo", "bfcl", "lr is inf; give a finite"),
    ("NaN KL coefficient", ["--kl-coef", "nan"], "gdpo", "bfcl", "kl_coef is nan"),
    ("NaN clip epsilon", ["--clip-eps-low", "nan"], "gdpo", "bfcl", "clip_eps_low is nan"),
    ("infinite temperature", ["--temperature", "inf"], "gdpo", "bfcl", "temperature is inf"),
    ("model folder without weights", ["--model", "NOWEIGHTS"], "gdpo", "bfcl",
     "holds no weights"),
    ("model folder without a tokenizer", ["--model", "NOTOKENIZER"], "gdpo", "bfcl",
     "holds no tokenizer"),
    ("truncated config.json", ["--model", "BADCONFIG"], "gdpo", "bfcl",
     "config.json: not valid JSON (line 1"),
    ("a value model of other rewards", ["--tcrm-model", "SQLVALUE"], "tcrm", "bfcl",
     "a TCRM model of the rewards ['format', 'executable', 'execution']"),
    ("a value model saved where nothing can be written", ["--tcrm-save", "/proc/harness-x/v"],
     "tcrm", "bfcl", "--tcrm-save /proc/harness-x/v: cannot be written"),
    ("a judge for a task that calls none", ["--judge", "http://localhost:1/v1"], "gdpo",
     "ifeval", "--judge is read by no part of task 'ifeval'"),
    ("a method composed with itself", [], "mrtpo+mrtpo", "bfcl",
     "names 'mrtpo' more than once"),
    ("results into the committed reference results", ["--results-dir", "REFERENCE"], "gdpo",
     "bfcl", "holds the reference results committed with the project"),
    ("an empty results folder", ["--results-dir", ""], "gdpo", "bfcl",
     "--results-dir is empty"),
    ("a plugin option named as a setting", ["--plugin", "LRPLUGIN"], "lr-credit", "bfcl",
     "config field 'lr' appears in two sections (training and method)"),
    ("a plugin whose check raises", ["--plugin", "RAISING"], "raising-credit", "bfcl",
     "raised RuntimeError: a bug in the check"),
]


def _flags_to_api(flags: list[str]) -> dict:
    """The API keywords of these CLI flags (``--no-x`` -> x=False, ``--x`` alone -> True)."""
    from lab.flags import overrides_from

    args, unknown = cli.build_parser().parse_known_args(
        ["run", "--method", "m", "--task", "t", *flags])
    assert not unknown, unknown
    out = overrides_from(args)
    out.pop("method"), out.pop("task")
    if args.preset != "smoke":
        out["preset"] = args.preset
    return out


def _problems(text: str) -> list[str]:
    return [line[4:] for line in text.splitlines() if line.startswith("  - ")]


def _one(err: str) -> str:
    """A one-line error without its ``error: `` prefix."""
    return err.strip().removeprefix("error: ")


@pytest.fixture
def guarded(tmp_path, monkeypatch):
    """Ray must not start; the outputs go under tmp_path/out, which must stay absent."""
    import ray

    import harness.backend as backend

    monkeypatch.setattr(ray, "init", lambda *a, **k: pytest.fail("Ray started"))
    monkeypatch.setattr(backend, "start_ray", lambda *a, **k: pytest.fail("Ray started"))
    monkeypatch.chdir(tmp_path)  # a relative default output would land here
    return tmp_path


@pytest.mark.parametrize("what,flags,method,task,expected", MISTAKES,
                         ids=[m[0] for m in MISTAKES])
def test_a_mistake_is_refused_alike_by_the_dry_run_the_run_and_the_api(
        guarded, capsys, what, flags, method, task, expected):
    paths = _setup(guarded)
    flags = [next((v + f[len(k):] for k, v in paths.items() if f.startswith(k)), f)
             for f in flags]
    out = guarded / "out"
    outputs = ["--results-dir", str(out / "runs"), "--checkpoint-dir", str(out / "ckpt")]
    if "--results-dir" in flags:
        outputs = outputs[2:]
    if "--checkpoint-dir" in flags:
        outputs = outputs[:2]
    before = sorted(p.relative_to(guarded) for p in guarded.rglob("*"))
    argv = ["run", "--method", method, "--task", task, *flags, *outputs]

    dry_rc = cli.main([*argv, "--dry-run"])
    dry = capsys.readouterr()
    run_rc = cli.main(argv)
    real = capsys.readouterr()
    assert dry_rc == run_rc == 2, (dry.out[-2000:], dry.err, real.err)
    dry_problems = _problems(dry.out) or _problems(dry.err) or [_one(dry.err)]
    run_problems = _problems(real.err) or [_one(real.err)]
    assert dry_problems == run_problems
    assert any(expected in p for p in run_problems), run_problems
    assert "Traceback" not in real.err and "checks: passed" not in dry.out

    keywords = _flags_to_api([*flags, *outputs])
    preset = keywords.pop("preset", "smoke")
    with pytest.raises(PreflightError) as err:
        api.run(method=method, task=task, preset=preset, **keywords)
    assert [p.replace("these settings cannot run:", "").strip() for p in err.value.problems] \
        == [p.strip() for p in run_problems]
    assert not out.exists()
    assert sorted(p.relative_to(guarded) for p in guarded.rglob("*")) == before


def test_the_api_checks_values_and_names_when_the_config_is_made(tmp_path):
    with pytest.raises(PreflightError) as err:
        api.config(method="gdop", task="bfcl", lr="abc", results_dir=str(tmp_path))
    assert err.value.problems[0].startswith("lr is 'abc' (a str); give a float")
    assert "Did you mean 'gdpo'" in err.value.problems[1]
    with pytest.raises(PreflightError, match="steps is -1"):
        api.config(method="gdpo", task="bfcl", steps=-1, results_dir=str(tmp_path))
    with pytest.raises(PreflightError, match="did you mean 'save_every'"):
        api.config(method="gdpo", task="bfcl", save_everyy=2, results_dir=str(tmp_path))
    # TRL's names are the same fields
    c = api.config(method="gdpo", task="bfcl", num_generations=8, learning_rate=2e-6,
                   max_completion_length=64, results_dir=str(tmp_path))
    assert (c.rollout.group_size, c.training.lr, c.rollout.max_response_tokens) == (8, 2e-6, 64)
    assert not any(tmp_path.iterdir())


@pytest.mark.model
def test_a_stored_seed_of_other_code_is_named_and_not_pooled_silently(tmp_path, capsys,
                                                                      monkeypatch):
    """A seed stored by other code (an edited plugin, say) is not pooled with new seeds of this
    tree: the dry run and the run refuse alike, --rerun-stale or --allow-mixed-code decide."""
    import ray
    from dataclasses import replace

    from harness.results import atomic_write_json, make_record, result_path

    monkeypatch.setattr(ray, "init", lambda *a, **k: pytest.fail("Ray started"))
    c = api.config(method="gdpo", task="bfcl", results_dir=str(tmp_path))
    for seed in (0, 1):
        record = make_record(replace(c, seed=seed), {"non_live_overall": 10.0}, train={},
                             wall_seconds=1.0)
        if seed == 0:
            record["provenance"] = {**record["provenance"], "fingerprint": "0" * 16}
        atomic_write_json(result_path(replace(c, seed=seed)), record)
    argv = ["run", "--method", "gdpo", "--task", "bfcl", "--results-dir", str(tmp_path)]
    # both stored: one is of other code, and the summary pools them only when asked
    assert cli.main([*argv, "--seeds", "2", "--dry-run"]) == 2
    dry = capsys.readouterr().out
    assert cli.main([*argv, "--seeds", "2"]) == 2
    err = capsys.readouterr().err
    assert "2 code versions" in dry and "2 code versions" in err and "--rerun-stale" in err
    assert cli.main([*argv, "--seeds", "2", "--allow-mixed-code"]) == 0
    shown = capsys.readouterr().out
    assert "made by other code (fingerprint 0000000000000000)" in shown
    assert "mean" in shown  # the table, footnoted with the commits
    # seed 0 alone is one code version: shown, with the note that other code made it
    assert cli.main([*argv, "--seed-list", "0"]) == 0
    assert "made by other code" in capsys.readouterr().out
    assert json.loads(result_path(c).read_text())["provenance"]["fingerprint"] == "0" * 16


def test_ctrl_c_is_one_line_naming_the_last_checkpoint_and_the_same_command(guarded, capsys,
                                                                             monkeypatch):
    import harness.backend as backend

    monkeypatch.setattr(backend, "start_ray", lambda *a, **k: None)

    def interrupted(config, run):  # Ctrl-C after the checkpoint of step 2
        (run.checkpoints / "train" / "step-000002").mkdir(parents=True)
        raise KeyboardInterrupt

    monkeypatch.setattr(backend, "train_seed", interrupted)
    argv = ["run", "--method", "gdpo", "--task", "bfcl", "--save-every", "2",
            "--results-dir", str(guarded / "runs"), "--checkpoint-dir", str(guarded / "ck")]
    assert cli.main(argv) == 130
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "Traceback" not in err[0]
    assert err[0].startswith("interrupted: seed 0 has checkpoints of steps [2] in ")
    assert "the same command resumes from the latest complete one" in err[0]

    monkeypatch.setattr(backend, "train_seed", lambda config, run: (_ for _ in ()).throw(
        KeyboardInterrupt))
    assert cli.main([*argv[:5], "--results-dir", str(guarded / "other")]) == 130
    err = capsys.readouterr().err.strip()
    assert "stored nothing and no checkpoint is saved without --save-every N" in err
    assert "the same command starts it again" in err


def test_a_run_says_before_and_after_when_nothing_may_train(guarded, capsys, tmp_path):
    from harness import run as runs
    from lab.summary import signal_note

    argv = ["run", "--task", "bfcl", "--results-dir", str(guarded / "runs"), "--dry-run"]
    assert cli.main([*argv, "--method", "gdpo"]) == 0
    assert "note: preset smoke starts from the untrained model" in capsys.readouterr().out
    assert cli.main([*argv, "--method", "gdpo", "--preset", "smoke-learn"]) == 0
    assert "untrained" not in capsys.readouterr().out
    assert cli.main(["run", "--method", "gdpo", "--task", "ifeval", *argv[3:]]) == 0
    assert "untrained" not in capsys.readouterr().out  # no warm start exists for if-synth

    run = runs.resolve("smoke", {"method": "gdpo", "task": "bfcl",
                                 "results_dir": str(tmp_path / "r")})
    seed_run = run.seed_runs()[0]
    seed_run.train_log.parent.mkdir(parents=True)
    rows = [{"step": 1, "update_rows": 0.0, "loss": 0.0}, {"step": 2, "update_rows": 0.0}]
    seed_run.train_log.write_text("".join(json.dumps(r) + "\n" for r in rows))
    note = signal_note(run.config, [seed_run])
    assert note.startswith("no reward signal: nothing was trained") and "all 2 steps" in note
    assert "smoke-learn preset warm-starts" in note
    rows[1]["update_rows"] = 8.0
    seed_run.train_log.write_text("".join(json.dumps(r) + "\n" for r in rows))
    assert signal_note(run.config, [seed_run]) == ""


# (what, reproduce's flags after its table name, expected text)
REPRODUCE_MISTAKES = [
    ("results under /proc", ["--results-dir", "/proc/harness-x/runs"], "cannot be written"),
    ("renders under /proc", ["--output-dir", "/proc/harness-x/out"], "cannot be written"),
    ("an empty results folder", ["--results-dir", ""], "--results-dir is empty"),
    ("no seeds", ["--seeds", "-1"], "give 1 or more seeds"),
    ("a paper preset this machine cannot run", ["--preset", "paper"],
     "the paper setting needs, before anything starts"),
]


@pytest.mark.parametrize("what,flags,expected", REPRODUCE_MISTAKES,
                         ids=[m[0] for m in REPRODUCE_MISTAKES])
def test_reproduce_refuses_a_mistake_alike_in_its_dry_run_and_its_run(guarded, capsys, what,
                                                                      flags, expected):
    base = ["reproduce", "table3", "--results-dir", str(guarded / "out" / "runs"),
            "--output-dir", str(guarded / "out")]
    for flag in flags:  # a flag given replaces the base's
        if flag.startswith("--") and flag in base:
            j = base.index(flag)
            base = base[:j] + base[j + 2:]
    before = sorted(p.relative_to(guarded) for p in guarded.rglob("*"))
    said = []
    for extra in (["--dry-run"], []):
        try:
            rc = cli.main([*base, *flags, *extra])
        except SystemExit as exc:  # argparse's refusal of a value
            rc = exc.code
        got = capsys.readouterr()
        said.append(got.out + got.err)
        assert rc == 2, (extra, got.out[-1500:], got.err[-1500:])
        assert expected in got.out + got.err, (extra, got.out[-1500:], got.err[-1500:])
        assert "Traceback" not in got.err
    assert sorted(p.relative_to(guarded) for p in guarded.rglob("*")) == before


def test_reproduce_refuses_a_dry_run_that_renders(guarded, capsys):
    rc = cli.main(["reproduce", "table3", "--dry-run", "--render-only",
                   "--results-dir", str(guarded / "r"), "--output-dir", str(guarded / "o")])
    assert rc == 2
    err = capsys.readouterr().err
    assert "--dry-run and --render-only: choose one" in err and "Traceback" not in err
    assert not (guarded / "o").exists()


def test_the_api_names_seeds_given_as_text(guarded):
    for seeds in ("0,2", [0, "1"], 0, [1, 1]):
        with pytest.raises(ValueError, match=r"give a count >= 1 .* or distinct integer seeds"):
            api.run(method="gdpo", task="bfcl", seeds=seeds,
                    results_dir=str(guarded / "out" / "runs"))
    assert not (guarded / "out").exists()
