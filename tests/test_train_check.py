"""lab.train_check: what a stored run shows of its weight sync (the GPU check's train stage)."""
import json

from lab import train_check


def _rows(*steps):
    return [{"step": i + 1, **s} for i, s in enumerate(steps)]


UPDATED = {"optimizer_steps": 1.0, "vllm/readback_tensors": 62.0}
NO_SIGNAL = {"optimizer_steps": 0.0, "sync/skipped": 1.0}


def test_a_run_that_updated_synced_and_measured_after_passes():
    found = train_check.findings(_rows({**UPDATED, "rollout/logprob_gap": 1e-5},
                                       {**UPDATED, "rollout/logprob_gap": 2e-5}))
    assert [ok for ok, _ in found] == [True, True, True]
    assert "after an update at steps [2]: 2.00e-05" in found[2][1]


def test_each_missing_piece_is_named():
    # no reward signal: no step, no sync, no gap after one
    assert [ok for ok, _ in train_check.findings(_rows(NO_SIGNAL, NO_SIGNAL))] == \
        [False, False, False]
    # the update came at the last step: nothing was sampled after it
    last = train_check.findings(_rows(NO_SIGNAL, {**UPDATED, "rollout/logprob_gap": 1e-5}))
    assert [ok for ok, _ in last] == [True, True, False] and "run more steps" in last[2][1]
    # an engine that reads nothing back (not vLLM) shows no checked sync
    plain = train_check.findings(_rows({"optimizer_steps": 1.0}, {"rollout/logprob_gap": 0.0}))
    assert [ok for ok, _ in plain] == [True, False, True]


def test_every_update_must_be_read_back_not_only_one():
    unread = {"optimizer_steps": 1.0}  # updated, but no sync was read back after it
    found = train_check.findings(_rows(UPDATED, unread, {**UPDATED,
                                                         "rollout/logprob_gap": 1e-5}))
    assert [ok for ok, _ in found] == [True, False, True]
    assert "updated at steps [2] without a sync read back" in found[1][1]
    skipped = {"optimizer_steps": 1.0, "sync/skipped": 1.0, "vllm/readback_tensors": 62.0}
    assert not train_check.findings(_rows(UPDATED, skipped))[1][0]


def test_the_command_reads_every_seed_under_a_folder(tmp_path, capsys):
    log = tmp_path / "ifeval" / "grpo" / "m" / "smoke" / "seed0.train.jsonl"
    log.parent.mkdir(parents=True)
    log.write_text("".join(json.dumps(r) + "\n" for r in _rows(NO_SIGNAL, NO_SIGNAL)))
    assert train_check.main([str(tmp_path)]) == 1
    assert "FAIL no optimizer step" in capsys.readouterr().out
    log.write_text("".join(json.dumps(r) + "\n" for r in _rows(
        UPDATED, {**UPDATED, "rollout/logprob_gap": 1e-5})))
    assert train_check.main([str(tmp_path)]) == 0
    assert train_check.main([str(tmp_path / "nothing")]) == 1
