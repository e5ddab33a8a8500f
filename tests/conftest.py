"""Test-suite configuration: the hypothesis profiles of the generated-input tests (issue 11).

Two profiles are registered here, once for every test module:

* ``fast`` (the default): a bounded number of examples per property (FAST_EXAMPLES), so that the default run
  (``pytest``, whose addopts in pyproject.toml are ``-m 'not slow'``) stays fast;
* ``slow``: SLOW_EXAMPLES per property -- the generated campaign.

:func:`pytest_configure` loads ``slow`` when the run's ``-m`` expression selects tests marked ``slow`` (``pytest -m
slow ...``, ``-m "slow or not slow"``; never ``-m "not slow"``), else ``fast``; the environment variable
``THEORYKIT_HYPOTHESIS=slow|fast`` overrides that choice.  In a slow run, :func:`pytest_collection_modifyitems` also
marks every hypothesis test ``slow``, so that

    python -m pytest -m slow tests/test_properties.py -p no:cacheprovider

runs the whole property campaign with the slow profile (and writes its outcome counts to
tables/robustness_campaign.md), while the default run keeps the same tests, unmarked, with the fast profile.
"""
import os

import pytest

FAST_EXAMPLES = 25
SLOW_EXAMPLES = 300

try:
    from hypothesis import HealthCheck, settings
except ImportError:  # hypothesis is a test extra: the property tests then fail to import, the others run
    settings = None
else:
    _common = dict(deadline=None, suppress_health_check=[HealthCheck.too_slow, HealthCheck.filter_too_much])
    # the fast profile is derandomized: the default run (and CI) tries the same examples every time, so it cannot
    # pass or fail by the luck of the draw (a fresh clone once drew a valid but minutes-long simulate); the slow
    # profile draws fresh examples for the campaign
    settings.register_profile("fast", max_examples=FAST_EXAMPLES, derandomize=True, **_common)
    settings.register_profile("slow", max_examples=SLOW_EXAMPLES, **_common)
    settings.load_profile("fast")


def selects_slow(markexpr: str) -> bool:
    """Whether the -m expression selects a test marked only ``slow`` ('slow' and 'slow or not slow' do; '' and
    'not slow' do not)."""
    if not markexpr or not markexpr.strip():
        return False
    try:
        from _pytest.mark.expression import Expression

        return bool(Expression.compile(markexpr).evaluate(lambda name, **kw: name == "slow"))
    except Exception:  # a pytest without that module: the plain reading
        return "slow" in markexpr and "not slow" not in markexpr


def hypothesis_profile(config) -> str:
    env = os.environ.get("THEORYKIT_HYPOTHESIS", "").strip()
    if env in ("slow", "fast"):
        return env
    return "slow" if selects_slow(config.getoption("markexpr", "") or "") else "fast"


def pytest_configure(config):
    config.theorykit_hypothesis_profile = hypothesis_profile(config)
    if settings is not None:
        settings.load_profile(config.theorykit_hypothesis_profile)


@pytest.hookimpl(tryfirst=True)  # before -m deselects: the property tests join a slow run
def pytest_collection_modifyitems(config, items):
    if getattr(config, "theorykit_hypothesis_profile", "fast") != "slow":
        return
    for item in items:
        if getattr(getattr(item, "obj", None), "is_hypothesis_test", False):
            item.add_marker(pytest.mark.slow)


def pytest_terminal_summary(terminalreporter, config):
    """The outcome counts of the generated inputs (set by tests/test_properties.py when it ran)."""
    campaign = getattr(config, "theorykit_campaign", None)
    if not campaign:
        return
    terminalreporter.write_sep("-", f"generated inputs ({config.theorykit_hypothesis_profile} profile)")
    for name in sorted(campaign):
        counts = ", ".join(f"{k}: {v}" for k, v in sorted(campaign[name].items()))
        terminalreporter.write_line(f"{name}: {sum(campaign[name].values())} examples ({counts})")

