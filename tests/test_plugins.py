"""Papers are plug-ins: the toy paper package that docs/plugins.md builds (its code blocks, nothing else), installed
into a temporary environment, appears in `icldyn list` and runs through `run`, `verify` and `sweep` without touching
src/icldyn, and honours every core field; the core names no paper, recipe or kind field; no paper imports another;
the core's import graph has no circle."""

import json
import re
import runpy
import site
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]

DRIVER = r'''
import json, sys
from typer.testing import CliRunner
from icldyn.cli import app

store = sys.argv[1]
out = {}
for name, args in [
    ("list", ["list"]),
    ("run", ["run", "toy-shrinkage", "--quick", "--json", "--out", store]),
    ("verify", ["verify", "--paper", "toy", "--quick", "--json", "--out", store]),
    ("sweep", ["sweep", "toy-shrinkage", "--quick", "--grid", "data.noise_std=0.5,2.0", "--set", "grid.data.n=[8]",
               "--set", "train.steps=50", "--out", store]),
    ("foreign", ["run", "toy-shrinkage", "--set", "data.p=3", "--out", store]),
]:
    res = CliRunner().invoke(app, args)
    out[name] = {"code": res.exit_code, "stdout": res.stdout, "stderr": res.stderr}
# every core field honoured by the outside recipe too (tests/test_recipes_honour.py's check)
import pathlib, runpy
check = runpy.run_path(sys.argv[2])["problems"]
out["honoured"] = check("toy-shrinkage", pathlib.Path(store) / "honour")
print(json.dumps(out))
'''


@pytest.mark.e2e
def test_the_documented_plugin_installed_outside_src_runs_through_list_run_verify_and_sweep(tmp_path):
    venv = tmp_path / "venv"
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(venv)], check=True)
    inner = venv / "bin" / "python"
    inner_site = subprocess.run([str(inner), "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"],
                                check=True, capture_output=True, text=True).stdout.strip()
    # icldyn and its dependencies from this environment; the plug-in only in the temporary one
    Path(inner_site, "_outer.pth").write_text("import site; " + "; ".join(
        f"site.addsitedir({p!r})" for p in site.getsitepackages()) + "\n")
    src = runpy.run_path(str(ROOT / "docs" / "extract_plugin.py"))["extract"](tmp_path / "toy_plugin")
    subprocess.run([sys.executable, "-m", "pip", "--python", str(inner), "install", "--no-deps", "-q", str(src)],
                   check=True, capture_output=True)
    (tmp_path / "runs" / "honour").mkdir(parents=True)
    res = subprocess.run([str(inner), "-c", DRIVER, str(tmp_path / "runs"),
                          str(ROOT / "tests" / "test_recipes_honour.py")], capture_output=True, text=True, cwd=tmp_path)
    assert res.returncode == 0, res.stderr[-3000:]
    out = json.loads(res.stdout.strip().splitlines()[-1])

    assert out["list"]["code"] == 0 and "toy-shrinkage" in out["list"]["stdout"] and "[toy]" in out["list"]["stdout"]
    assert "quickstart" in out["list"]["stdout"]  # the built-in papers are plug-ins beside it

    assert out["run"]["code"] == 0, out["run"]["stderr"]
    summary = json.loads(out["run"]["stdout"])
    assert summary["status"] == "finished" and summary["paper"] == "toy" and summary["figures"]
    for p in summary["points"]:  # trained shrinkage against the posterior-mean closed form
        assert abs(p["a"] / p["a_star"] - 1) < 0.03, p
    run_dir = tmp_path / "runs" / summary["run_id"]
    assert {"config.toml", "metrics.parquet", "params.npz", "summary.json", "report.md"} <= {
        f.name for f in run_dir.iterdir()}

    assert out["verify"]["code"] == 0, out["verify"]["stderr"]
    claims = json.loads(out["verify"]["stdout"])
    assert len(claims) == 2 and all(c["passed"] and c["paper"] == "toy" for c in claims)

    assert out["sweep"]["code"] == 0, out["sweep"]["stderr"]
    record = next((tmp_path / "runs" / "sweeps").glob("*.json"))
    points = json.loads(record.read_text())["points"]
    assert [p["overrides"] for p in points] == [{"data.noise_std": 0.5}, {"data.noise_std": 2.0}]
    assert all(p["status"] == "finished" for p in points)

    # the toy's data law is a kind of the discriminated union: another kind's field is refused in one line
    assert out["foreign"]["code"] == 2
    assert out["foreign"]["stderr"].strip() == "error: data.p applies to data.kind = 'regression' only, not " \
        "'scalar_means'; remove it"

    assert out["honoured"] == [], out["honoured"]

    # nothing of it is visible here: this environment did not install the plug-in
    from icldyn.plugins import papers

    assert "toy" not in papers()


CORE = ROOT / "src" / "icldyn"
PAPERS = sorted(p.name for p in (CORE / "papers").iterdir() if p.is_dir() and not p.name.startswith("_"))


def _core_files():
    return [f for f in CORE.rglob("*") if f.is_file() and f.suffix in (".py", ".c", ".toml", ".md")
            and "papers" not in f.relative_to(CORE).parts]


def test_the_core_names_no_paper_recipe_or_paper_field():
    """grep over src/icldyn outside papers/ (components included) finds no paper folder's name, no recipe name and no
    field of a kind (outside the components that define them)."""
    from icldyn.plugins import recipes

    names = "|".join([*PAPERS, *(re.escape(r) for r in recipes())])
    hits = [f"{f.relative_to(ROOT)}:{i}: {line.strip()}" for f in _core_files()
            for i, line in enumerate(f.read_text().splitlines(), 1) if re.search(rf"\b({names})\b", line, re.I)]
    assert not hits, hits
    # outside the components, the core reads only the shared fields of its sections, never a kind's own
    from icldyn.config import DataSection, ModelSection, TrainConfig

    shared = {s: {*c.model_fields, *dir(c)} for s, c in (("data", DataSection), ("model", ModelSection),
                                                      ("train", TrainConfig))}
    pattern = r"\b(?:\w*cfg\w*|config|c|p)\.(data|model|train)\.([a-z_]+)|getattr\(\w+\.(data|model|train), \"(\w+)\""
    reads = [f"{f.relative_to(ROOT)}:{i}: {m.group(0)}" for f in _core_files()
             if f.suffix == ".py" and "components" not in f.relative_to(CORE).parts
             for i, line in enumerate(f.read_text().splitlines(), 1) for m in re.finditer(pattern, line)
             if (m.group(2) or m.group(4)) not in shared[m.group(1) or m.group(3)]]
    assert not reads, reads


def _imports(path: Path) -> set[str]:
    """The icldyn modules ``path`` imports at run time (module level or in a function; not under TYPE_CHECKING)."""
    import ast

    tree = ast.parse(path.read_text())
    skip = {id(n) for node in ast.walk(tree) if isinstance(node, ast.If) and "TYPE_CHECKING" in ast.unparse(node.test)
            for n in ast.walk(node)}
    out = set()
    for node in ast.walk(tree):
        if id(node) in skip:
            continue
        if isinstance(node, ast.Import):
            out |= {a.name for a in node.names if a.name.startswith("icldyn")}
        elif isinstance(node, ast.ImportFrom) and node.module and node.module.startswith("icldyn"):
            out.add(node.module)
            out |= {f"{node.module}.{a.name}" for a in node.names}
    return out


def _module(path: Path) -> str:
    rel = path.relative_to(CORE.parent).with_suffix("")
    return ".".join(rel.parts[:-1] if rel.name == "__init__" else rel.parts)


def test_no_paper_imports_another_papers_folder():
    for paper in PAPERS:
        for f in (CORE / "papers" / paper).rglob("*.py"):
            other = {m for m in _imports(f) if m.startswith("icldyn.papers.") and m.split(".")[2] != paper}
            assert not other, f"{f.relative_to(ROOT)} imports {sorted(other)}"


def test_the_cores_import_graph_has_no_circle():
    files = {_module(f): f for f in CORE.rglob("*.py") if "papers" not in f.relative_to(CORE).parts}
    graph = {m: {i for i in _imports(f) if i in files and i != m} for m, f in files.items()}
    graph = {m: {i for i in deps if not m.startswith(i + ".")} for m, deps in graph.items()}  # a package's __init__
    state: dict[str, int] = {}

    def visit(m: str, path: list[str]) -> None:
        state[m] = 1
        for n in graph[m]:
            assert state.get(n) != 1, "import circle: " + " → ".join([*path, m, n])
            if n not in state:
                visit(n, [*path, m])
        state[m] = 2

    for m in graph:
        if m not in state:
            visit(m, [])
    # and the check finds one where there is one
    graph["icldyn.config"] = graph["icldyn.config"] | {"icldyn.recipe"}
    state.clear()
    with pytest.raises(AssertionError, match="import circle"):
        for m in graph:
            if m not in state:
                visit(m, [])
