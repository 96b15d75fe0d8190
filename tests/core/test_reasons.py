"""classify_exit and ExitReason: which exits are normal (OTP: normal, shutdown), how they read."""

from __future__ import annotations

import signal

import pytest

from supervision import ExitKind, ExitReason, classify_exit, signal_name


def test_exit_code_zero_is_normal():
    reason = classify_exit(0)
    assert reason == ExitReason(ExitKind.NORMAL, code=0)
    assert reason.is_normal


def test_exit_code_listed_in_normal_exit_codes_is_normal():
    reason = classify_exit(3, normal_exit_codes={0, 3})
    assert reason.kind is ExitKind.NORMAL
    assert reason.code == 3
    assert reason.is_normal


def test_exit_code_zero_is_abnormal_when_not_listed_as_normal():
    reason = classify_exit(0, normal_exit_codes={3})
    assert reason.kind is ExitKind.EXIT_CODE
    assert not reason.is_normal


def test_non_zero_exit_code_is_abnormal_and_keeps_the_stderr_tail():
    reason = classify_exit(2, stderr_tail="boom\n")
    assert reason == ExitReason(ExitKind.EXIT_CODE, code=2, stderr_tail="boom\n")
    assert not reason.is_normal


@pytest.mark.parametrize("sig", [signal.SIGKILL, signal.SIGTERM, signal.SIGSEGV])
def test_death_by_a_signal_the_supervisor_did_not_send_is_killed_and_abnormal(sig):
    reason = classify_exit(-sig, stderr_tail="tail")
    assert reason == ExitReason(ExitKind.KILLED, signal=sig, stderr_tail="tail")
    assert reason.code is None
    assert not reason.is_normal  # OTP: `killed` is abnormal


@pytest.mark.parametrize(
    ("returncode", "code", "sig"), [(-15, None, 15), (-9, None, 9), (1, 1, None)]
)
def test_any_exit_after_the_supervisor_asked_to_stop_is_shutdown(returncode, code, sig):
    reason = classify_exit(returncode, stop_requested=True, exc_type="ValueError")
    assert reason == ExitReason(ExitKind.SHUTDOWN, code=code, signal=sig)
    assert reason.is_normal


def test_python_exception_in_the_target_is_abnormal_and_carries_its_details():
    reason = classify_exit(
        1,
        exc_type="ValueError",
        exc_message="bad input",
        traceback="Traceback ...",
        stderr_tail="err",
    )
    assert reason == ExitReason(
        ExitKind.EXCEPTION,
        code=1,
        exc_type="ValueError",
        message="bad input",
        traceback="Traceback ...",
        stderr_tail="err",
    )
    assert not reason.is_normal


def test_exception_wins_over_a_normal_exit_code():
    assert classify_exit(0, exc_type="KeyError").kind is ExitKind.EXCEPTION


@pytest.mark.parametrize("kind", list(ExitKind))
def test_only_normal_and_shutdown_are_normal(kind):
    assert ExitReason(kind).is_normal is (kind in (ExitKind.NORMAL, ExitKind.SHUTDOWN))


def test_shutdown_with_a_message_is_normal_like_otp_shutdown_tuple():
    reason = ExitReason.shutdown("reached_max_restart_intensity")
    assert reason.kind is ExitKind.SHUTDOWN
    assert reason.is_normal


def test_factories():
    assert ExitReason.normal() == ExitReason(ExitKind.NORMAL, code=0)
    assert ExitReason.normal(3) == ExitReason(ExitKind.NORMAL, code=3)
    assert ExitReason.shutdown() == ExitReason(ExitKind.SHUTDOWN)
    assert ExitReason.start_failure("no such file") == ExitReason(
        ExitKind.START_FAILURE, message="no such file"
    )


@pytest.mark.parametrize(
    ("reason", "text"),
    [
        (ExitReason.normal(), "normal"),
        (ExitReason.shutdown(), "shutdown"),
        (ExitReason.shutdown("auto_shutdown"), "shutdown: auto_shutdown"),
        (ExitReason(ExitKind.EXIT_CODE, code=2), "exit code 2"),
        (ExitReason(ExitKind.KILLED, signal=9), "killed by SIGKILL"),
        (ExitReason(ExitKind.KILLED, signal=15), "killed by SIGTERM"),
        (ExitReason(ExitKind.KILLED), "killed by a signal"),
        (ExitReason(ExitKind.KILLED, signal=200), "killed by signal 200"),
        (ExitReason(ExitKind.EXCEPTION, exc_type="ValueError", message="x"), "ValueError: x"),
        (ExitReason(ExitKind.EXCEPTION, exc_type="ValueError"), "ValueError"),
        (ExitReason.start_failure("no such file"), "start_failure: no such file"),
        (ExitReason(ExitKind.START_TIMEOUT), "start_timeout"),
        (ExitReason(ExitKind.MEMORY_LIMIT, message="rss 2 MB"), "memory_limit: rss 2 MB"),
        (ExitReason(ExitKind.LAUNCHER_DIED), "launcher_died"),
        (ExitReason(ExitKind.ACTOR_CRASHED), "actor_crashed"),
    ],
    ids=str,
)
def test_str_says_why_the_child_stopped(reason, text):
    assert str(reason) == text


def test_signal_name():
    assert signal_name(9) == "SIGKILL"
    assert signal_name(None) == "a signal"
    assert signal_name(200) == "signal 200"


def test_exit_reason_is_frozen_and_hashable():
    reason = classify_exit(1)
    assert hash(reason) == hash(classify_exit(1))
    with pytest.raises(AttributeError):
        reason.code = 2  # type: ignore[misc]
