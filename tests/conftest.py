import pytest

from icldyn.runtime import setup_jax

setup_jax()  # float64 available, persistent compilation cache shared with the CLI


@pytest.fixture(scope="session")
def session_store(tmp_path_factory):
    return tmp_path_factory.mktemp("store")


# `icldyn verify --paper P --quick`, run once per worker process (session scope). The suite spreads single tests
# over its workers (pytest-xdist, --dist worksteal): one test per paper reads it, so each paper's runs once
@pytest.fixture(scope="session")
def verify_claims(session_store):
    from icldyn import claims as verify

    cache: dict[str, list] = {}

    def claims(paper: str) -> list:
        if paper not in cache:
            cache[paper] = verify.verify(paper, quick=True, store=session_store)
        return cache[paper]

    return claims


def assert_claims(claims, needles):
    """Every claim passed, and the claims cover what the issue lists (a needle in some claim's name)."""
    failed = [f"{c.claim}: theory {c.theory}, measured {c.measured}, tol {c.tolerance}" for c in claims
              if not c.passed]
    assert not failed, failed
    names = " | ".join(c.claim for c in claims)
    missing = [n for n in needles if n not in names]
    assert not missing, missing


# The suite's smallest quickstart (2 seeds, 40 steps, batch 64, 256 held-out prompts): one run per worker, shared by
# the tests that only read a finished run, and the reference the reproducibility test reruns against.
TINY = {"seeds": 2, "train": {"steps": 40, "log_every": 20, "batch": 64}, "data": {"test_size": 256}}
TINY_SETS = ["--set", "train.steps=40", "--set", "train.log_every=20", "--set", "train.batch=64",
             "--set", "data.test_size=256", "--set", "seeds=2"]


@pytest.fixture(scope="session")
def tiny_store(tmp_path_factory):
    from icldyn.plugins import get
    from icldyn.runner import execute

    root = tmp_path_factory.mktemp("tiny")
    execute(get("quickstart").config(TINY), root)
    return root


# The suite's longest tests (seconds on the 2-core CI machine, `pytest --durations`), dealt to the two halves of the
# collection longest first (each worker of `-n auto --dist worksteal` starts with one half, then steals): without
# this, one worker can be left with the longest tests at the end and the wall time grows by a minute.
EXPECTED_S = {  # CI, 2026-12-01 (setup + call)
    "test_every_claim_passes_and_the_runs_verify_wrote_are_complete": 147,
    "test_verify_goel_passes_and_its_convergence_run_has_the_documented_numbers": 149,
    "test_kill_9_leaves_a_readable_run_and_resume_is_bit_identical": 69,
    "test_wheel_and_sdist_ship_the_kernel_source_and_the_wheel_runs_the_default_job": 64,
    "test_the_documented_example_runs_in_a_fresh_process": 63,
    "test_ray_backend_gives_the_local_numbers": 44,
    "test_no_compiler_runs_pure_jax_says_so_once_and_gives_the_kernels_numbers": 43,
    "test_conditioning_grid_swept_as_one_job": 40,
    "test_sweep_runs_grid_records_and_resumes": 32,
    "test_build_falls_back_to_portable_flags_and_prunes_old_libraries": 27,
    "test_a_toy_plugin_installed_outside_src_runs_through_list_run_verify_and_sweep": 27,
    "test_verify_runs_the_adam_recipe_and_every_claim_passes": 23,
    "test_killed_sweep_resumed_reruns_only_unfinished_points": 19,
    "test_no_group_runs_each_point_alone_bit_for_bit": 16,
}


def pytest_collection_modifyitems(items):
    heavy = sorted((it for it in items if it.originalname in EXPECTED_S), key=lambda it: -EXPECTED_S[it.originalname])
    halves: tuple[list, list] = ([], [])
    load = [0, 0]
    for it in heavy:  # longest processing time first, to the lighter half
        k = int(load[1] < load[0])
        halves[k].append(it)
        load[k] += EXPECTED_S[it.originalname]
    rest = [it for it in items if it.originalname not in EXPECTED_S]
    cut = len(items) // 2 - len(halves[0])
    items[:] = halves[0] + rest[:cut] + halves[1] + rest[cut:]
