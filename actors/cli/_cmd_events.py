"""`nannytree events`: the tree's lifecycle events, past and (`-f`) as they come."""

from __future__ import annotations

import argparse
import json

from .._operate._records import EventRecord
from ._client import error, socket_of
from ._control import stream
from ._exit import FAILED, OK


def cmd_events(args: argparse.Namespace) -> int:
    request = {"op": "events", "follow": args.follow, "last": args.last}
    try:
        for message in stream(socket_of(args), request):
            if "event" in message:
                if args.json:
                    print(json.dumps(message["event"]), flush=True)
                else:
                    print(EventRecord.from_dict(message["event"]), flush=True)  # escaped
            elif "end" in message:
                if message.get("ok") is False:
                    error(message["end"])
                    return FAILED
                return OK
            elif not message.get("ok", True):
                error(message.get("error"))
                return FAILED
    except KeyboardInterrupt:
        return OK
    return OK
