"""A plugin is as first-class as a built-in: its options are flags with help, `list` and
`score` see its methods and tasks, a result stores the run's own method options only, and the
code fingerprint covers the plugin file, so two versions of it never pool."""
import json
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from harness import provenance
from lab import cli
from harness.config import resolve
from harness.run import of_config

ROOT = Path(__file__).resolve().parent.parent
TAIL = str(ROOT / "tests" / "plugins" / "tail_method.py")
TOY = str(ROOT / "tests" / "plugins" / "toy_task.py")
TINY = ["--model", "tiny-random", "--task", "toy", "--plugin", TOY, "--prompts-per-step", "2",
        "--group-size", "4", "--max-response-tokens", "12", "--eval-max-response-tokens", "8",
        "--eval-limit", "4", "--lr", "0.01", "--max-prompt-tokens", "4096", "--steps", "1"]


def test_a_plugins_options_are_flags_with_help_and_list_shows_its_method(capsys):
    with pytest.raises(SystemExit):
        cli.main(["run", "--help", "--plugin", TAIL])
    out = capsys.readouterr().out
    assert "--tail-tokens N" in out and "last N tokens" in out and "[2]" in out
    assert cli.main(["list", "--plugin", TAIL]) == 0
    assert "tail " in capsys.readouterr().out


def test_a_plugins_option_is_set_checked_and_owned(tmp_path, capsys):
    argv = ["run", "--plugin", TAIL, *TINY, "--results-dir", str(tmp_path), "--dry-run"]
    assert cli.main([*argv, "--method", "tail", "--tail-tokens", "4"]) == 0
    assert "* tail_tokens                  4" in capsys.readouterr().out
    assert cli.main([*argv, "--method", "tail", "--tail-tokens", "0"]) == 2
    assert "tail_tokens must be 1 or more" in capsys.readouterr().out
    assert cli.main([*argv, "--method", "gdpo", "--tail-tokens", "4"]) == 2
    assert "--tail-tokens is an option of tail, not of method 'gdpo'" in capsys.readouterr().out


def test_a_result_stores_its_own_methods_options_only():
    from harness.plugins import load_plugins
    from harness.results import stored_config

    load_plugins((TAIL,))
    stored = stored_config(resolve("smoke", {"method": "tail", "tail_tokens": 4,
                                             "plugins": (TAIL,)}))["method"]
    assert stored["method"] == "tail" and stored["tail_tokens"] == 4
    assert "whiten" in stored and "conventions" in stored  # the options every method reads
    assert "mrtpo_beta" not in stored and "verpo_lambda" not in stored
    assert "mrtpo_beta" in stored_config(resolve("smoke", {"method": "mrtpo"}))["method"]


def test_the_fingerprint_covers_the_plugin_file(tmp_path):
    copy = tmp_path / "tail_copy.py"
    shutil.copy(TAIL, copy)
    before = provenance.fingerprint(plugins=(str(copy),))
    assert before != provenance.fingerprint()
    copy.write_text(copy.read_text().replace("option(2,", "option(3,"))
    assert provenance.fingerprint(plugins=(str(copy),)) != before


@pytest.mark.slow
def test_two_versions_of_a_plugin_run_through_the_cli_do_not_pool(tmp_path):
    """Through Ray: a plugin method with its option set trains, stores only its options, and a
    seed made after an edit of the plugin file is other code to `compare`."""
    plugin = tmp_path / "tail_method.py"
    shutil.copy(TAIL, plugin)
    results = tmp_path / "runs"

    def run(*extra):
        cmd = [sys.executable, "-m", "harness", "run", "--plugin", str(plugin), "--method",
               "tail", "--tail-tokens", "4", *TINY, "--results-dir", str(results),
               "--checkpoint-dir", str(tmp_path / "ckpt"), "--report-to", "none", *extra]
        done = subprocess.run(cmd, cwd=ROOT, capture_output=True, text=True, timeout=600)
        assert done.returncode == 0, done.stderr[-3000:]

    run("--seed-list", "0")
    (seed0,) = results.rglob("seed0.json")
    data = json.loads(seed0.read_text())
    assert data["config"]["method"]["tail_tokens"] == 4
    assert "mrtpo_beta" not in data["config"]["method"]
    assert data["config"]["plugins"] == [str(plugin), TOY]
    assert data["provenance"]["fingerprint"] == provenance.fingerprint(plugins=(str(plugin), TOY))
    plugin.write_text(plugin.read_text() + "\n# an edit that changes no number is other code\n")
    run("--seed-list", "1")
    rc = cli.main(["compare", str(seed0.parent)])
    assert rc == 2  # the two seeds are not pooled into one cell


def test_sequence_whitening_of_a_non_uniform_allocation_is_refused():
    """Sequence whitening reads each response's first token as its one advantage: under the
    tail allocation that token has 0, so the advantages of the last tokens were divided by the
    spread of zeros (65 vs 2.1 in a review); refused, for plugins and built-ins alike."""
    import torch

    import methods
    from harness import checks
    from harness.plugins import load_plugins
    from methods.batch import RolloutBatch

    load_plugins((TAIL,))
    for method in ("tail", "mrtpo", "cort", "verpo"):
        for opts in ({"whiten": "sequence"}, {"conventions": "trl"}):
            problems = checks.settings_problems(
                of_config(resolve("smoke", {"method": method, **opts})))
            assert any("sequence whitening reads one advantage per response" in p
                       for p in problems), (method, opts)
        assert not any("sequence whitening" in p for p in checks.settings_problems(of_config(
            resolve("smoke", {"method": method, "conventions": "trl", "whiten": "token"}))))
    for method in ("gdpo", "grpo", "saw"):  # one value per response: sequence is right
        assert not any("sequence whitening" in p for p in checks.settings_problems(of_config(
            resolve("smoke", {"method": method, "whiten": "sequence"}))))
    batch = RolloutBatch(rewards=torch.tensor([[1.0], [0.0], [0.5], [0.2]]),
                         reward_names=("r",), reward_bounds=((0.0, 1.0),),
                         group=torch.tensor([0, 0, 1, 1]), response_mask=torch.ones(4, 5))
    with pytest.raises(ValueError, match="sequence whitening"):
        methods.advantages("tail", batch, whiten="sequence")
    raw = methods.advantages("tail", batch, whiten="none", tail_tokens=2)
    assert torch.all(raw[:, :3] == 0) and torch.all(raw[:, 3:].abs() > 0)


ENGINE = str(ROOT / "tests" / "plugins" / "toy_engine.py")


@pytest.mark.model
def test_a_plugin_engine_is_chosen_checked_and_builds(tmp_path, capsys):
    from harness.config import resolve
    from harness.models import load_model, load_tokenizer
    from harness.plugins import load_plugins
    from harness.rollouts import ENGINES
    from tasks import TASKS

    argv = ["run", "--plugin", ENGINE, "--method", "gdpo", "--engine", "hf-unshared", *TINY,
            "--results-dir", str(tmp_path), "--dry-run"]
    assert cli.main(argv) == 0, capsys.readouterr().out
    assert cli.main([*argv, "--use-gpu"]) == 2
    assert "--engine hf-unshared samples on the CPU" in capsys.readouterr().out
    assert cli.main([*argv, "--no-hf-share-prefill"]) == 2  # an option of the hf engine
    assert "an option of --engine hf, not of --engine hf-unshared" in capsys.readouterr().out
    load_plugins((ENGINE, TOY))
    config = resolve("smoke", {"engine": "hf-unshared", "model": "tiny-random"})
    tok = load_tokenizer("tiny-random")
    engine = ENGINES.get("hf-unshared").build(config, "tiny-random", tok,
                                               lambda: load_model("tiny-random"))
    rollout = engine.generate(TASKS.get("toy").load_eval(None)[:2], n=2, max_new_tokens=4)
    assert rollout.response_ids.shape[0] == 4


def test_a_plugin_task_is_listed_and_scored(tmp_path, capsys):
    assert cli.main(["list", "--plugin", TOY]) == 0
    assert "toy " in capsys.readouterr().out
    from harness.plugins import load_plugins
    from tasks import TASKS

    load_plugins((TOY,))
    items = TASKS.get("toy").load_eval(None)
    preds = tmp_path / "p.jsonl"
    # even-length answers for the first half, odd for the rest
    preds.write_text("".join(json.dumps({"id": ex.id, "response": "ab" if i < 6 else "abc"})
                             + "\n" for i, ex in enumerate(items)))
    out = tmp_path / "s.json"
    assert cli.main(["score", "--plugin", TOY, "--task", "toy", "--predictions", str(preds),
                     "--output", str(out)]) == 0
    assert json.loads(out.read_text())["metrics"]["even_rate"] == pytest.approx(50.0)
