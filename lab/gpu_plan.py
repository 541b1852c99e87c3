"""``python -m lab.gpu_plan``: the per-GPU plan of every paper preset, on this machine's card.

The GPU check's ``plan`` stage: before anything trains, each paper preset's per-GPU memory
(``harness.rollouts.vllm_plan``) on the card this machine has (CUDA's total memory of device
0), or on the 80 GiB card the presets are sized for where there is no GPU. Exits 1 when a
preset's plan does not fit, naming the setting to change.
"""
from __future__ import annotations

import argparse
import sys


def card_bytes() -> tuple[int, str]:
    """The card to plan for: this machine's first GPU, else the presets' 80 GiB."""
    from harness.rollouts import vllm_plan

    try:
        import torch

        if torch.cuda.is_available():
            _, total = torch.cuda.mem_get_info(0)
            return total, torch.cuda.get_device_name(0)
    except Exception:  # no CUDA runtime: plan for the presets' card
        pass
    return vllm_plan.CARD_BYTES, "the presets' 80 GiB card (no GPU here)"


def main(argv: list[str] | None = None) -> int:
    from harness import config as cfg
    from harness.presets import PRESETS
    from harness.rollouts import vllm_plan

    parser = argparse.ArgumentParser(prog="python -m lab.gpu_plan", description=__doc__)
    parser.add_argument("presets", nargs="*", help="presets to plan (default: every paper-* "
                                                  "preset with a model)")
    args = parser.parse_args(argv)
    names = args.presets or [n for n in PRESETS.names()
                             if n.startswith("paper-") and n.count("-") >= 2]
    card, what = card_bytes()
    print(f"card: {what}, {card / vllm_plan.GIB:.1f} GiB")
    ok = True
    for name in names:
        config = cfg.resolve(name, {})
        found = vllm_plan.for_config(config, card)
        if found is None:
            print(f"{name}: no shape known for {config.model.model}")
            ok = False
            continue
        plan, source = found
        print(f"{name}:")
        for line in vllm_plan.lines(plan, source):
            print("  " + line)
        for problem in vllm_plan.problems(plan):
            print(f"  DOES NOT FIT: {problem}")
            ok = False
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
