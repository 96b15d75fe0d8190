"""The nannytree pytest plugin: active once nannytree is installed.

    def test_worker_comes_back(nanny_tree):
        tree = nanny_tree(SupervisorSpec(id="root", children=[...]))
        pid = tree.kill("worker")
        tree.wait_for(EventKind.CHILD_STARTED, "worker", where=lambda e: e.pid != pid)

    def test_the_service_answers(nanny_tree):
        port = testing.free_port()
        tree = nanny_tree("tree.toml", vars={"PORT": port}, strict=True)
        tree.wait_ready("web")

Every tree started through the fixture is stopped at teardown, and the test
fails if any of its processes is still alive, or (strict mode) if any of its
children exited, failed to start or was restarted without the test causing it.
A failed test's report shows each tree's last events and the stderr tails of
the children that crashed.
"""

from __future__ import annotations

import logging
import os
from collections.abc import Callable, Generator, Iterator, Mapping
from typing import Any

import pytest

from ._deadlines import TEARDOWN_SHUTDOWN

TYPE_CHECKING = False  # typing's names only: the harness is imported when a tree starts
if TYPE_CHECKING:
    from supervision import SupervisorSpec

    from ._harness import TreeHarness

STRICT_INI = "nannytree_strict"
TEARDOWN_INI = "nannytree_teardown_shutdown"
_TREES = "_nannytree_trees"  # the attribute of a fixture's value that lists its trees
_REPORTED = pytest.StashKey[bool]()
# How a failed start's message (supervision.StartError) begins its quote of the output.
_OUTPUT_QUOTE = "; its output ended with:"


def pytest_addoption(parser: pytest.Parser) -> None:
    parser.addini(
        STRICT_INI,
        "nanny_tree fixtures: strict mode unless a test says strict=False (default false)",
        type="bool",
        default=False,
    )
    parser.addini(
        TEARDOWN_INI,
        "nanny_tree fixtures: seconds a tree gets to stop at teardown before what is left "
        f"is killed; 'none' for each child's own shutdown (default {TEARDOWN_SHUTDOWN:g})",
        type="string",
        default=str(TEARDOWN_SHUTDOWN),
    )


def pytest_configure(config: pytest.Config) -> None:
    # The tree's events as log lines would repeat, as "Captured log", what a failed
    # test's report shows in its events section.
    # (pytest captures a logger that does not propagate too: off, then.)
    logging.getLogger("nannytree.events").disabled = True


def _trees(config: pytest.Config) -> Iterator[Callable[..., TreeHarness]]:
    started: list[TreeHarness] = []

    def start(
        spec: SupervisorSpec | str | os.PathLike[str],
        *,
        strict: bool | None = None,
        vars: Mapping[str, object] | None = None,
        teardown_shutdown: float | str | None = "ini",
        **start_kwargs: Any,
    ) -> TreeHarness:
        """Start a tree: a SupervisorSpec, or the path of a TOML tree file (whose
        `${NAME}` take their values from `vars`, then the environment).

        `strict`: fail the test on any exit, failed start or restart it did not cause
        through the harness (or declare with `tree.expect_exit(id)`). Off unless
        given, or the ini option `nannytree_strict = true`: tests that cause faults
        by other means (os.kill, the nanny's own API) would fail under it, so it is
        asked for.

        `teardown_shutdown`: seconds the tree gets to stop at teardown before what is
        left is killed (None: each child's own `shutdown`); by default the ini option
        `nannytree_teardown_shutdown`, else 1 s.
        """
        __tracebackhide__ = True  # a failed start names the test's line
        if strict is None:
            strict = bool(config.getini(STRICT_INI))
        from supervision import SupervisorSpec

        from ._harness import TreeHarness

        if teardown_shutdown == "ini":
            teardown_shutdown = _teardown(config)
        start_kwargs["teardown_shutdown"] = teardown_shutdown
        if isinstance(spec, SupervisorSpec):
            if vars is not None:
                raise TypeError("vars= substitutes in a tree file: pass its path, not a spec")
            harness = TreeHarness(spec, strict=strict, **start_kwargs)
        else:
            harness = TreeHarness.from_toml(spec, vars=vars, strict=strict, **start_kwargs)
        started.append(harness)  # before its start: a start that fails is reported too
        return harness.start()

    setattr(start, _TREES, started)
    yield start
    problems = []
    leaks = {h.spec.id: left for h in started if (left := h.stop())}
    if leaks:
        problems.append(f"trees left processes behind: {leaks}")
    for harness in started:
        try:
            harness.check_strict()
        except AssertionError as e:
            problems.append(str(e))
    if problems:
        pytest.fail("\n".join(problems), pytrace=False)


def _teardown(config: pytest.Config) -> float | None:
    value = str(config.getini(TEARDOWN_INI)).strip()
    if value.lower() == "none":
        return None
    try:
        seconds = float(value)
    except ValueError:
        raise pytest.UsageError(
            f"{TEARDOWN_INI} = {value!r}: give seconds (e.g. 1) or none"
        ) from None
    if seconds < 0:
        raise pytest.UsageError(f"{TEARDOWN_INI} = {value!r}: seconds must be >= 0")
    return seconds


@pytest.fixture
def nanny_tree(request: pytest.FixtureRequest) -> Iterator[Callable[..., TreeHarness]]:
    """Start trees with nanny_tree(spec) or nanny_tree("tree.toml", vars={...}); each
    is stopped and checked for leftovers (and, with strict=True, for exits the test
    did not cause)."""
    yield from _trees(request.config)


@pytest.fixture(scope="module")
def nanny_tree_module(request: pytest.FixtureRequest) -> Iterator[Callable[..., TreeHarness]]:
    """As nanny_tree, but the trees live until the module's last test (a tree
    that is slow to start, shared by several tests)."""
    yield from _trees(request.config)


@pytest.fixture(scope="session")
def nanny_tree_session(request: pytest.FixtureRequest) -> Iterator[Callable[..., TreeHarness]]:
    """As nanny_tree, for the whole session."""
    yield from _trees(request.config)


@pytest.hookimpl(wrapper=True)
def pytest_runtest_makereport(
    item: pytest.Item, call: pytest.CallInfo[None]
) -> Generator[None, pytest.TestReport, pytest.TestReport]:
    """A failed test's report (its first failed phase) gets, for each tree its
    fixtures started, a section with the last events and one with the stderr tails
    of the children that crashed, shown as pytest shows captured output."""
    report = yield
    if report.failed and not item.stash.get(_REPORTED, False):
        item.stash[_REPORTED] = True
        _summary_without_output(report)
        shown = report.longreprtext
        report.sections[:] = [s for s in report.sections if not _repeats(s, shown)]
        for harness in _harnesses(item):
            report.sections.extend(harness.report_sections(shown=shown))
    return report


def _summary_without_output(report: pytest.TestReport) -> None:
    """The short summary's line is the error's message, whole when pytest runs on CI;
    a failed start's message quotes the child's output, already shown above it, so
    the summary keeps only the reason before the quote."""
    crash = getattr(report.longrepr, "reprcrash", None)
    message = getattr(crash, "message", None)
    if isinstance(message, str) and _OUTPUT_QUOTE in message:
        crash.message = message.split(_OUTPUT_QUOTE, 1)[0]  # type: ignore[union-attr]


def _repeats(section: tuple[str, str], shown: str) -> bool:
    """Whether a captured stderr section says only what the failure already shows (a
    child's traceback, tee'd to the test's stderr and quoted in the error): one copy."""
    title, text = section
    lines = [line.strip() for line in text.splitlines() if line.strip()]
    return (
        title.startswith("Captured stderr") and bool(lines) and all(line in shown for line in lines)
    )


def _harnesses(item: pytest.Item) -> list[TreeHarness]:
    funcargs = getattr(item, "funcargs", None) or {}
    found: list[TreeHarness] = []
    for value in funcargs.values():
        trees = getattr(value, _TREES, None)
        if isinstance(trees, list):
            found.extend(t for t in trees if t not in found)
    return found
