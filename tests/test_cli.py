"""End to end through the CLI: a tiny run writes the run-directory contract; store commands read it."""

import json

import numpy as np
import pyarrow.parquet as pq
import pytest
from conftest import TINY_SETS
from typer.testing import CliRunner

from icldyn.cli import app


@pytest.mark.e2e
def test_run_writes_contract_and_store_commands_read_it(tiny_store):
    """The suite's shared TINY quickstart (tests/conftest.py: `icldyn run quickstart` with TINY_SETS)."""
    cli = CliRunner()
    [run] = [p for p in tiny_store.iterdir() if p.is_dir()]
    summary = json.loads((run / "summary.json").read_text())
    assert summary["run_id"] == run.name and summary["status"] == "finished"
    for name in ("config.toml", "metrics.parquet", "summary.json", "params.npz", "report.md"):
        assert (run / name).is_file()
    assert (run / "figures" / "loss_curves.png").is_file()
    for png in (run / "figures").glob("*.png"):  # a vector PDF beside every PNG; the PNG at 200 dpi
        assert png.with_suffix(".pdf").read_bytes().startswith(b"%PDF")
        data = png.read_bytes()
        phys = data.index(b"pHYs") + 4
        assert round(int.from_bytes(data[phys:phys + 4], "big") * 0.0254) == 200
    assert "seeds = 2" in (run / "config.toml").read_text()
    table = pq.read_table(run / "metrics.parquet")
    assert table.column_names == ["run_id", "point", "seed", "step", "metric", "value"]
    assert set(table.column("seed").to_pylist()) == {0, 1}
    with np.load(run / "params.npz", allow_pickle=False) as npz:
        assert npz["model.layers=1/seed0/P"].shape == (1, 1, 6, 6)
    assert summary["versions"]["jax"]
    p1 = summary["points"][0]
    assert p1["layers"] == 1 and p1["optimal_loss"] > 0 and p1["gd"] > p1["pgd"]

    res = cli.invoke(app, ["query", "SELECT count(DISTINCT seed) AS s FROM metrics WHERE metric = 'test_loss'",
                           "--json", "--out", str(tiny_store)])
    assert res.exit_code == 0 and json.loads(res.stdout) == [{"s": 2}]
    assert summary["run_id"] in cli.invoke(app, ["runs", "--out", str(tiny_store)]).stdout
    assert "quickstart" in cli.invoke(app, ["show", summary["run_id"][-6:], "--out", str(tiny_store)]).stdout
    assert cli.invoke(app, ["query", "SELEC nonsense", "--out", str(tiny_store)]).exit_code == 2


def test_list_names_every_recipe():
    out = CliRunner().invoke(app, ["list"]).stdout
    from icldyn.plugins import papers, recipes

    assert len(recipes()) >= 12 and {"ahn", "goel", "huang"} <= set(papers())
    for exp in recipes().values():
        assert exp.name in out and f"[{exp.paper}]" in out
    for paper in papers().values():
        assert paper.title.split(":")[0] in out


@pytest.mark.e2e
def test_diverging_run_is_stopped_marked_and_keeps_its_rows(tmp_path):
    res = CliRunner().invoke(app, ["run", "quickstart", "--json", "--out", str(tmp_path), *TINY_SETS,
                                   "--set", "train.optimizer=sgd", "--set", "train.lr=1e4", "--set", "train.clip=0",
                                   "--set", 'grid.model.layers=[3]'])
    assert res.exit_code == 0, res.output  # --json prints the summary; the status says what happened
    summary = json.loads(res.stdout)
    assert summary["status"] == "diverged"
    seeds = summary["points"][0]["seeds"]
    assert all(s["status"] == "diverged" and s["diverged_at"] == 20 for s in seeds)
    assert "diverged: point model.layers=3, seed 0 at step 20" in res.stderr  # named, not just nan ± nan
    table = pq.read_table(tmp_path / summary["run_id"] / "metrics.parquet")
    assert set(table.column("step").to_pylist()) == {0, 20}  # logged up to the divergence, nothing after


def test_doctor_names_backend_and_kernel_status():
    res = CliRunner().invoke(app, ["doctor", "--json"])
    assert res.exit_code == 0, res.output
    info = json.loads(res.stdout)
    assert info["jax"]["backend"] == "cpu" and info["jax"]["devices"]
    kernel = info["ahn: kernel"]  # the linear-attention plug-in's report (Paper.doctor)
    assert kernel["status (D = 6)"] in ("available", "unavailable") and kernel["reason"]
    assert set(info["plug-ins"]) >= {"ahn", "goel", "huang"}
    assert info["packages"]["jax"] and info["threads"]["cpu_count"] >= 1
