"""The cause first in a failed start's reason (issue 37): a child that ends while its
readiness is awaited is reported by its exit and the last line it wrote (the
traceback's exception, nginx's `[emerg]` line), the probe's last refusal after it."""

from __future__ import annotations

import sys
import textwrap

import pytest

from actors._shell._readiness import exited_unready
from actors._shell._start_output import LAST_LINE_CHARS, last_line
from actors.testing import free_port
from supervision import ChildSpec, ExitKind, ExitReason, StartError, SupervisorSpec, TcpProbe

REFUSED = "nothing listens on port 18102 (connection refused)"


def test_the_exit_and_its_last_line_lead_and_the_probe_follows() -> None:
    tail = '2026/11/29 [emerg] 12#12: unknown directive "lisen" in /etc/nginx.conf:3\n\n'
    reason = exited_unready(ExitReason(ExitKind.EXIT_CODE, code=1, stderr_tail=tail), REFUSED)
    assert str(reason) == (
        'exit code 1 (2026/11/29 [emerg] 12#12: unknown directive "lisen" in /etc/nginx.conf:3; '
        f"its readiness probe had found: {REFUSED})"
    )


def test_without_output_the_exit_leads_and_the_probe_follows() -> None:
    reason = exited_unready(ExitReason(ExitKind.KILLED, signal=11), REFUSED)
    assert str(reason) == f"killed by SIGSEGV (its readiness probe had found: {REFUSED})"


def test_a_reason_with_words_of_its_own_keeps_them() -> None:
    raised = ExitReason(ExitKind.EXCEPTION, exc_type="KeyError", message="'db'")
    assert exited_unready(raised, REFUSED) == raised


def test_the_last_line_is_bounded_and_escaped() -> None:
    said = last_line("first\n" + "\x1b[31m" + "x" * 1000 + "\n  \n")
    assert len(said) == LAST_LINE_CHARS and "\x1b" not in said
    assert last_line("ok \x1b]0;title\x07 line") == "ok \\x1b]0;title\\x07 line"
    assert last_line(" \n") == ""


PROGRAM = textwrap.dedent(
    """
    import time
    time.sleep(0.5)  # long enough for a refusal or two of its readiness probe
    raise SystemExit("bad config: no such table 'users'")
    """
)


def test_a_child_that_exits_while_awaited_names_its_cause_first(tree) -> None:
    ref = tree(SupervisorSpec(id="root", intensity=0))
    port = free_port()
    with pytest.raises(StartError) as err:
        ref.proxy().start_child(
            ChildSpec(
                id="app",
                command=[sys.executable, "-c", PROGRAM],
                ready=TcpProbe(port, period=0.05),
                start_timeout=30,
            )
        ).get()
    reason = err.value.reason
    assert reason.kind is ExitKind.EXIT_CODE and reason.code == 1
    assert str(reason).startswith("exit code 1 (bad config: no such table 'users'; "), reason
    assert f"its readiness probe had found: tcp 127.0.0.1:{port}: nothing listens" in str(reason)
    assert err.value.why.startswith("failed to start: exit code 1 (bad config"), err.value.why
