"""The example notebook, executed as Jupyter does (nbclient, an ipykernel on this interpreter) with no ipywidgets
installed: its outputs hold a progress display (updated in place to its last step, with the current loss), the run's
measured-vs-theory table and figures, the table as a DataFrame."""

import html
import importlib.util
import json
import re
import sys
from pathlib import Path

import pytest

import icldyn

NOTEBOOK = Path(__file__).resolve().parents[1] / "examples" / "quickstart.ipynb"


def _text(output: dict, mime: str) -> str:
    value = output.get("data", {}).get(mime, output.get("text", "") if mime == "text/plain" else "")
    return "".join(value) if isinstance(value, list) else value


@pytest.mark.e2e
def test_the_example_notebook_shows_progress_and_the_table(tmp_path, monkeypatch):
    nbformat = pytest.importorskip("nbformat")
    from nbclient import NotebookClient

    assert importlib.util.find_spec("ipywidgets") is None  # the point: nothing beyond the test extra
    kernels = tmp_path / "jupyter" / "kernels" / "icldyn-test"  # a kernel on this very interpreter
    kernels.mkdir(parents=True)
    (kernels / "kernel.json").write_text(json.dumps({"argv": [sys.executable, "-m", "ipykernel_launcher", "-f",
                                                              "{connection_file}"], "display_name": "icldyn test",
                                                     "language": "python"}))
    monkeypatch.setenv("JUPYTER_PATH", str(tmp_path / "jupyter"))
    nb = nbformat.read(NOTEBOOK, as_version=4)
    nb.cells.append(nbformat.v4.new_code_cell("import importlib.util; print('ipywidgets:', "
                                              "importlib.util.find_spec('ipywidgets'))"))
    NotebookClient(nb, timeout=300, kernel_name="icldyn-test", resources={"metadata": {"path": str(tmp_path)}}).execute()
    outputs = [(i, o) for i, c in enumerate(nb.cells) if c.cell_type == "code" for o in c.outputs]
    assert not [o for _, o in outputs if o.output_type == "error"]
    everything = "\n".join(_text(o, "text/plain") for _, o in outputs)
    assert "ipywidgets: None" in everything and 'install "ipywidgets"' not in everything

    store = Path(re.search(r"store: (\S+)", everything)[1])
    run = icldyn.load(next(p for p in store.iterdir() if p.is_dir()).name, store=store)
    steps = run.config.train.steps
    # the progress display: a display_data output updated in place (update_display_data) to the last step
    progress = [_text(o, "text/plain") for _, o in outputs if o.output_type == "display_data"
                and f"{steps}/{steps}" in _text(o, "text/plain")]
    assert progress and "test_loss" in progress[0] and "train_loss" in progress[0], progress
    final = run.metrics.query("metric == 'test_loss' and step == @steps").value.mean()
    assert f"test_loss {final:.4g}" in progress[0]  # the loss shown is the run's own, at its last step
    # the run's cell: its table (every cell of the report's table) and its figures, as HTML
    shown = next(_text(o, "text/html") for _, o in outputs if o.output_type == "execute_result"
                 and run.run_id in _text(o, "text/html"))
    table = run.table(numbers=False)
    assert len(table) == 1 and all(html.escape(str(cell), quote=False) in shown for cell in table.values.ravel())
    assert shown.count("data:image/png;base64,") == len(run.figures) > 0
    # run.table(): the DataFrame of the same numbers
    frames = [_text(o, "text/html") for _, o in outputs if o.output_type == "execute_result"
              and "<table" in _text(o, "text/html") and run.run_id not in _text(o, "text/html")]
    assert frames and str(table.columns[1]) in frames[0]
