"""The GPU engine's life cycle on the CPU: the trainer through the project's vLLM engine over a
strict stand-in for vLLM 0.33's CUDA build (tests/plugins/cuda_standin.py: sleep declared,
generation refused while asleep, level 2 discards the weights, one simulated GPU's memory).

Every scenario here has a step that skips its update (no reward signal) before a generation:
on a GPU the engine slept after generating and nothing woke it, so the next generation (the
next step's, an evaluation during training, the final evaluation) failed."""
import contextlib
import json
from dataclasses import replace
from pathlib import Path
from types import SimpleNamespace

import pytest
import torch

from harness.config import resolve

PLUGINS = Path(__file__).parent / "plugins"
STANDIN = str(PLUGINS / "cuda_standin.py")
QUIET = str(PLUGINS / "quiet_task.py")
TINY = {"model": "tiny-random", "method": "gdpo", "steps": 2, "prompts_per_step": 1,
        "group_size": 4, "max_response_tokens": 10, "eval_max_response_tokens": 6,
        "eval_limit": 3, "lr": 1e-2, "max_prompt_tokens": 4096, "engine": "vllm-cuda-standin",
        "plugins": (QUIET, STANDIN)}


@pytest.fixture(scope="module")
def process_group():
    from harness import engine as eng
    from harness.plugins import load_plugins

    eng.init_single_process()
    load_plugins((QUIET, STANDIN))


def config(tmp_path, **overrides):
    return resolve("smoke", {**TINY, "task": "toy-silent", "results_dir": str(tmp_path),
                             **overrides})


def standin(trainer):
    return trainer.rollout.llm


def rows(path: Path) -> list[dict]:
    return [json.loads(x) for x in path.with_suffix(".train.jsonl").read_text().splitlines()]


# --- the trainer through the stand-in -------------------------------------------------------

@pytest.mark.parametrize("level", [1, 2])
def test_steps_without_signal_then_the_final_evaluation(tmp_path, process_group, level):
    """Two steps without signal (neither syncs), then the final evaluation: each generation
    finds the engine asleep and wakes it (level 2: reloads the checkpoint and the policy)."""
    from harness.trainer import train_worker

    path = train_worker(config(tmp_path, vllm_sleep_level=level))
    log = rows(path)
    assert [r.get("sync/skipped") for r in log] == [1.0, 1.0]
    assert json.loads(path.read_text())["num_eval_items"] == 3


def test_the_engine_sleeps_after_every_generation_and_wakes_before_the_next(tmp_path,
                                                                          process_group):
    from harness.trainer import Trainer

    trainer = Trainer(config(tmp_path, steps=1))
    llm = standin(trainer)
    llm.calls.clear()
    trainer.train(None)
    assert llm.asleep  # the step generated, then the engine slept: the update had the GPU
    trainer.evaluate()
    assert llm.asleep  # the evaluation woke it once for every chunk, then it slept again
    generations = [c for c in llm.calls if c.startswith(("sleep", "wake_up"))]
    assert generations == ["sleep(1)", "wake_up(all)", "sleep(1)"]


def test_a_level_two_wake_loads_the_policy_not_the_checkpoint(tmp_path, process_group):
    """After a level-2 sleep the checkpoint comes back from its files: the next generation
    must load the policy's weights over it (the policy trained since the checkpoint)."""
    from harness.trainer import Trainer

    trainer = Trainer(config(tmp_path, task="toy-quiet", vllm_sleep_level=2, steps=6))
    history = trainer.train(None)
    synced = [h for h in history if not h.get("sync/skipped")]
    skipped = [h for h in history if h.get("sync/skipped")]
    assert synced and skipped, "the seed must give steps of both kinds"
    # every generation after a skipped step loaded the policy again (the last step's is the
    # evaluation's, below)
    assert trainer.rollout.resyncs == sum(bool(h.get("sync/skipped")) for h in history[:-1])
    trainer.evaluate()
    policy = dict(trainer.engine.module.named_parameters())
    # the engine's weights are the policy's (asleep at level 2 they are discarded: wake first)
    trainer.rollout._ready()
    engine = dict(standin(trainer).model.named_parameters())
    assert all(torch.equal(engine[n], policy[n].detach()) for n in policy)
    # and not the checkpoint's: the policy moved
    assert any(not torch.equal(standin(trainer).checkpoint[n], policy[n].detach())
               for n in policy)


def test_an_evaluation_during_training_after_a_step_without_signal(tmp_path, process_group):
    from harness.trainer import Trainer

    trainer = Trainer(config(tmp_path, steps=3, eval_every=1))
    history = trainer.train(None)
    assert all("eval/even_rate" in h for h in history[:2])
    assert all(h.get("sync/skipped") for h in history)


class LocalCheckpointer:
    """``RayCheckpointer``'s interface over a local folder; ``stop_after``: raise once that
    step's checkpoint is written (a killed run)."""

    def __init__(self, root: Path, stop_after: int | None = None) -> None:
        self.root, self.stop_after = root, stop_after

    @contextlib.contextmanager
    def latest(self):
        found = sorted(self.root.glob("step-*"))
        yield found[-1] if found else None

    def save(self, step, write):
        write(self.root / f"step-{step:06d}")
        if step == self.stop_after:
            raise KeyboardInterrupt("killed")


def test_a_resumed_run_whose_steps_skip_then_evaluates(tmp_path, process_group):
    from harness.trainer import Trainer

    c = config(tmp_path, steps=3, save_every=1)
    with pytest.raises(KeyboardInterrupt):
        Trainer(c).train(None, checkpointer=LocalCheckpointer(tmp_path, stop_after=1))
    resumed = Trainer(c)
    history = resumed.train(None, checkpointer=LocalCheckpointer(tmp_path))
    assert [h["step"] for h in history] == [1, 2, 3]
    examples, texts = resumed.evaluate()
    assert len(texts) == 3


@pytest.mark.parametrize("method", ["mrtpo", "tcrm"])
def test_a_method_with_passes_on_steps_with_and_without_signal(tmp_path, process_group, method):
    from harness.trainer import Trainer

    trainer = Trainer(config(tmp_path, task="toy-quiet", method=method, steps=4))
    history = trainer.train(None)
    assert any(h.get("sync/skipped") for h in history)
    assert any(not h.get("sync/skipped") for h in history)
    trainer.evaluate()


@pytest.mark.slow
def test_two_workers_under_zero3_through_ray_train(tmp_path, process_group):
    from harness.backend import start_ray, train_seed

    c = config(tmp_path, workers=2, zero_stage=3, prompts_per_step=2, vllm_sleep_level=2,
               steps=2, eval_every=1)
    start_ray(num_cpus=2)
    path = train_seed(replace(c, seed=0))
    log = rows(path)
    assert [r.get("sync/skipped") for r in log] == [1.0, 1.0]
    assert "eval/even_rate" in log[0]
    assert json.loads(path.read_text())["num_eval_items"] == 3


# --- the stand-in is as strict as the CUDA build ---------------------------------------------

@pytest.fixture(scope="module")
def tiny():
    from harness.models import load_model

    return load_model("tiny-random", seed=0)


def llm_of(tiny, **kw):
    import copy
    import importlib.util

    spec = importlib.util.spec_from_file_location("cuda_standin_module", STANDIN)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module, module.StrictCudaLLM(copy.deepcopy(tiny), 64, **kw)


def request(**kw):
    base = dict(n=1, max_tokens=3, seed=0, stop_token_ids=[], temperature=1.0, top_p=1.0,
                top_k=0, logprobs=0)
    return SimpleNamespace(**{**base, **kw})


def test_the_standin_refuses_what_the_cuda_build_cannot_do(tiny):
    _, llm = llm_of(tiny)
    assert len(llm.generate([{"prompt_token_ids": [1, 2]}], request())[0].outputs) == 1
    llm.sleep(1)
    assert llm.llm_engine.is_sleeping()
    with pytest.raises(RuntimeError, match="would wait forever"):
        llm.generate([{"prompt_token_ids": [1, 2]}], request())
    with pytest.raises(RuntimeError, match="asleep"):
        llm.collective_rpc("reload_weights")
    llm.wake_up(["weights"])
    assert llm.llm_engine.is_sleeping()  # the KV cache and the scheduler still are
    llm.wake_up(["kv_cache"])
    assert not llm.llm_engine.is_sleeping()
    # a reload outside vLLM's config context, as the model runner's own is
    with pytest.raises(AssertionError, match="set_current_vllm_config"):
        llm.worker.model_runner.reload_weights(weights_iterator=iter(()))
    llm.sleep(2)
    llm.wake_up()
    assert all(torch.isnan(p).all() for p in llm.model.parameters())
    with pytest.raises(RuntimeError, match="discarded"):
        llm.generate([{"prompt_token_ids": [1, 2]}], request())
    llm.collective_rpc("reload_weights")
    llm.generate([{"prompt_token_ids": [1, 2]}], request())


def test_the_standin_keeps_one_gpus_memory(tiny):
    module, llm = llm_of(tiny)
    gib = module.GIB
    assert llm.kv_bytes == int(0.9 * module.DEVICE_BYTES) - llm.weights_bytes
    # the share of the card asked for must be free at start
    busy = module.Device(80 * gib, others=lambda: 60 * gib)
    with pytest.raises(ValueError, match="less than desired GPU memory utilization"):
        llm_of(tiny, device=busy, gpu_memory_utilization=0.35)
    # a KV cache too small for one request of max_model_len tokens
    with pytest.raises(ValueError, match="max seq len"):
        llm_of(tiny, kv_cache_memory_bytes=1024)
    # waking maps the memory again: what the training engine holds meanwhile can refuse it
    held = [0]
    device = module.Device(80 * gib, others=lambda: held[0])
    _, llm = llm_of(tiny, device=device, gpu_memory_utilization=0.35)
    llm.sleep(1)
    held[0] = 60 * gib
    with pytest.raises(torch.OutOfMemoryError, match="waking vLLM's kv_cache"):
        llm.wake_up()
    held[0] = 0  # the update's memory released: the same wake fits
    llm.wake_up()
    assert not llm.llm_engine.is_sleeping()


# --- a sync that did not happen fails the run ----------------------------------------------

def test_the_gap_limit_follows_the_runs_first_gap():
    from harness.train.update import check_gap_drift, gap_limit

    assert gap_limit(None, 0.05) == 0.05  # the first step: the absolute tolerance
    assert gap_limit(8.6e-6, 0.05) == 1e-3  # float32 vLLM: the floor
    assert gap_limit(2e-4, 0.05) == pytest.approx(2e-3)  # ten times the run's own gap
    assert gap_limit(0.01, 0.05) == 0.05  # bf16 sampling: the tolerance, as before
    check_gap_drift(9e-6, 8.6e-6, 0.05, 2)
    # the measured missed sync: 1.55e-2 against 8.6e-6 synced, under the tolerance of 0.05
    with pytest.raises(RuntimeError, match="step 2: the rollout engine sampled from another"):
        check_gap_drift(1.55e-2, 8.6e-6, 0.05, 2)
    with pytest.raises(RuntimeError):
        check_gap_drift(float("nan"), 8.6e-6, 0.05, 2)


def test_a_run_whose_sync_never_happens_fails(tmp_path, process_group, monkeypatch):
    """The sync removed after the first (the engine keeps the initial weights): the update
    sees that the engine samples from weights the policy no longer holds."""
    from harness.trainer import Trainer

    trainer = Trainer(config(tmp_path, task="toy-quiet", steps=6, rollout_logprob_tolerance=0.5))
    monkeypatch.setattr(trainer.rollout, "sync", lambda policy: {})
    with pytest.raises(RuntimeError, match="sampled from another policy|sampled with the policy"):
        trainer.train(None)


def test_a_skipped_sync_after_an_update_is_refused_before_sampling(tmp_path, process_group):
    from harness.trainer import Trainer

    trainer = Trainer(config(tmp_path, steps=1))
    trainer.version += 1  # an update the engine never received
    with pytest.raises(RuntimeError, match="weight sync was skipped after an update"):
        trainer.collect(0)


# --- several nodes: the result must land on the driver's disk -------------------------------

def test_rank_zero_refuses_a_results_folder_the_driver_cannot_read(tmp_path):
    """The driver's token, written in the seed's folder before the fit, must be visible where
    rank 0 runs; a node-local folder on another node is refused before any training (the
    two-node Ray test in test_trainer.py passes this check on shared storage)."""
    from harness.backend import check_driver_disk, driver_token

    token = driver_token(tmp_path / "results" / "seed-folder")
    check_driver_disk(token, {"node": "n1"})  # the same disk: nothing to say
    elsewhere = tmp_path / "other-node" / token.name  # what rank 0 sees on another node's disk
    with pytest.raises(RuntimeError, match="not the driver's here on rank 0's node \\(n2\\)"):
        check_driver_disk(elsewhere, {"node": "n2"})


def test_no_committed_seed_would_have_been_stopped_by_the_gap_limit():
    """The limit stops a missed sync, not a run as the committed seeds made it (lean engine,
    bf16 sampling: the absolute tolerance decides; the worst is at 0.69 of it)."""
    from harness.train.update import gap_limit

    root = Path(__file__).resolve().parents[1] / "results"
    checked = 0
    for log in root.rglob("seed*.train.jsonl"):
        gaps = [r["rollout/logprob_gap"] for r in map(json.loads, log.read_text().splitlines())
                if "rollout/logprob_gap" in r]
        for g in gaps[1:]:
            assert g <= gap_limit(gaps[0], 0.05), (log, gaps)
        checked += len(gaps) > 1
    assert checked >= 50
