"""Server-sent event streams of the Statki API as typed events, over the generated
client's own HTTP connection (`statki_client`): the match stream
(`GET /v1/matches/{id}/stream`) and the player feed (`GET /v1/stream`). A dropped
connection is resumed with `Last-Event-ID`, so no event is missed or repeated; the
match stream ends when the match does (the server then answers 204).

Each event's data becomes the generated class of its `kind` (`ShotFiredEvent`,
`ChallengeNotice`, ...); a kind this client does not know (a newer server's, such as a
`state` snapshot) comes as an `OtherEvent` rather than being dropped.

`export_matches` reads a player's ndjson export the same way, a typed `MatchExport` a line.
"""

from __future__ import annotations

import json
import time
from dataclasses import dataclass
from datetime import datetime
from typing import Any, Iterator, Optional

import httpx

from statki_client import AuthenticatedClient, models


@dataclass
class OtherEvent:
    """An event of a kind this client has no class for."""

    kind: str
    id: Optional[str]
    data: Any


# Kinds whose class is not named `{Kind}{Suffix}`: a stream's opening snapshot, and a
# player of the match coming online or going away (not a numbered event: no `id:`).
_SPECIAL = {"state": "MatchState", "presence": "PresenceChange"}


def _class_for(kind: str, suffix: str) -> Any:
    name = _SPECIAL.get(kind) or "".join(word.capitalize() for word in kind.split("_")) + suffix
    return getattr(models, name, None)


def _typed(kind: str, event_id: Optional[str], data: Any, suffix: str) -> Any:
    cls = _class_for(kind, suffix) if isinstance(data, dict) else None
    if cls is None:
        return OtherEvent(kind=kind, id=event_id, data=data)
    return cls.from_dict(data)


def _events(response: httpx.Response) -> Iterator[tuple[Optional[str], str, Any]]:
    """(id, kind, data) of each event of an open text/event-stream answer."""
    data: list[str] = []
    kind = "message"
    event_id: Optional[str] = None
    for line in response.iter_lines():
        if line == "":
            if data:
                yield event_id, kind, json.loads("\n".join(data))
            data, kind, event_id = [], "message", None
            continue
        if line.startswith(":"):
            continue
        field, _, value = line.partition(":")
        if value.startswith(" "):
            value = value[1:]
        if field == "data":
            data.append(value)
        elif field == "event":
            kind = value
        elif field == "id":
            event_id = value


def follow(
    client: AuthenticatedClient,
    path: str,
    suffix: str,
    last_event_id: Optional[str] = None,
    max_retries: int = 10,
) -> Iterator[Any]:
    """Every event of the stream at `path`, typed, resumed after dropped connections,
    until the server answers 204 (nothing more will come)."""
    http = client.get_httpx_client()
    failures = 0
    while True:
        headers = {"accept": "text/event-stream"}
        if last_event_id is not None:
            headers["last-event-id"] = last_event_id
        try:
            with http.stream("GET", path, headers=headers, timeout=httpx.Timeout(10.0, read=None)) as response:
                if response.status_code == 204:
                    return
                if response.status_code != 200:
                    response.read()
                    if response.status_code != 429 and response.status_code < 500:
                        raise RuntimeError(f"the stream was refused: {response.status_code} {response.text}")
                    raise httpx.TransportError(f"the stream answered {response.status_code}")
                failures = 0
                for event_id, kind, data in _events(response):
                    if event_id is not None:
                        last_event_id = event_id
                    yield _typed(kind, event_id, data, suffix)
        except httpx.TransportError:
            failures += 1
            if failures > max_retries:
                raise
            time.sleep(min(10.0, 0.5 * 2**failures))


def follow_match(
    client: AuthenticatedClient, match_id: Any, last_event_id: Optional[str] = None
) -> Iterator[Any]:
    """The match's events (`GET /v1/matches/{id}/stream`) as typed objects."""
    return follow(client, f"/v1/matches/{match_id}/stream", "Event", last_event_id)


def follow_notices(
    client: AuthenticatedClient, last_event_id: Optional[str] = None
) -> Iterator[Any]:
    """The caller's notices (`GET /v1/stream`) as typed objects; never ends by itself."""
    return follow(client, "/v1/stream", "Notice", last_event_id)


def export_matches(
    client: AuthenticatedClient,
    player_id: Any,
    since: Optional[datetime] = None,
    until: Optional[datetime] = None,
    max: Optional[int] = None,
) -> Iterator[models.MatchExport]:
    """A player's finished matches, newest first (`GET /v1/players/{id}/matches/export`),
    read line by line as they are streamed: the generator has no reader for ndjson.
    A stream cut short raises rather than ending early."""
    params: dict[str, str] = {}
    if since is not None:
        params["since"] = since.isoformat()
    if until is not None:
        params["until"] = until.isoformat()
    if max is not None:
        params["max"] = str(max)
    path = f"/v1/players/{player_id}/matches/export"
    with client.get_httpx_client().stream("GET", path, params=params) as response:
        if response.status_code != 200:
            response.read()
            raise RuntimeError(f"the export was refused: {response.status_code} {response.text}")
        for line in response.iter_lines():
            if line:
                yield models.MatchExport.from_dict(json.loads(line))
