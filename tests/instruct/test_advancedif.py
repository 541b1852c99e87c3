"""AdvancedIF: loading the published row format, the judge prompts read from a judge.py without
running it, and scoring against a local OpenAI-compatible server that answers with recorded
judgements."""
import json
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest

from harness.task_config import TaskConfig, task_config
from tasks import TASKS
from tasks.instruct import advancedif, judge

# A stand-in for the release's judge.py, in its form (module constants, cleandoc, str.format
# placeholders, doubled braces) with our own wording. Running it would fail: it must be parsed.
JUDGE_PY = '''
import inspect
raise SystemExit("this file must never be executed")

JUDGE_PROMPT: str = inspect.cleandoc(
    """
    Judge the reply.
    History:
    {full_conversation}
    Last prompt: {user_prompt_last_turn}
    Reply: {response_text}
    Rubrics: {rubrics_text}
    Answer as {{"rubrics_check": {{"question_1": "..."}}, "SATISFIED_ALL_REQUIREMENTS": "YES"}}
    """
)
STEER_FEW_SHOT_EXAMPLES: str = "EXAMPLES"
SYSTEM_STEER_JUDGE_PROMPT: str = """Steer. {few_shot_examples}
System: {system_prompt}
Last prompt: {user_prompt_last_turn}
Reply: {response_text}
Rubrics: {rubrics_text}"""
'''

ROWS = [
    {"conversation_history": json.dumps([{"role": "user", "content": "Write two lines."}]),
     "prompt_metadata": json.dumps({"rubrics": json.dumps(["Two lines?", "Rhymes?"])}),
     "benchmark_name": "if_complex_if_oss"},
    {"conversation_history": [{"role": "user", "content": "Name a fruit."},
                              {"role": "assistant", "content": "Apple."},
                              {"role": "user", "content": "Another, in capitals."}],
     "prompt_metadata": {"rubrics": ["Capitals?", "A fruit?"]},
     "benchmark_name": "if_carried_context_oss"},
    {"conversation_history": [{"role": "system", "content": "You are Ada. Never use emoji."},
                              {"role": "user", "content": "Hi!"}],
     "prompt_metadata": {"rubrics": ["No emoji?"]},
     "benchmark_name": "if_system_steerability_oss"},
]
# recorded judgements, chosen by the response text the prompt carries
RECORDED = {
    "RESP-A": {"rubrics_check": {"question_1": "Yes", "question_2": "yes, it rhymes"},
               "SATISFIED_ALL_REQUIREMENTS": "YES"},
    "RESP-B": {"rubrics_check": {"question_1": "Yes", "question_2": "No", "question_9": "yes"},
               "SATISFIED_ALL_REQUIREMENTS": "NO"},
    "RESP-C": "this is not JSON",
}


@pytest.fixture()
def data_dir(tmp_path):
    folder = tmp_path / "advancedif"
    folder.mkdir()
    (folder / "judge.py").write_text(JUDGE_PY)
    (folder / "rows.jsonl").write_text("".join(json.dumps(r) + "\n" for r in ROWS))
    return tmp_path


@pytest.fixture()
def server():
    seen = []

    class Handler(BaseHTTPRequestHandler):
        def do_POST(self):  # noqa: N802
            body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
            seen.append({"path": self.path, "body": body,
                         "auth": self.headers.get("Authorization")})
            prompt = body["messages"][0]["content"]
            answer = next(v for k, v in RECORDED.items() if k in prompt)
            content = answer if isinstance(answer, str) else json.dumps(answer)
            payload = json.dumps({"choices": [{"message": {"content": content}}]}).encode()
            self.send_response(200)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(payload)))
            self.end_headers()
            self.wfile.write(payload)

        def log_message(self, *args):
            pass

    httpd = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    thread = threading.Thread(target=httpd.serve_forever, daemon=True)
    thread.start()
    yield f"http://127.0.0.1:{httpd.server_address[1]}/v1", seen
    httpd.shutdown()


def test_templates_are_read_without_running_the_file(data_dir):
    templates = judge.load_templates(data_dir / "advancedif" / "judge.py")
    assert templates["JUDGE_PROMPT"].startswith("Judge the reply.\nHistory:")
    assert templates["STEER_FEW_SHOT_EXAMPLES"] == "EXAMPLES"
    bad = data_dir / "other.py"
    bad.write_text("JUDGE_PROMPT = 'x'\n")
    with pytest.raises(ValueError, match="SYSTEM_STEER_JUDGE_PROMPT"):
        judge.load_templates(bad)


def test_prompts_are_composed_as_the_official_judges_do(data_dir):
    templates = judge.load_templates(data_dir / "advancedif" / "judge.py")
    examples = advancedif.load(data_dir)
    carried = judge.compose(templates, "if_carried_context_oss", examples[1].messages, "KIWI",
                            examples[1].reference)
    assert "user [1]: Name a fruit.\nassistant [1]: Apple." in carried
    assert "Last prompt: Another, in capitals." in carried
    assert 'Rubrics: [\n    "Capitals?",\n    "A fruit?"\n]' in carried
    assert '{"rubrics_check": {"question_1"' in carried  # doubled braces became single
    steer = judge.compose(templates, "if_system_steerability_oss", examples[2].messages, "Hello",
                          examples[2].reference)
    assert steer.startswith("Steer. EXAMPLES\nSystem: You are Ada. Never use emoji.")


def test_scoring_with_a_recorded_judge_server(data_dir, server):
    url, seen = server
    task = TASKS.get("advancedif").configured(task_config(dict(
        task="advancedif", judge=url, judge_model="judge-x", judge_api_key_env="")).options)
    examples = task.load_eval(data_dir)
    scored = task.score(examples, ["RESP-A", "RESP-B", "RESP-C"])
    m = scored["metrics"]
    assert m["overall"] == pytest.approx(100 / 3)
    assert m["rubric"] == pytest.approx(100 * 4 / 5)  # micro: every returned answer counts
    assert m["judge_failures"] == 1
    assert m["overall/if_complex_if_oss"] == 100.0 and m["overall/if_carried_context_oss"] == 0.0
    assert [i["rubric_pass_rate"] for i in scored["items"]] == [1.0, 0.5, 0.0]
    assert len(seen) == 3 and seen[0]["path"] == "/v1/chat/completions"
    assert seen[0]["body"]["model"] == "judge-x"
    assert seen[0]["body"]["response_format"] == {"type": "json_object"}
    assert seen[0]["auth"] is None


def test_parse_follows_the_official_reading():
    v = judge.parse('{"rubrics_check": {"question_1": "YES", "question_3": "yes"}}', ["a", "b"])
    assert (v.success, v.satisfied, v.answers_yes, v.answers, v.item_rate) == \
        (True, False, 2, 2, 0.5)
    assert not judge.parse("[1, 2]", ["a"]).success
    assert not judge.parse('{"rubrics_check": []}', ["a"]).success


def test_missing_judge_and_bad_rows_are_clear_errors(data_dir, tmp_path):
    task = TASKS.get("advancedif").configured(TaskConfig(task="advancedif").options)
    examples = task.load_eval(data_dir)
    with pytest.raises(ValueError, match="needs a judge"):
        task.score(examples, ["x"] * len(examples))
    rows = data_dir / "advancedif" / "rows.jsonl"
    rows.write_text(json.dumps({**ROWS[0], "prompt_metadata": {"rubrics": []}}) + "\n")
    with pytest.raises(ValueError, match=r"rows.jsonl:1: 'prompt_metadata.rubrics'"):
        advancedif.load(data_dir)
    (data_dir / "advancedif" / "judge.py").unlink()
    with pytest.raises(FileNotFoundError, match="judge.py"):
        advancedif.load(data_dir)


@pytest.mark.model
def test_a_local_model_can_judge(data_dir, tmp_path):
    from harness.models import load_model, load_tokenizer

    # a random 2-layer model answers gibberish: every item is a judge failure, scored as such
    task = TASKS.get("advancedif").configured(TaskConfig(task="advancedif").options)
    examples = task.load_eval(data_dir)[:1]
    folder = tmp_path / "judge-model"  # a local judge is a model folder
    load_model("tiny-random").save_pretrained(folder)
    load_tokenizer("tiny-random").save_pretrained(folder)
    local = judge.LocalJudge(str(folder), max_tokens=8)
    answers = local(["Return JSON."])
    assert isinstance(answers[0], str)
    assert not judge.parse(answers[0], examples[0].reference).success
    with pytest.raises(FileNotFoundError, match="neither an http"):
        judge.make_judge("/no/such/folder", "m", "", 8)
