"""Runs side by side (`icldyn compare`, `icldyn.compare`), a run exported to TensorBoard (read back by tbparse) and
to W&B offline (its run files read back), each equal to its metrics.parquet, and the Python API's own wording of the
CLI's errors. All on the suite's one tiny run
(conftest.tiny_store) and a copy of it with another learning rate and other values (nothing trains here)."""

import html
import json
import math
import shutil

import numpy as np
import pandas as pd
import pyarrow.parquet as pq
import pytest
from conftest import TINY
from typer.testing import CliRunner

import icldyn
from icldyn.api import _python
from icldyn.cli import app
from icldyn.store import query, write_manifest


@pytest.fixture(scope="module")
def two_runs(tiny_store, tmp_path_factory):
    """The tiny run and a copy whose config says train.lr = 0.02 and whose values are halved (manifest rewritten)."""
    store = tmp_path_factory.mktemp("two")
    first = next(p for p in tiny_store.iterdir() if (p / "summary.json").is_file())
    shutil.copytree(first, store / first.name)
    second = store / (first.name[:-6] + "c0ffee")
    shutil.copytree(first, second)
    cfg = (second / "config.toml").read_text()
    assert 'lr = 0.01\n' in cfg
    (second / "config.toml").write_text(cfg.replace('lr = 0.01\n', 'lr = 0.02\n'))
    t = pq.read_table(second / "metrics.parquet").to_pandas()
    t["value"] *= 0.5
    t["run_id"] = second.name
    pq.write_table(pq.read_table(first / "metrics.parquet").from_pandas(t, preserve_index=False),
                   second / "metrics.parquet")
    write_manifest(second)
    return store, first.name, second.name


def test_compare_config_difference_finals_and_figure(two_runs, tmp_path):
    store, a, b = two_runs
    c = icldyn.compare(a, b, store=store)
    assert list(c.config.index) == ["train.lr"] and c.config.loc["train.lr"].tolist() == ["0.01", "0.02"]
    # the finals: each (point, metric)'s mean over seeds of the last logged value, as the store's finals view
    _, rows = query(store, "SELECT run_id, point, metric, avg(value), count(*) FROM finals GROUP BY ALL")
    assert len(rows) == 2 * len(c.finals) and {r[4] for r in rows} == {TINY["seeds"]}
    names = dict(zip((a, b), c.names))
    for run_id, point, metric, mean, _ in rows:
        assert c.finals.loc[(point, metric), names[run_id]] == pytest.approx(mean, rel=1e-12)
    assert c.finals.index[0][1] == "test_loss"  # the recipe's main metric first
    np.testing.assert_allclose(c.finals[c.names[1]], 0.5 * c.finals[c.names[0]], rtol=1e-12)
    np.testing.assert_allclose(c.finals_sd[c.names[1]], 0.5 * c.finals_sd[c.names[0]], rtol=1e-12)
    logged = set(pd.read_parquet(store / a / "metrics.parquet").metric)
    assert sorted(c.shared_metrics()) == sorted(logged) and c.shared_metrics()[:2] == ["test_loss", "train_loss"]
    # the CLI: both tables and the figure's path; one run, or the same run twice, is one line
    res = CliRunner().invoke(app, ["compare", a, b, "--out", str(store), "--figure", str(tmp_path / "c.png")])
    assert res.exit_code == 0, res.output
    assert "train.lr" in res.stdout and f"{c.finals.iloc[0, 0]:.4g} ± " in res.stdout
    assert (tmp_path / "c.png").stat().st_size > 0 and (tmp_path / "c.pdf").is_file()
    for args, needle in ((["compare", a], f"one run's report: `icldyn show {a}`"), (["compare", a, a], "same run twice"),
                         (["show", a, b], f"icldyn compare {a} {b}")):
        res = CliRunner().invoke(app, [*args, "--out", str(store)])
        assert res.exit_code == 2 and len(res.stderr.strip().splitlines()) == 1 and needle in res.stderr, res.output
    with pytest.raises(icldyn.ConfigError, match=rf'icldyn.show\("{a}"\)'):
        icldyn.compare(a, store=store)
    # --metric draws the named metrics only, in that order; one not logged by every run is one line naming the others
    fig = c.figure(metrics=["train_loss", "test_loss"])
    assert [ax.get_title() for ax in fig.axes if ax.get_visible()] == ["train_loss", "test_loss"]
    res = CliRunner().invoke(app, ["compare", a, b, "--out", str(store), "--metric", "nope"])
    assert res.exit_code == 2 and "metric 'nope' is not logged by every run; one of test_loss" in res.stderr, res.output


def test_tensorboard_event_files_read_back_equal_the_parquet_metrics(two_runs, tmp_path):
    pytest.importorskip("tensorboardX")
    from tbparse import SummaryReader
    from tensorboard.backend.event_processing.event_accumulator import EventAccumulator

    store, a, _ = two_runs
    res = CliRunner().invoke(app, ["export", a, "--to", "tensorboard", "--dir", str(tmp_path), "--out", str(store)])
    assert res.exit_code == 0, res.output
    reader = SummaryReader(str(tmp_path), extra_columns={"dir_name"})
    got = reader.scalars
    got = got[~got.tag.str.startswith("final/")]
    want = pd.read_parquet(store / a / "metrics.parquet")
    # one directory per point and seed: <run_id>/<point>/seed<k>
    parts = got.dir_name.str.split("/", expand=True)
    got = got.assign(run_id=parts[0], point=parts[1], seed=parts[2].str.removeprefix("seed").astype(int))
    keys = ["run_id", "point", "seed", "metric", "step"]
    both = want.merge(got.rename(columns={"tag": "metric", "value": "tb"}), on=keys, how="outer", indicator=True)
    assert (both._merge == "both").all() and len(both) == len(want)
    # TensorBoard keeps a scalar as float32: the Parquet value rounded so, exactly
    assert (both.tb.to_numpy(np.float32) == both.value.to_numpy(np.float32)).all()
    hp = reader.hparams
    lr = hp[(hp.tag == "train.lr")]
    assert len(lr) == 2 * TINY["seeds"] and set(lr.value) == {0.01}
    layers = hp[hp.tag == "model.layers"].assign(point=lambda d: d.dir_name.str.split("/").str[1])
    assert all(p == f"model.layers={int(v)}" for p, v in zip(layers.point, layers.value))  # the point's own value
    figures = EventAccumulator(str(tmp_path / a)).Reload().Tags()["images"]
    assert sorted(figures) == sorted(f"figures/{f.stem}" for f in (store / a / "figures").glob("*.png"))


def _wandb_records(path):
    """The protobuf records of an offline W&B run file (``run-<id>.wandb``): a 7-byte header (``:W&B``, magic,
    version), then LevelDB-log framing (32 KiB blocks; per chunk crc32, length, type FULL/FIRST/MIDDLE/LAST). wandb
    >= 0.2x no longer ships its Python reader (``wandb.sdk.internal.datastore``), so the test reads the framing."""
    import struct

    from wandb.proto import wandb_internal_pb2

    data, block, pos, parts = path.read_bytes(), 32768, 7, b""
    assert data[:4] == b":W&B"
    while pos + 7 <= len(data):
        if block - pos % block < 7:  # a block's tail too short for a chunk header is padding
            pos += block - pos % block
            continue
        _, n, kind = struct.unpack("<IHB", data[pos:pos + 7])
        if kind == 0:
            break
        parts, pos = parts + data[pos + 7:pos + 7 + n], pos + 7 + n
        if kind in (1, 4):  # FULL or LAST: one record complete
            record = wandb_internal_pb2.Record()
            record.ParseFromString(parts)
            parts = b""
            yield record


def test_wandb_offline_runs_read_back_equal_the_parquet_metrics(two_runs, tmp_path, monkeypatch):
    monkeypatch.setenv("WANDB_MODE", "offline")
    monkeypatch.setenv("WANDB_SILENT", "true")
    store, a, _ = two_runs
    res = CliRunner().invoke(app, ["export", a, "--to", "wandb", "--dir", str(tmp_path), "--out", str(store)])
    assert res.exit_code == 0, res.output
    rows, configs, finals, images = [], {}, {}, set()
    for f in tmp_path.glob("wandb/offline-run-*/run-*.wandb"):
        records = list(_wandb_records(f))
        run = next(r.run for r in records if r.WhichOneof("record_type") == "run")
        assert run.run_group == a
        name = run.display_name.removeprefix(f"{a}/")
        configs[name] = {i.key: json.loads(i.value_json) for i in run.config.update}
        for r in records:
            kind = r.WhichOneof("record_type")
            items = {"/".join(i.nested_key) or i.key: json.loads(i.value_json)
                     for i in (r.history.item if kind == "history" else r.summary.update if kind == "summary" else [])}
            if kind == "history" and name != "figures":
                point, seed = name.rsplit("/seed", 1)
                rows += [(point, int(seed), m, items["_step"], v) for m, v in items.items() if not m.startswith("_")]
            elif kind == "history":
                images |= {k.split("/")[1] for k, v in items.items() if k.endswith("/_type") and v == "image-file"}
            elif kind == "summary":
                finals.setdefault(name, {}).update({k: v for k, v in items.items() if k.startswith("final/")})
    want = pd.read_parquet(store / a / "metrics.parquet")
    got = pd.DataFrame(rows, columns=["point", "seed", "metric", "step", "wandb"])
    keys = ["point", "seed", "metric", "step"]
    both = want.merge(got, on=keys, how="outer", indicator=True)
    assert (both._merge == "both").all() and len(both) == len(want) == len(got)
    assert (both.wandb.to_numpy() == both.value.to_numpy()).all()  # W&B keeps the float64 exactly
    # one W&B run per point and seed, its config the run's with the point's own value and the seed; finals = last
    assert len(configs) == 2 * TINY["seeds"] + 1 and images == {f.stem for f in (store / a / "figures").glob("*.png")}
    for name, cfg in configs.items():
        assert cfg["train.lr"] == 0.01
        if name != "figures":
            point, seed = name.rsplit("/seed", 1)
            assert cfg["point"] == point == f"model.layers={cfg['model.layers']}" and cfg["seed"] == int(seed)
            last = want[(want.point == point) & (want.seed == int(seed))].sort_values("step").groupby("metric").last()
            assert finals[name] == {f"final/{m}": v for m, v in last.value.items()}


def test_a_missing_tracker_or_an_unfinished_run_is_one_line(two_runs, tmp_path, monkeypatch):
    import importlib.util

    store, a, _ = two_runs
    real = importlib.util.find_spec
    monkeypatch.setattr(importlib.util, "find_spec", lambda name, *x: None if name == "wandb" else real(name, *x))
    res = CliRunner().invoke(app, ["export", a, "--to", "wandb", "--out", str(store)])
    assert res.exit_code == 2 and "pip install 'icldyn[wandb]'" in res.stderr and len(res.stderr.splitlines()) == 1
    res = CliRunner().invoke(app, ["run", "quickstart", "--log", "mlflow", "--out", str(tmp_path)])
    assert res.exit_code == 2 and "must be one of 'tensorboard', 'wandb'" in res.stderr and not any(tmp_path.iterdir())


def test_errors_raised_in_python_speak_python(tmp_path):
    with pytest.raises(icldyn.ConfigError) as err:
        icldyn.run("ahn-loss-vs-layers", quick=True, overrides={"model.layers": 2}, store=tmp_path)
    assert 'overrides={"grid.model.layers": [2]}' in str(err.value) and "--set" not in str(err.value)
    with pytest.raises(icldyn.StoreError, match=r"see `icldyn.runs\(\)`"):
        icldyn.load("no-such-run", store=tmp_path)
    with pytest.raises(icldyn.ConfigError, match=r'icldyn.compare\("a", "b"\)'):
        icldyn.show("a", "b", store=tmp_path)
    assert not any(tmp_path.iterdir())
    assert _python("bad --set grid.x: a grid axis takes a list, e.g. grid.x=[1,2]") == \
        'bad overrides["grid.x"]: a grid axis takes a list, e.g. overrides={"grid.x": [1, 2]}'
    assert _python("run r crashed after step 40; continue it with: icldyn run --resume runs/r | the sweep: icldyn "
                   "sweep --resume s --out runs") == ('run r crashed after step 40; continue it with: icldyn.run('
                                                      'resume="runs/r") | the sweep: icldyn.sweep(resume="s", '
                                                      'store="runs")')
    assert _python("store 'x' is a file, not a directory; give a directory with --out") == \
        "store 'x' is a file, not a directory; give a directory as store="
    assert icldyn.StoreError is icldyn.store.StoreError and issubclass(icldyn.RunDamaged, icldyn.StoreError)
    assert {"RunCrashed", "RunInterrupted", "compare", "sweep", "query", "show", "doctor"} <= set(icldyn.__all__)


def test_run_table_points_and_display(tiny_store):
    run = icldyn.load(next(p for p in tiny_store.iterdir() if (p / "summary.json").is_file()).name, store=tiny_store)
    table, cells, points = run.table(), run.table(numbers=False), run.points()
    s = run.summary
    assert list(cells.columns) == s["table"]["columns"] and cells.values.tolist() == s["table"]["rows"]
    mean_col = next(c for c in cells.columns if "±" in str(cells[c].iloc[0]))
    for (m, sd), cell in zip(zip(table[mean_col], table[f"{mean_col} sd"]), cells[mean_col]):
        assert cell == f"{m:.4g} ± {sd:.2g}" or math.isclose(float(cell.split(" ± ")[0]), m)
    # points(): every point and seed, at full precision (the seeds' final test loss is their mean in the summary)
    assert len(points) == sum(len(p["seeds"]) for p in s["points"])
    for p in s["points"]:
        mine = points[points.point == p["point"]]
        assert mine["final.test_loss"].mean() == pytest.approx(p["test_loss"], rel=1e-12)
    # the result's repr shows matrices by their shape; the notebook's HTML and rich views show the table
    assert len(repr(run.result)) < 6000 and "<list 1×5×5>" in repr(run.result)
    shown = run._repr_html_()
    assert all(html.escape(str(c), quote=False) in shown for c in cells.values.ravel())
    assert shown.count("<img") == len(run.figures)
    from rich.console import Console

    console = Console(width=400, record=True)
    console.print(run)
    text = console.export_text()
    assert all(str(c) in text for c in cells.values.ravel()) and run.run_id in text


@pytest.mark.parametrize("kwargs, needle", [
    ({"grid": {"train.nope": [1]}}, "grid key 'train.nope' is not seeds, seed or a data.*, model.* or train.* field"),
    ({"grid": {"train.lr": 0.01}}, "grid['train.lr'] = 0.01 is not allowed: must be a non-empty list"),
    ({"grid": {"train.lr": [0.01]}, "overrides": {"data.d": 0}}, "data.d = 0 is not allowed"),
    ({"resume": "x", "grid": {"train.lr": [0.01]}}, "resume= reruns a sweep's unfinished points"),
    ({"backend": "slurm"}, "backend = 'slurm' is not allowed: must be one of 'local', 'ray'"),
])
def test_a_bad_sweep_from_python_is_refused_before_anything_runs(tmp_path, kwargs, needle):
    with pytest.raises(icldyn.ConfigError) as err:
        icldyn.sweep(**({} if "resume" in kwargs else {"recipe": "quickstart"}), **kwargs, store=tmp_path)
    assert needle in str(err.value) and "\n" not in str(err.value)
    assert not any(tmp_path.iterdir())


def test_a_sweep_shown_from_python(two_runs):
    import json

    store, a, b = two_runs
    (store / "sweeps").mkdir(exist_ok=True)
    record = {"sweep_id": "s1", "target": {"experiment": "quickstart"}, "quick": False, "axes": {"train.lr": [0.01, 0.02]},
              "points": [{"overrides": {"train.lr": lr}, "run_id": r, "status": "finished"}
                         for lr, r in ((0.01, a), (0.02, b))]}
    (store / "sweeps" / "s1.json").write_text(json.dumps(record))
    sw = icldyn.show("s1", store=store)
    assert isinstance(sw, icldyn.Sweep) and [r.run_id for r in sw.runs] == [a, b]
    table = sw.table()
    assert table["train.lr"].tolist() == [0.01, 0.02] and table.run_id.tolist() == [a, b]
    first = icldyn.load(a, store=store).metrics.query("metric == 'test_loss' and step == step.max()")
    mean = first[first.point == "model.layers=1"].value.mean()
    assert f"model.layers=1: test_loss {mean:.4g} ± " in table.final[0]
    shown = sw._repr_html_()
    assert all(r in shown for r in (a, b)) and "train.lr" in shown
