"""pykka's message loop body, once, for every actor of a tree.

pykka's `Actor._actor_loop_running` (pykka/_actor.py) handles a message so: the
handler's result answers an asker; an `Exception` goes to the asker, or, for a
told message, is logged and stops the actor after its `on_failure`; a
`BaseException` stops the actor and then, through pykka's registry, every actor
of the process. Our actors (the pooled workers, the threaded
nannies) each need that body with a change of their own (a reply set later, a
nanny's deferred calls), so it is here, once: `handle`. So is the answer to a
message its actor will never handle (`answer_dead`, `teardown`).

Where we differ from pykka, and why:
- A `BaseException` ends the actor's own tree at most, never another: the process
  may hold several trees. The actor's `on_fatal` decides how: by default it stops at
  once, as pykka's does (its `on_stop` runs), and tells the actor above it `Fatal`;
  a tree's root nanny, told, stops its tree in order, with an exit reason that says
  why. The actor above is the one whose handler made this one (`current()`): a
  worker's nanny, a nested nanny's parent.
- An asker whose message ended in a `BaseException` is answered `ActorDeadError`
  (pykka leaves it waiting), and an error returned to an asker is not logged.

It leans on pykka's private API: it calls `Actor._handle_receive`,
`_handle_failure`, `_stop` and `messages._ActorStop`, and replaces the loop's steps
`_start_actor_loop`, `_actor_loop_setup/_running/_teardown`; checked against
pykka 4.5 (pyproject.toml says `pykka>=4.5`). The check below fails at import, by
name, if a pykka release drops one of them, rather than pinning pykka below its
next major version.
"""

from __future__ import annotations

import contextlib
import logging
import queue
import sys
import threading
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import Any

import pykka
from pykka import messages as pykka_messages

log = logging.getLogger("nannytree")

LATER: Any = object()  # a handler's answer: the reply is set later (by the handler's actor)

# What we call, and the loop steps we replace (a renamed step would silently be pykka's again).
_PRIVATE = (
    "_handle_receive",
    "_handle_failure",
    "_stop",
    "_start_actor_loop",
    "_actor_loop_setup",
    "_actor_loop_running",
    "_actor_loop_teardown",
)
_missing = [name for name in _PRIVATE if not hasattr(pykka.Actor, name)]
if not hasattr(pykka_messages, "_ActorStop"):
    _missing.append("messages._ActorStop")
if _missing:
    import importlib.metadata  # only to say so: it costs the host 4 MB

    raise ImportError(
        f"nannytree runs its actors on pykka's private API, checked against pykka 4.5; "
        f"pykka {importlib.metadata.version('pykka')} lacks {', '.join(_missing)}"
    )


@dataclass(frozen=True)
class Fatal:
    """Told to the actor above one that failed with a BaseException (where pykka
    would stop every actor of the process): its tree must end, saying why."""

    error: BaseException
    ref: pykka.ActorRef[Any]  # the actor that failed
    where: str  # who that was, as well as the teller can say


_here = threading.local()  # .actor: the actor whose message this thread handles


def current() -> pykka.ActorRef[Any] | None:
    """The actor whose message this thread is handling, if any: the actor above
    any actor made now."""
    actor = getattr(_here, "actor", None)
    return actor.actor_ref if actor is not None else None


class serving:  # lower case, as contextlib.suppress: used only in `with`
    """While this thread handles a message of `actor` (actors made meanwhile have
    it above them)."""

    __slots__ = ("actor", "outer")

    def __init__(self, actor: pykka.Actor) -> None:
        self.actor = actor

    def __enter__(self) -> None:
        self.outer = getattr(_here, "actor", None)
        _here.actor = self.actor

    def __exit__(self, *exc_info: object) -> None:
        _here.actor = self.outer


def handle(
    actor: pykka.Actor,
    envelope: Any,
    later: object,
    on_fatal: Callable[[BaseException], None],
) -> bool:
    """Handle one message as pykka's loop does (with the changes above). False if
    the handler answered `later`: its reply is the handler's to set."""
    fatal: BaseException | None = None
    with serving(actor):
        try:
            response = actor._handle_receive(envelope.message)
            if response is later:
                return False
            if envelope.reply_to is not None:
                envelope.reply_to.set(response)
        except Exception:
            answer_failure(actor, envelope.reply_to)
        except BaseException as e:
            fatal = e
    if fatal is not None:
        log.error("%s failed with %s; its tree stops", actor, type(fatal).__name__, exc_info=fatal)
        try:
            on_fatal(fatal)
        finally:
            with contextlib.suppress(queue.Full):  # on_fatal may have answered it
                answer_dead(envelope)
    return True


def set_up(actor: pykka.Actor, on_fatal: Callable[[BaseException], None]) -> None:
    """pykka's `on_start` step: an Exception stops the actor; a BaseException is fatal."""
    try:
        pykka.Actor._actor_loop_setup(actor)
    except BaseException as e:  # pykka lets it end the actor's thread
        log.error("%s failed with %s in on_start", actor, type(e).__name__, exc_info=e)
        on_fatal(e)


def answer_failure(actor: pykka.Actor, reply_to: pykka.Future[Any] | None) -> None:
    """pykka's answer to a handler that raised (call it in the `except`): an asker
    gets the error; a told message's error stops the actor, after on_failure."""
    if reply_to is not None:
        reply_to.set_exception()
        return
    actor._handle_failure(*sys.exc_info())
    try:
        actor.on_failure(*sys.exc_info())
    except Exception:
        actor._handle_failure(*sys.exc_info())


def stop_fatally(
    actor: pykka.Actor, above: pykka.ActorRef[Any] | None, error: BaseException
) -> None:
    """The default `on_fatal`: the actor stops at once, as pykka's does (its on_stop
    runs), and the actor above it is told `Fatal` (it ends the tree)."""
    try:
        actor._stop()
    finally:
        if above is not None:
            tell_quietly(above, Fatal(error, actor.actor_ref, str(actor)))


def tell_quietly(ref: pykka.ActorRef[Any], message: Any) -> None:
    """Tell, and drop the message if the actor has stopped (as OTP drops a message
    to a dead process): a late message is normal, not an error."""
    with contextlib.suppress(pykka.ActorDeadError):
        ref.tell(message)


def dead(reply_to: pykka.Future[Any]) -> None:
    """Answer a call its actor will never answer: ActorDeadError."""
    error = pykka.ActorDeadError("the actor stopped before handling the message")
    reply_to.set_exception(exc_info=(type(error), error, None))


def answer_dead(envelope: Any) -> None:
    """pykka's answer to a message its actor will never handle
    (pykka/_actor.py, `_actor_loop_teardown`): a stop is done, an ask gets
    ActorDeadError, a tell is dropped."""
    if envelope.reply_to is None:
        return
    if isinstance(envelope.message, pykka_messages._ActorStop):
        envelope.reply_to.set(None)
    else:
        dead(envelope.reply_to)


def teardown(actor: pykka.Actor, held: Iterable[Any] = ()) -> None:
    """After the actor stopped: answer the messages it held, then those in its inbox."""
    for envelope in held:
        answer_dead(envelope)
    inbox = actor.actor_inbox
    while not inbox.empty():
        answer_dead(inbox.get())


class ThreadedActor(pykka.ThreadingActor):
    """A pykka ThreadingActor whose loop body is `handle`: a BaseException ends at
    most its own tree (see the module docstring)."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self._above = current()

    def _actor_loop_setup(self) -> None:
        set_up(self, self.on_fatal)

    def _actor_loop_running(self) -> None:
        while not self.actor_stopped.is_set():
            self._handle_envelope(self.actor_inbox.get())

    def _handle_envelope(self, envelope: Any) -> None:
        handle(self, envelope, LATER, self.on_fatal)

    def _actor_loop_teardown(self) -> None:
        teardown(self)

    def on_fatal(self, error: BaseException) -> None:
        """A BaseException in a handler (pykka: stop every actor): stop, tell the actor above."""
        stop_fatally(self, self._above, error)
