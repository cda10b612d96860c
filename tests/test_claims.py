"""The claim table as numbers (issue #25): a Claim is a typed record of floats, its display strings keep the table
as informative as the strings were, and `icldyn.verify` / `verify --json` give numeric, diffable columns."""

import json
import math

import pytest

from icldyn.claims import Claim


def _claims():
    return [Claim(paper="toy", claim="closed form = Monte Carlo", theory=1.25, measured=1.2512, tolerance=0.004,
                  test="|m − t| ≤ tol (3 s.e.)", passed=True, detail="s.e. 0.0013"),
            Claim(paper="toy", claim="a bound only", theory=None, measured=float("nan"), tolerance=0.9,
                  test="m ≥ tol", passed=False, fmt=".3f")]


def test_a_claim_holds_numbers_and_displays_them():
    import numpy as np

    c = Claim(paper="p", claim="c", theory=np.float32(0.5), measured=np.float64(0.25), tolerance=np.int64(1),
              test="m ≤ tol", passed=np.bool_(True), fmt=".2f")
    assert type(c.theory) is float and type(c.measured) is float and type(c.tolerance) is float
    assert type(c.passed) is bool
    assert c.display() == ("0.50", "0.25", "tol 1.00: m ≤ tol")
    first, second = _claims()
    assert first.display() == ("1.25", "1.251; s.e. 0.0013", "tol 0.004: |m − t| ≤ tol (3 s.e.)")
    assert second.display()[0] == "—"
    with pytest.raises(TypeError):  # keyword-only
        Claim("p", "c", 0.0, 0.0, 0.0, "m ≤ tol", True)
    with pytest.raises(AttributeError):  # frozen
        first.measured = 2.0


def test_verify_gives_numeric_columns_and_valid_json(monkeypatch):
    import icldyn
    from icldyn import claims as v

    monkeypatch.setattr(v, "verify", lambda *a, **k: _claims())
    df = icldyn.verify(quick=True, progress=False)
    assert [str(df[c].dtype) for c in ("theory", "measured", "tolerance", "passed")] == ["float64"] * 3 + ["bool"]
    assert math.isnan(df.theory[1]) and df.measured[0] == 1.2512
    text = json.dumps([c.asdict() for c in _claims()], allow_nan=False)  # NaN → null: valid JSON
    assert json.loads(text)[1]["measured"] is None and json.loads(text)[0]["tolerance"] == 0.004
