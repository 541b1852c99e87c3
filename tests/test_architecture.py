"""The house rules, checked on the source: packages import downwards only and in no cycle (the
lab -- CLI, benches, reports -- above the engine, which imports nothing of it), the engine knows
no method by name (its presets aside), and no module is over 400 lines."""
import ast
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
LAYERS = ("common", "tasks", "methods", "harness", "lab")  # each imports only those before it
# `python -m harness` is the lab's command line: the entry point only delegates to lab.cli
ENTRY_POINTS = {"harness.__main__"}
# where method names may appear in the engine: the presets and the default method (config.py,
# method_config.py: the method section's default)
NAMED_OK = ("harness/config.py", "harness/method_config.py")
MAX_LINES = 400
# methods that tests/plugins/ register (when a test of this process has loaded them)
PLUGIN_METHODS = {"tail", "toy-credit", "half-format"}



def modules() -> dict[str, Path]:
    out = {}
    for package in LAYERS:
        for path in (ROOT / package).rglob("*.py"):
            name = ".".join(path.relative_to(ROOT).with_suffix("").parts)
            out[name.removesuffix(".__init__")] = path
    return out


def imports(name: str, path: Path, known: dict) -> set[str]:
    """The project modules ``name`` imports (at any depth of its code): ``from pkg import
    submodule`` counts as the submodule, other names as the module that holds them."""
    out = set()
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.Import):
            targets = [a.name for a in node.names]
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                parts = name.split(".")
                keep = len(parts) - node.level + (1 if path.name == "__init__.py" else 0)
                base = ".".join(parts[:keep] + ([base] if base else []))
            subs = [f"{base}.{a.name}" for a in node.names if f"{base}.{a.name}" in known]
            targets = subs + ([base] if len(subs) < len(node.names) else [])
        else:
            continue
        for target in targets:
            while target and target not in known:
                target = target.rpartition(".")[0]
            if target and target != name:
                out.add(target)
    return out


def test_imports_go_downwards_and_form_no_cycle():
    known = modules()
    graph = {name: imports(name, path, known) for name, path in known.items()}
    rank = {layer: i for i, layer in enumerate(LAYERS)}
    upward = [f"{a} -> {b}" for a, deps in graph.items() for b in deps
              if rank[b.split(".")[0]] > rank[a.split(".")[0]] and a not in ENTRY_POINTS]
    assert upward == []
    # depth-first search for a cycle
    state: dict[str, int] = {}
    stack: list[str] = []

    def visit(node: str) -> list[str] | None:
        state[node] = 1
        stack.append(node)
        for dep in sorted(graph[node]):
            if state.get(dep) == 1:
                return stack[stack.index(dep):] + [dep]
            if dep not in state and (found := visit(dep)):
                return found
        stack.pop()
        state[node] = 2
        return None

    for node in sorted(graph):
        if node not in state:
            cycle = visit(node)
            assert cycle is None, " -> ".join(cycle)


def _docstrings(tree) -> set[int]:
    out = set()
    for node in ast.walk(tree):
        if isinstance(node, (ast.Module, ast.ClassDef, ast.FunctionDef, ast.AsyncFunctionDef)):
            body = node.body
            if body and isinstance(body[0], ast.Expr) and isinstance(body[0].value, ast.Constant):
                out.add(id(body[0].value))
    return out


def test_the_harness_knows_no_method_by_name():
    """No registered method's name, and no method option (``--mrtpo-beta``, ...), appears in
    the harness's code: in names, attributes, keywords or string literals (docstrings and
    comments may explain). The option ``replay`` is also an ordinary word (the harness's
    ``replay`` module), so only options with a method's prefix or an underscore are looked
    for."""
    import methods

    # the built-in methods (a plugin another test loaded into this process is not the house's)
    builtin = [n for n in methods.METHODS.names() if n not in PLUGIN_METHODS]
    names = set(builtin) | {n.replace("-", "_") for n in builtin}
    options = {f for cls in methods.option_classes()[1:] if cls.__module__.startswith("methods")
               for f in cls.__dataclass_fields__ if "_" in f}
    words = {w.lower() for w in names | options}
    found = []
    for path in sorted((ROOT / "harness").rglob("*.py")):
        rel = str(path.relative_to(ROOT))
        if rel.startswith(NAMED_OK):
            continue
        tree = ast.parse(path.read_text())
        skip = _docstrings(tree)
        for node in ast.walk(tree):
            texts = []
            if isinstance(node, ast.Name):
                texts = [node.id]
            elif isinstance(node, ast.Attribute):
                texts = [node.attr]
            elif isinstance(node, ast.keyword) and node.arg:
                texts = [node.arg]
            elif isinstance(node, ast.Constant) and isinstance(node.value, str) \
                    and id(node) not in skip:
                texts = node.value.replace("-", " ").replace("+", " ").replace(",", " ").split()
                texts += [t.strip("'\"()[]{}:.`") for t in texts]
            hits = {t.lower() for t in texts} & words
            if hits:
                found.append(f"{rel}:{getattr(node, 'lineno', '?')}: {sorted(hits)}")
    assert found == []


def test_the_settings_checks_name_no_engine():
    """Engines check their own settings through their registry entry (EngineEntry.problems):
    harness/checks.py imports no engine module and branches on no engine's name."""
    from harness.rollouts import ENGINES

    tree = ast.parse((ROOT / "harness" / "checks.py").read_text())
    imported = {n.module for n in ast.walk(tree) if isinstance(n, ast.ImportFrom) and n.module}
    assert not {m for m in imported if m.startswith("harness.rollouts.")}, imported
    names = set(ENGINES.names())
    strings = {n.value for n in ast.walk(tree) if isinstance(n, ast.Constant)
               and isinstance(n.value, str)}
    assert not names & strings, names & strings


def test_the_cli_and_the_reports_take_a_seeds_paths_from_seedrun():
    """One source of a seed's files (harness.seedrun.SeedRun): the commands and the reports do
    not derive result, log or folder paths from the config themselves."""
    derived = ("result_path", "train_log_path", "run_dir")
    found = []
    for rel in ("lab/cli.py", "lab/dryrun.py", "harness/api.py",
                *(str(p.relative_to(ROOT)) for p in (ROOT / "lab" / "reports").glob("*.py"))):
        tree = ast.parse((ROOT / rel).read_text())
        for node in ast.walk(tree):
            name = node.id if isinstance(node, ast.Name) else node.attr \
                if isinstance(node, ast.Attribute) else None
            if name in derived:
                found.append(f"{rel}:{node.lineno}: {name}")
    assert found == []


def test_no_module_is_over_400_lines():
    long = [f"{p.relative_to(ROOT)}: {n}" for layer in LAYERS for p in (ROOT / layer).rglob("*.py")
            if (n := len(p.read_text().splitlines())) > MAX_LINES]
    assert long == [], f"split these (one job per module): {long}"


# the entry points that load plugins: a run's one resolution, the CLI (its flags are built from
# the registries, a plugin's options too) and a stored config's reading (it names its plugins)
PLUGIN_LOADERS = {"harness/run.py", "lab/cli.py", "harness/config.py", "harness/plugins.py"}


def _calls(path: Path, name: str) -> list[int]:
    """Lines of ``path`` that call a function called ``name`` (as a name or an attribute)."""
    out = []
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.Call):
            f = node.func
            called = f.id if isinstance(f, ast.Name) else f.attr if isinstance(f, ast.Attribute) \
                else None
            if called == name:
                out.append(node.lineno)
    return out


def test_plugins_are_loaded_at_the_entry_points_only():
    found = [f"{path.relative_to(ROOT)}:{line}" for layer in LAYERS
             for path in (ROOT / layer).rglob("*.py")
             if path.relative_to(ROOT).as_posix() not in PLUGIN_LOADERS
             for line in _calls(path, "load_plugins")]
    assert found == [], "resolve the run through harness.run instead: " + ", ".join(found)


def test_no_config_class_is_replaced_when_a_plugin_registers_options():
    """A plugin's method brings its own options class: the config classes made at import stay;
    a config made before the plugin loaded is unchanged; one of the plugin's method carries its
    options object (every field visible to ``dataclasses``), which round-trips and pickles; a
    task's family options are its own object the same way."""
    import dataclasses
    import pickle

    import pytest

    from harness import config as cfg
    from harness.plugins import load_plugins

    import methods

    classes = dict(cfg.SECTION_TYPES)
    before = cfg.resolve("smoke", {})
    load_plugins((str(ROOT / "tests" / "plugins" / "tail_method.py"),))
    assert cfg.SECTION_TYPES == classes and cfg.MethodConfig is classes["method"]
    assert methods.options(tail_tokens=3).tail_tokens == 3  # the functional API's: every option
    after = cfg.resolve("smoke", {"method": "tail", "tail_tokens": 3})
    assert type(after.method) is type(before.method) and after.method.options.tail_tokens == 3
    assert "tail_tokens" in {f.name for f in dataclasses.fields(after.method.options)}
    assert dataclasses.replace(after.method.options, tail_tokens=4).tail_tokens == 4
    assert not hasattr(before.method.options, "tail_tokens")  # gdpo's options: its own only
    assert cfg.RunConfig.from_dict(after.to_dict()) == after
    assert pickle.loads(pickle.dumps(after)) == after
    assert "tail_tokens" not in before.to_dict()["method"]  # a config names its method's options
    assert not hasattr(cfg, "rebuild") and not hasattr(after.method, "later_options")
    # the task section likewise: its family's options object, every field a dataclass field
    sql = cfg.resolve("smoke", {"task": "spider-dev", "sql_timeout": 2.0})
    assert {f.name for f in dataclasses.fields(sql.task.options)} >= {"sql_timeout"}
    assert dataclasses.replace(sql.task.options, sql_timeout=3.0).sql_timeout == 3.0
    assert not hasattr(before.task.options, "sql_timeout")  # BFCL's family has no options
    assert "sql_timeout" not in before.to_dict()["task"]
    assert sql.to_dict()["task"]["sql_timeout"] == 2.0  # stored flat, as before
    assert cfg.RunConfig.from_dict(sql.to_dict()) == sql
    with pytest.raises(ValueError, match="option of the sql tasks, not of 'bfcl'"):
        cfg.resolve("smoke", {"sql_timeout": 2.0})
