"""Rubric judges for AdvancedIF: the official prompts, a pluggable model, the official parsing.

The judge prompts are Meta's (AdvancedIF's ``judge.py``, CC-BY-NC): they are not copied into this
project but read from the user's copy of that file, without running it (its string constants
``JUDGE_PROMPT``, ``SYSTEM_STEER_JUDGE_PROMPT`` and ``STEER_FEW_SHOT_EXAMPLES`` are taken from
its syntax tree, ``inspect.cleandoc`` applied where the file applies it). They are filled in as
the official judges fill them:

* complex / carried-context items: the conversation before the last user turn as
  ``"{role} [{turn}]: {content}"`` lines (the turn counts assistant messages), the last user
  turn, the response, and the rubrics as ``json.dumps(rubrics, indent=4)``;
* system-steerability items: the system prompt instead of the conversation, and the few-shot
  examples.

The judge answers JSON; ``SATISFIED_ALL_REQUIREMENTS`` (default "NO") decides the item; a rubric
answer passes when it contains "yes". The micro rubric rate counts every answer the judge
returns; the per-item rate counts the answers ``question_<i>`` with i up to the number of
rubrics, over the number of rubrics. A judge call that fails or answers something that is not
JSON fails the item.

Judges: :class:`HttpJudge` (an OpenAI-compatible ``/chat/completions`` endpoint, e.g. a vLLM
server, with ``response_format: json_object``) and :class:`LocalJudge` (a local Hugging Face
model, greedy).
"""
from __future__ import annotations

import ast
import inspect
import json
import urllib.error
import urllib.request
from dataclasses import dataclass
from pathlib import Path
from typing import Protocol, Sequence

TEMPLATE_NAMES = ("JUDGE_PROMPT", "SYSTEM_STEER_JUDGE_PROMPT", "STEER_FEW_SHOT_EXAMPLES")
STEER_BENCHMARK = "if_system_steerability_oss"


def load_templates(judge_py: Path) -> dict[str, str]:
    """The official prompt templates from AdvancedIF's ``judge.py`` (parsed, never executed)."""
    if not judge_py.is_file():
        raise FileNotFoundError(
            f"AdvancedIF's judge prompts are read from its release's judge.py, expected at "
            f"{judge_py} (copy judge.py from the AdvancedIF repository there)")
    tree = ast.parse(judge_py.read_text(encoding="utf-8"), filename=str(judge_py))
    found: dict[str, str] = {}
    for node in tree.body:
        target = node.targets[0] if isinstance(node, ast.Assign) and len(node.targets) == 1 \
            else node.target if isinstance(node, ast.AnnAssign) else None
        if not isinstance(target, ast.Name) or target.id not in TEMPLATE_NAMES:
            continue
        value = node.value
        if isinstance(value, ast.Constant) and isinstance(value.value, str):
            found[target.id] = value.value
        elif isinstance(value, ast.Call) and getattr(value.func, "attr", getattr(value.func, "id", "")) \
                == "cleandoc" and len(value.args) == 1 and isinstance(value.args[0], ast.Constant):
            found[target.id] = inspect.cleandoc(value.args[0].value)
    missing = [n for n in TEMPLATE_NAMES if n not in found]
    if missing:
        raise ValueError(f"{judge_py}: no string constant(s) {', '.join(missing)}; is this "
                         "AdvancedIF's judge.py?")
    return found


def _conversation_lines(messages: Sequence[dict]) -> str:
    lines, turn = [], 1
    for m in messages[:-1]:  # the last user turn is shown on its own
        lines.append(f"{m['role']} [{turn}]: {m['content']}")
        if m["role"] == "assistant":
            turn += 1
    return "\n".join(lines)


def compose(templates: dict[str, str], benchmark: str, messages: Sequence[dict], response: str,
            rubrics: Sequence[str]) -> str:
    """The judge prompt for one response (see the module docstring)."""
    last_user = next((m["content"] for m in reversed(messages) if m["role"] == "user"), "")
    rubrics_text = json.dumps(list(rubrics), indent=4)
    if benchmark == STEER_BENCHMARK:
        system = messages[0]["content"] if messages and messages[0]["role"] == "system" else ""
        return templates["SYSTEM_STEER_JUDGE_PROMPT"].format(
            few_shot_examples=templates["STEER_FEW_SHOT_EXAMPLES"], system_prompt=system,
            user_prompt_last_turn=last_user, response_text=response, rubrics_text=rubrics_text)
    return templates["JUDGE_PROMPT"].format(
        full_conversation=_conversation_lines(messages), user_prompt_last_turn=last_user,
        response_text=response, rubrics_text=rubrics_text)


@dataclass(frozen=True)
class Verdict:
    success: bool  # the judge answered parseable JSON
    satisfied: bool  # SATISFIED_ALL_REQUIREMENTS is "yes"
    answers_yes: int  # rubric answers containing "yes", all keys (micro rubric pass rate)
    answers: int  # rubric answers returned, all keys
    item_rate: float  # passed question_<i> (i <= number of rubrics) / number of rubrics
    error: str = ""


def parse(raw: str, rubrics: Sequence[str]) -> Verdict:
    """The official reading of a judge answer."""
    try:
        data = json.loads(raw)
        checks = data.get("rubrics_check", {})
        satisfied = str(data.get("SATISFIED_ALL_REQUIREMENTS", "NO")).lower() == "yes"
        if not isinstance(checks, dict):
            raise ValueError("rubrics_check is not an object")
    except (json.JSONDecodeError, AttributeError, ValueError) as exc:
        return Verdict(False, False, 0, 0, 0.0, f"unparseable judge answer: {exc}")
    item_yes = 0
    for key, value in checks.items():
        try:
            if int(str(key).split("_")[1]) - 1 >= len(rubrics):
                continue
        except (IndexError, ValueError):
            continue
        item_yes += "yes" in str(value).lower()
    all_yes = sum("yes" in str(v).lower() for v in checks.values())
    return Verdict(True, satisfied, all_yes, len(checks), item_yes / max(len(rubrics), 1))


class Judge(Protocol):
    def __call__(self, prompts: Sequence[str]) -> list[str]: ...


class HttpJudge:
    """An OpenAI-compatible chat-completions endpoint (``base_url`` ends before
    ``/chat/completions``, e.g. ``http://localhost:8000/v1``)."""

    def __init__(self, base_url: str, model: str, api_key: str = "", max_tokens: int = 32768,
                 timeout: float = 600.0) -> None:
        self.url = base_url.rstrip("/") + "/chat/completions"
        self.model, self.api_key, self.max_tokens, self.timeout = model, api_key, max_tokens, timeout

    def one(self, prompt: str) -> str:
        body = json.dumps({"model": self.model, "messages": [{"role": "user", "content": prompt}],
                           "max_completion_tokens": self.max_tokens,
                           "response_format": {"type": "json_object"}}).encode()
        headers = {"Content-Type": "application/json"}
        if self.api_key:
            headers["Authorization"] = f"Bearer {self.api_key}"
        request = urllib.request.Request(self.url, data=body, headers=headers, method="POST")
        with urllib.request.urlopen(request, timeout=self.timeout) as reply:
            content = json.loads(reply.read())["choices"][0]["message"]["content"]
        if content is None:
            raise ValueError("the judge returned no content")
        return content

    def __call__(self, prompts: Sequence[str]) -> list[str]:
        out = []
        for prompt in prompts:
            try:
                out.append(self.one(prompt))
            except (urllib.error.URLError, OSError, KeyError, IndexError, ValueError) as exc:
                out.append(f"<judge call failed: {type(exc).__name__}: {exc}>")
        return out


class LocalJudge:
    """A local Hugging Face chat model as the judge (greedy decoding)."""

    def __init__(self, model: str, max_tokens: int = 2048) -> None:
        from transformers import AutoModelForCausalLM, AutoTokenizer

        # a folder (make_judge checks): nothing is downloaded
        self.tokenizer = AutoTokenizer.from_pretrained(model, local_files_only=True)
        self.model = AutoModelForCausalLM.from_pretrained(model, local_files_only=True).eval()
        self.max_tokens = max_tokens

    def __call__(self, prompts: Sequence[str]) -> list[str]:
        import torch

        out = []
        for prompt in prompts:
            ids = self.tokenizer.apply_chat_template([{"role": "user", "content": prompt}],
                                                     add_generation_prompt=True, tokenize=True,
                                                     return_dict=True, return_tensors="pt")
            with torch.no_grad():
                gen = self.model.generate(**ids, max_new_tokens=self.max_tokens, do_sample=False)
            out.append(self.tokenizer.decode(gen[0, ids["input_ids"].shape[1]:],
                                             skip_special_tokens=True))
        return out


def make_judge(spec: str, model: str, api_key: str, max_tokens: int) -> Judge:
    """``spec``: an http(s) URL (OpenAI-compatible endpoint) or a local model folder."""
    if not spec:
        raise ValueError("AdvancedIF needs a judge: --judge http://HOST:PORT/v1 (an "
                         "OpenAI-compatible server, e.g. vLLM) or --judge MODEL_FOLDER")
    if spec.startswith(("http://", "https://")):
        return HttpJudge(spec, model, api_key, max_tokens)
    if not Path(spec).is_dir():
        raise FileNotFoundError(f"--judge {spec}: neither an http(s) URL nor a model folder")
    return LocalJudge(spec, max_tokens)
