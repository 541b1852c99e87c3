"""`harness explain`: a self-contained HTML page and a PNG of one response's token credit."""

import pytest

from lab import cli
from harness.config import resolve
from harness.results import atomic_write_json, make_record, result_path


def test_explain_writes_html_and_png(tmp_path, capsys):
    config = resolve("smoke", {"model": "tiny-random", "results_dir": str(tmp_path), "method": "mrtpo",
                               "max_response_tokens": 6, "group_size": 3})
    run = result_path(config)
    atomic_write_json(run, make_record(config, {}, train={}, wall_seconds=0.0))
    out = tmp_path / "explain"
    assert cli.main(["explain", "--run", str(run), "--example", "2", "--response", "1",
                     "--output", str(out)]) == 0
    page = next(out.glob("*.html")).read_text()
    assert page.startswith("<!doctype html>") and "<script" not in page  # self-contained
    for row in ("GDPO", "MRTPO", "replay[format]", "replay[correctness]"):
        assert row in page
    assert page.count("class='tok'") >= 4 * 1  # every row shows the response's tokens
    png = next(out.glob("*.png")).read_bytes()
    assert png[:8] == b"\x89PNG\r\n\x1a\n" and len(png) > 1000
    assert cli.main(["explain", "--run", str(run), "--example", "2", "--response", "5",
                     "--output", str(out)]) == 2
    assert "--response must be in [0, 3)" in capsys.readouterr().err


def test_explain_leaves_out_constraint_slots_the_prompt_does_not_have(tmp_path):
    # if-synth prompts carry 1-8 constraints; the task has a reward slot per possible one
    config = resolve("smoke", {"model": "tiny-random", "results_dir": str(tmp_path),
                               "method": "mrtpo", "task": "ifbench", "max_response_tokens": 6,
                               "group_size": 2})
    run = result_path(config)
    atomic_write_json(run, make_record(config, {}, train={}, wall_seconds=0.0))
    out = tmp_path / "explain"
    assert cli.main(["explain", "--run", str(run), "--example", "0", "--output", str(out)]) == 0
    page = next(out.glob("*.html")).read_text()
    assert "replay[c1]" in page and "replay[c16]" not in page


def test_explain_where_picks_the_first_response_with_those_rewards(tmp_path, capsys):
    from lab.explain import parse_where

    assert parse_where("format=1, execution=0") == {"format": 1.0, "execution": 0.0}
    for bad in ("format", "format=x", "=1"):
        with pytest.raises(ValueError, match="reward=value"):
            parse_where(bad)
    config = resolve("smoke", {"model": "tiny-random", "results_dir": str(tmp_path),
                               "method": "mrtpo", "max_response_tokens": 4, "group_size": 2})
    run = result_path(config)
    atomic_write_json(run, make_record(config, {}, train={}, wall_seconds=0.0))
    out = tmp_path / "explain"
    # the 2-layer random model never writes a tool call: format 0 on the first prompt tried
    assert cli.main(["explain", "--run", str(run), "--example", "3", "--where", "format=0",
                     "--output", str(out)]) == 0
    assert "prompt 3, response 0 has format=0" in capsys.readouterr().out
    assert cli.main(["explain", "--run", str(run), "--example", "0", "--where", "fmt=1",
                     "--output", str(out)]) == 2
    assert "not rewards of" in capsys.readouterr().err
    assert cli.main(["explain", "--run", str(run), "--example", "0", "--where", "format",
                     "--output", str(out)]) == 2
