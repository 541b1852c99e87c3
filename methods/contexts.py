"""Replay contexts: an Example's chat messages with exactly some rewards' verifier texts.

Token-level methods re-read a response under other contexts: :func:`replay_messages` removes
the in-prompt texts of the rewards left out and appends the privileged texts of the rewards
included (to the last user turn).
"""
from __future__ import annotations

from tasks.base import Example


def privileged_block(reward: str, text: str) -> str:
    return f"\n\n[Reference for the {reward} check]\n{text}"


def replay_messages(example: Example, include: set[str] | frozenset[str]) -> list[dict]:
    """The example's messages with exactly the verifier texts of ``include``.

    In-prompt texts of rewards not in ``include`` are cut from the message that holds them (a
    text that is not found verbatim is an error: the replay would silently change nothing);
    privileged texts of rewards in ``include`` are appended to the last user message, in the
    order the Example declares them. Texts shared by several rewards are handled once.
    """
    known = {info.reward for info in example.verifier_info}
    unknown = set(include) - known
    if unknown:
        raise KeyError(f"example {example.id!r} has no verifier information for {sorted(unknown)}")
    messages = [dict(m) for m in example.messages]
    kept_texts = {i.text for i in example.verifier_info if i.reward in include}
    done: set[str] = set()
    for info in example.verifier_info:
        if info.privileged or info.reward in include or info.text in kept_texts \
                or info.text in done:
            continue
        for m in messages:
            if info.text in m["content"]:
                m["content"] = m["content"].replace(info.text, "", 1)
                break
        else:
            raise ValueError(f"example {example.id!r}: the {info.reward!r} verifier text is "
                             "marked in-prompt but does not occur verbatim in any message")
        done.add(info.text)
    extra = ""
    for info in example.verifier_info:
        if info.privileged and info.reward in include and info.text not in done:
            extra += privileged_block(info.reward, info.text)
            done.add(info.text)
    if extra:
        last_user = max(i for i, m in enumerate(messages) if m["role"] == "user")
        messages[last_user]["content"] += extra
    return messages


def known_rewards(example: Example) -> frozenset:
    return frozenset(info.reward for info in example.verifier_info)
