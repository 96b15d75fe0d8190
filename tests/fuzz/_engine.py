"""The fuzzing loop: inputs made from valid seeds, each under a deadline, memory watched.

A target turns bytes into a call of the code under test and returns an outcome
(a short text naming what happened: "ok", or the kind of documented error). Any
other exception, an input that runs past its deadline, or a target's own check
failing (`Broken`) is a finding. Inputs come from the target's generator (valid
or nearly valid structure) and from byte mutations of the corpus: the seeds,
plus every input that produced an outcome not seen before.
"""

from __future__ import annotations

import os
import random
import re
import signal
import sys
import time
import traceback
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
MAX_CORPUS = 1024  # inputs kept to mutate: bounded, so memory is the target's
MAX_OUTCOMES = 4096  # distinct outcomes counted; more count as one
MAX_FINDINGS = 20  # distinct findings before a run gives up on a target

# Values that break parsers: limits of int64/uint32, floats without a value,
# digits that str.isdigit() accepts but int() does not, and broken UTF-8.
INTERESTING = (
    *(b"0", b"-1", b"1", b"255", b"256", b"4096", b"65535", b"65536", b"4194304"),
    *(b"2147483647", b"4294967296", b"9223372036854775807", b"9223372036854775808"),
    *(b"-9223372036854775809", b"1e999", b"-1e999", b"nan", b"inf", b"1e-320", b"0.0"),
    *(b"9" * 400, "\u00b2".encode(), "\u0663".encode(), "\u2028".encode(), b"\xff"),
    *(b"\x00", b"\xed\xa0\x80", b'"', b"\\", b"\n", b"\r\n", b"[", b"]", b"{", b"}"),
)
_DIGITS = re.compile(rb"-?\d+(?:\.\d+)?")


class Hang(BaseException):
    """The input ran past its deadline (raised by the alarm, in the fuzzing thread)."""


class Broken(Exception):
    """A target's own check failed: the code answered wrongly without raising."""


class Target:
    """What a target gives the loop; subclasses fill it in."""

    name = ""
    max_len = 8192  # bytes of one input
    deadline = 1.0  # CPU seconds of one input (a busy machine does not stretch them)
    wait_deadline = 30.0  # wall seconds of one input: an answer that never comes
    fresh = 0.5  # share of inputs made by `generate` rather than by mutation
    tokens: tuple[bytes, ...] = ()  # pieces of valid input, inserted by mutations

    def open(self) -> None:
        """Set up what every input shares (a socket, a live tree)."""

    def close(self) -> None:
        """Tear it down; raise Broken if it was left in a bad state."""

    def seeds(self) -> list[bytes]:
        return []

    def generate(self, rng: random.Random) -> bytes:
        raise NotImplementedError

    def run(self, data: bytes) -> str:
        """Feed one input; return its outcome. Raise nothing the code documents."""
        raise NotImplementedError

    def state(self) -> str:
        """What the target holds now, besides memory (threads, descriptors...)."""
        return ""


def mutate(
    rng: random.Random, data: bytes, corpus: list[bytes], tokens: tuple[bytes, ...], max_len: int
) -> bytes:
    """`data` changed in one to eight places: bits, bytes, runs, tokens, splices."""
    buf = bytearray(data)
    pieces = tokens + INTERESTING
    for _ in range(rng.choice((1, 1, 1, 2, 2, 3, 4, 8))):
        n = len(buf)
        op = rng.randrange(10)
        if op == 0 and n:
            buf[rng.randrange(n)] ^= 1 << rng.randrange(8)
        elif op == 1 and n:
            buf[rng.randrange(n)] = rng.randrange(256)
        elif op == 2:
            i = rng.randint(0, n)
            buf[i:i] = rng.randbytes(rng.randint(1, 8))
        elif op == 3 and n:
            i = rng.randrange(n)
            del buf[i : i + rng.randint(1, 16)]
        elif op == 4 and n:
            i = rng.randrange(n)
            piece = buf[i : rng.randint(i, min(n, i + 64))]
            k = rng.randint(0, n)
            buf[k:k] = piece * rng.randint(1, 4)
        elif op in (5, 6):
            i = rng.randint(0, n)
            buf[i:i] = rng.choice(pieces)
        elif op == 7:
            numbers = list(_DIGITS.finditer(buf))
            if numbers:
                m = rng.choice(numbers)
                buf[m.start() : m.end()] = rng.choice(INTERESTING[:20])
        elif op == 8 and corpus:
            other = rng.choice(corpus)
            buf = buf[: rng.randint(0, n)] + other[rng.randint(0, len(other)) :]
        elif op == 9 and n:
            del buf[rng.randint(0, n) :]
    return bytes(buf[:max_len])


def rss() -> int:
    """This process's resident memory, in bytes."""
    with open("/proc/self/statm") as f:
        return int(f.read().split()[1]) * os.sysconf("SC_PAGE_SIZE")


@dataclass
class Finding:
    key: str
    what: str
    data: bytes
    count: int = 1
    saved: Path | None = None


@dataclass
class Report:
    target: str
    inputs: int = 0
    seconds: float = 0.0
    rss_start: int = 0
    rss_warm: int = 0  # after the first twentieth of the run (imports, caches, the corpus)
    rss_half: int = 0
    rss_end: int = 0
    state_warm: str = ""
    state_end: str = ""
    slowest: float = 0.0
    outcomes: dict[str, int] = field(default_factory=dict)
    findings: dict[str, Finding] = field(default_factory=dict)

    def summary(self) -> str:
        rate = self.inputs / self.seconds if self.seconds else 0.0
        mb = 1 << 20
        lines = [
            f"{self.target}: {self.inputs} inputs in {self.seconds:.0f} s ({rate:.0f}/s), "
            f"{len(self.outcomes)} distinct outcomes, slowest input {self.slowest * 1000:.1f} ms",
            f"  memory (RSS): {self.rss_start / mb:.1f} MB at start, "
            f"{self.rss_warm / mb:.1f} MB after the first twentieth, {self.rss_half / mb:.1f} MB "
            f"at half, {self.rss_end / mb:.1f} MB at the end "
            f"({(self.rss_end - self.rss_half) / mb:+.1f} MB in the second half)",
        ]
        if self.state_warm or self.state_end:
            lines.append(f"  held: {self.state_warm or '-'} -> {self.state_end or '-'}")
        if not self.findings:
            lines.append("  findings: none")
        for f in self.findings.values():
            lines.append(f"  FINDING ({f.count}x) {f.key}: {f.what[:300]}")
            lines.append(f"    input {f.data[:200]!r}{'...' if len(f.data) > 200 else ''}")
            if f.saved is not None:
                lines.append(f"    saved to {f.saved}")
        return "\n".join(lines)


def _where(e: BaseException) -> str:
    """The innermost frame of the project's own code in `e`'s traceback."""
    frames = traceback.extract_tb(e.__traceback__)
    ours = [
        f for f in frames if f.filename.startswith(str(ROOT)) and "/tests/fuzz/" not in f.filename
    ]
    if not (ours or frames):
        return "?"
    frame = (ours or frames)[-1]
    return f"{os.path.relpath(frame.filename, ROOT)}:{frame.lineno}"


def _on_alarm(signum: int, frame: object) -> None:
    raise Hang


def fuzz(
    target: Target,
    inputs: int,
    *,
    seconds: float | None = None,
    seed: int = 0,
    out: Path | None = None,
    progress: Callable[[str], None] | None = None,
    every: float = 30.0,
) -> Report:
    """Run `target` on up to `inputs` inputs (or for `seconds`); what was found."""
    rng = random.Random(seed)
    report = Report(target.name, rss_start=rss())
    warm_at = min(inputs, max(1000, inputs // 20))
    half_at = max(warm_at, inputs // 2)
    previous = signal.signal(signal.SIGALRM, _on_alarm)
    previous_prof = signal.signal(signal.SIGPROF, _on_alarm)
    target.open()
    try:
        corpus = [s[: target.max_len] for s in target.seeds()]
        n_seeds = len(corpus)
        started = time.monotonic()
        stop_at = started + seconds if seconds else float("inf")
        next_note = started + every
        warm_by = started + seconds / 20 if seconds else float("inf")
        half_by = started + seconds / 2 if seconds else float("inf")
        for i in range(inputs):
            if i < n_seeds:
                data = corpus[i]
            elif rng.random() < target.fresh:
                data = target.generate(rng)[: target.max_len]
            else:
                data = mutate(rng, rng.choice(corpus), corpus, target.tokens, target.max_len)
            outcome = _one(target, data, report, out)
            if outcome == "HANG":  # not mutated further: each of its kind costs a deadline
                report.outcomes[outcome] = report.outcomes.get(outcome, 0) + 1
            elif outcome not in report.outcomes:
                if len(report.outcomes) >= MAX_OUTCOMES:
                    outcome = "(other)"
                report.outcomes.setdefault(outcome, 0)
                if len(corpus) < MAX_CORPUS:
                    corpus.append(data)
                else:
                    corpus[rng.randrange(n_seeds, MAX_CORPUS)] = data
                report.outcomes[outcome] += 1
            else:
                report.outcomes[outcome] += 1
            report.inputs = i + 1
            now = time.monotonic()
            if not report.rss_warm and (report.inputs >= warm_at or now >= warm_by):
                report.rss_warm, report.state_warm = rss(), target.state()
            if not report.rss_half and (report.inputs >= half_at or now >= half_by):
                report.rss_half = rss()
            if progress is not None and now >= next_note:
                next_note = now + every
                rate = report.inputs / (now - started)
                progress(
                    f"  {target.name}: {report.inputs} inputs, {rate:.0f}/s, "
                    f"RSS {rss() / (1 << 20):.1f} MB, findings {len(report.findings)}"
                )
            if now >= stop_at or len(report.findings) >= MAX_FINDINGS:
                break
        report.seconds = time.monotonic() - started
        if not report.rss_warm:
            report.rss_warm, report.state_warm = rss(), target.state()
        report.rss_half = report.rss_half or report.rss_warm
        report.rss_end, report.state_end = rss(), target.state()
    finally:
        try:
            target.close()
        except Broken as e:
            _record(report, f"Broken on close at {_where(e)}", str(e), b"", out)
        signal.setitimer(signal.ITIMER_PROF, 0)
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, previous)
        signal.signal(signal.SIGPROF, previous_prof)
    return report


def _one(target: Target, data: bytes, report: Report, out: Path | None) -> str:
    # CPU time, not wall time: on a loaded machine an input waits for a core, and
    # that is no finding. A loop that never ends is caught by the CPU timer, a wait
    # that never ends by the wall one.
    begun = time.process_time()
    signal.setitimer(signal.ITIMER_PROF, target.deadline)
    signal.setitimer(signal.ITIMER_REAL, max(target.wait_deadline, target.deadline))
    try:
        outcome = target.run(data)
    except Hang:
        outcome = "HANG"
        _record(report, "hang", f"no answer within {target.deadline} s of CPU", data, out)
    except KeyboardInterrupt:
        raise
    except BaseException as e:
        outcome = f"FINDING {type(e).__name__}"
        key = f"{type(e).__name__} at {_where(e)}"
        _record(report, key, f"{type(e).__name__}: {e}", data, out)
    finally:
        signal.setitimer(signal.ITIMER_PROF, 0)
        signal.setitimer(signal.ITIMER_REAL, 0)
    took = time.process_time() - begun
    report.slowest = max(report.slowest, took)
    if took > target.deadline and outcome != "HANG":
        _record(report, "slow", f"took {took:.2f} s of CPU, over {target.deadline} s", data, out)
    return outcome


def _record(report: Report, key: str, what: str, data: bytes, out: Path | None) -> None:
    found = report.findings.get(key)
    if found is not None:
        found.count += 1
        if len(data) < len(found.data):  # keep the shortest reproducer
            found.data, found.what = data, what
            _save(report.target, found, out)
        return
    found = report.findings[key] = Finding(key, what, data)
    _save(report.target, found, out)
    print(f"  {report.target}: FINDING {key}: {what[:200]}", file=sys.stderr, flush=True)


def _save(target: str, found: Finding, out: Path | None) -> None:
    if out is None:
        return
    out.mkdir(parents=True, exist_ok=True)
    if found.saved is None:
        found.saved = out / f"{target}-{len(list(out.glob(f'{target}-*.bin'))):02d}.bin"
    found.saved.write_bytes(found.data)
