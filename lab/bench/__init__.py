"""``python -m harness bench``: measurements, not tests. Each prints what it ran; the suite's
newer benches also write a report with the machine under ``--output-dir``: ``runs/bench/`` by
default (not tracked), ``--output-dir results/bench`` to refresh the committed reports.

- ``bench step`` (``step.py``): one training step split into phases for several methods on the
  same batch, with ratios to GDPO.
- ``bench vs-trl`` (``vs_trl.py``): the same GRPO training here and in TRL's GRPOTrainer, each
  side in fresh processes, with the phase split.
- ``bench signal`` (``signal.py``): format rate and groups with reward signal at RL's first
  step, for the base model, its warm start, or one worked example in the prompt.
- ``bench rollout`` (``rollout.py``): generated tokens/s of HF generate vs batch size.
- ``bench replay`` (``replay.py``): replay time vs one forward at several K, and replay memory
  vs response length at a 152k vocabulary.
- ``bench steps`` (``stored.py``): step-time ratios of stored runs.
- ``bench launch`` (``launch.py``): a real run's start-up and the CPU share of Ray's control
  processes while it trains.
- ``bench sql`` (``sql.py``): text-to-SQL reward throughput vs worker processes.
- ``bench localisation`` (``localisation.py``, the command in ``localisation_report.py``): where
  each credit source puts each reward's credit on one batch or several seeds' (span ratio,
  top-10 % share, prompt-resampled intervals; shuffled, placebo, order, cross and positional
  controls); no training.
- ``bench credit`` (``credit.py``, the command in ``credit_report.py``): ground-truth credit
  on tool-calling responses built to fail format, correctness or both at known tokens: each
  credit source's mass on the deciding tokens and precision at k, prompt-resampled intervals;
  no training.
- ``bench p2t-exact`` (``p2t_exact.py``): P2T's first-order influences against exact token
  replacement by the null token, per null and reward.
- ``bench tcrm`` (``tcrm.py``): a TCRM value model trained offline on a task's rollouts against
  Bradley-Terry alone: held-out pairwise accuracy at the final and the middle token; saves the
  model as an HF folder.
"""
from __future__ import annotations


def add_parser(sub) -> None:
    from lab.bench import (credit_policy, launch, localisation_report, p2t_exact, replay, rollout,
                           signal, sql, step, stored, tcrm, vs_trl)

    bench = sub.add_parser("bench", help="measurements (step split, replay memory, ...)")
    which = bench.add_subparsers(dest="bench", required=True)
    step.add_parser(which)
    vs_trl.add_parser(which)
    signal.add_parser(which)
    rollout.add_parser(which)
    replay.add_parser(which)
    launch.add_parser(which)
    localisation_report.add_parser(which)
    credit_policy.add_parser(which)  # bench credit: constructed or policy responses
    p2t_exact.add_parser(which)
    tcrm.add_parser(which)
    steps = which.add_parser("steps", help="mean step time of stored runs and ratios to the first")
    steps.add_argument("runs", nargs="+", help="result folders (…/<setting>/)")
    steps.set_defaults(bench_fn=stored.bench_steps)
    sq = which.add_parser("sql", help="text-to-SQL reward throughput on 1, 2, ... processes")
    sq.add_argument("--task", default="spider-mini", help="a text-to-SQL task")
    sq.add_argument("--data-dir", default=None)
    sq.add_argument("--responses", type=int, default=4000)
    sq.add_argument("--processes", default="1,2", help="comma-separated process counts")
    sq.set_defaults(bench_fn=sql.bench_sql)
