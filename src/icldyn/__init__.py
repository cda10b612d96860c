"""icldyn: training dynamics of attention for in-context regression, held against closed-form theory.

Rooms: :mod:`icldyn.data` (prompt distributions), :mod:`icldyn.models`, :mod:`icldyn.train`
(optax + lax.scan loop), :mod:`icldyn.theory` (closed forms, float64), :mod:`icldyn.experiments`
(named recipes), :mod:`icldyn.store` (run directories, DuckDB), :mod:`icldyn.plots`,
:mod:`icldyn.verify` (the claim table) and :mod:`icldyn.cli`.
"""

__version__ = "0.1.0"
