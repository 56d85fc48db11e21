"""Plays a whole match against a bot with nothing but the `statki-client` package: the
client generated from openapi.yaml by openapi-python-client (`statki_client`) and its
stream helper (`statki_sse`). Registers a player, challenges a bot, places the fleet ship
by ship from the server's hints, fires until the match ends, then reads the match's
events as typed objects, one class per `kind`, both as pages and as the event stream.
It waits for the bot by following the match stream (the view is read again only when an
event came), never by polling.

Usage: python play_bot.py <base URL> [ruleset]
"""

import queue
import sys
import threading
import time
import uuid

from statki_client import AuthenticatedClient, Client
from statki_client.api.bots import list_bots
from statki_client.api.matches import create_match, export_match, fire, get_match, match_events, place_ship
from statki_client.api.players import create_player
from statki_client.models import (
    BattleStartedEvent,
    FleetLockedEvent,
    Level,
    MatchCreatedEvent,
    MatchExport,
    MatchFinishedEvent,
    MatchUpdate,
    NewMatch,
    NewPlayer,
    OpenedFleet,
    Orientation,
    ParticipantMatch,
    Phase,
    PlayerJoinedEvent,
    Problem,
    RuleSetId,
    Session,
    ShipPlacedEvent,
    ShipPosition,
    ShotAnswer,
    ShotFiredEvent,
    ShotRequest,
)
from statki_client.types import UNSET
from statki_sse import OtherEvent, export_matches, follow_match

BASE_URL = sys.argv[1]
RULESET = RuleSetId(sys.argv[2] if len(sys.argv) > 2 else "statki")
DEADLINE = time.monotonic() + 120


def expect(value, kind):
    """The typed answer, or a failure naming the problem the server gave instead."""
    if isinstance(value, Problem):
        raise SystemExit(f"the server refused: {value.code} {value.detail}")
    if not isinstance(value, kind):
        raise SystemExit(f"expected a {kind.__name__}, got {value!r}")
    return value


def view(client, match_id) -> ParticipantMatch:
    """Our own view: a participant's, typed as such (a spectator's is another class)."""
    return expect(get_match.sync(match_id, client=client), ParticipantMatch)


# What the match stream brought while we play (the stream is followed on a thread of its
# own, over a client of its own): `wait_for` waits on it rather than polling.
arrivals: "queue.Queue[object]" = queue.Queue()
live: list = []


def pump(client, match_id) -> None:
    for event in follow_match(client, match_id):  # ends when the match does
        live.append(event)
        arrivals.put(event)


def wait_for(client, match_id, ready) -> ParticipantMatch:
    """The view once `ready` holds, read again only after the stream brought something."""
    while True:
        current = view(client, match_id)
        if ready(current):
            return current
        try:
            arrivals.get(timeout=max(0.0, DEADLINE - time.monotonic()))
        except queue.Empty:
            raise SystemExit(f"the bot did not move in time: phase {current.phase}") from None
        # One read covers everything that arrived meanwhile.
        while not arrivals.empty():
            arrivals.get_nowait()


session = expect(
    create_player.sync(client=Client(base_url=BASE_URL), body=NewPlayer(name=f"Py-{uuid.uuid4().hex[:8]}")),
    Session,
)
me = AuthenticatedClient(base_url=BASE_URL, token=session.token)

bots = list_bots.sync(client=me)
assert isinstance(bots, list) and bots, f"no bots: {bots!r}"
bot = next((b for b in bots if b.level == Level.HARD), bots[0])

created = expect(create_match.sync(client=me, body=NewMatch(ruleset=RULESET, opponent=bot.id)), MatchUpdate)
match_id = created.id
follower = threading.Thread(
    target=pump, args=(AuthenticatedClient(base_url=BASE_URL, token=session.token), match_id), daemon=True
)
follower.start()
state = wait_for(me, match_id, lambda m: m.phase != Phase.WAITING)

# Ship by ship, at the first bow cell the server says fits.
while state.phase == Phase.PLACEMENT and state.next_ship:
    hints = state.placement_hints
    assert hints, "a participant placing its fleet gets hints"
    if hints.horizontal:
        position = ShipPosition(cell=hints.horizontal[0], orientation=Orientation.HORIZONTAL)
    else:
        position = ShipPosition(cell=hints.vertical[0], orientation=Orientation.VERTICAL)
    state = expect(place_ship.sync(match_id, state.next_ship.index, client=me, body=position), MatchUpdate)
assert state.fleet_locked is True, "the whole fleet is placed and locked"

# The first cell, in reading order, that is neither shot at nor known to be empty,
# whenever it is our turn.
cells = [f"{column}{row}" for row in range(1, 11) for column in "ABCDEFGHIJ"]
shots = 0
while True:
    state = wait_for(me, match_id, lambda m: m.phase == Phase.FINISHED or m.turn == session.id)
    if state.phase == Phase.FINISHED:
        break
    known = {shot.cell for shot in state.shots or []} | set(state.marked or [])
    target = next(cell for cell in cells if cell not in known)
    answer = expect(fire.sync(match_id, client=me, body=ShotRequest(cell=target)), ShotAnswer)
    shots += 1
    if answer.phase == Phase.FINISHED:
        break

follower.join(timeout=10)
assert not follower.is_alive(), "the stream ends with the match"
# Opened without a resume point, the live stream began with our whole view.
assert type(live[0]).__name__ == "MatchState", type(live[0])
final = view(me, match_id)
assert final.phase == Phase.FINISHED and final.result, "the match is over with a result"
assert str(session.id) in final.names and str(bot.id) in final.names, "a read names both players"
# The record opens both locked fleets, every field present.
assert isinstance(final.record, list) and len(final.record) == 2, final.record
for opened in final.record:
    assert isinstance(opened, OpenedFleet) and opened.commitment_verified, opened
    assert opened.salt and opened.commitment and opened.ships

# The whole feed, typed: each event is the class of its kind.
events = []
after = 0
while True:
    page = match_events.sync(match_id, client=me, after=after)
    assert isinstance(page, list), f"events: {page!r}"
    if not page:
        break
    events.extend(page)
    after = page[-1].seq
kinds = [type(event) for event in events]
assert kinds[0] is MatchCreatedEvent and kinds[1] is PlayerJoinedEvent, kinds[:2]
assert kinds.count(FleetLockedEvent) == 2
assert kinds.count(BattleStartedEvent) == 1
assert isinstance(events[-1], MatchFinishedEvent) or any(isinstance(e, MatchFinishedEvent) for e in events)
own_shots = [e for e in events if isinstance(e, ShotFiredEvent) and e.player == session.id]
assert len(own_shots) == shots, (len(own_shots), shots)
own_ships = [e for e in events if isinstance(e, ShipPlacedEvent) and e.player == session.id]
assert all(e.placement is not UNSET for e in own_ships), "our own placements are in our feed"
assert all(event.names is not UNSET for event in events), "events name the players"
finished = next(e for e in events if isinstance(e, MatchFinishedEvent))

# The same events as the stream sends them from the start (`Last-Event-ID: 0`: the whole
# log, no opening snapshot), typed the same way; kinds this client has no class for (a
# newer server's) are kept apart, not dropped.
streamed = list(follow_match(me, match_id, last_event_id="0"))
event_classes = set(kinds)
typed = [event for event in streamed if type(event) in event_classes]
assert [event.seq for event in typed] == [event.seq for event in events], "the stream sends every event once"
assert [type(event) for event in typed] == kinds, "each streamed event is the class of its kind"
# Anything else is the stream's opening snapshot, a player's presence, or a kind this
# client has no class for.
extras = {type(event).__name__ for event in streamed if type(event) not in event_classes}
assert extras <= {OtherEvent.__name__, "MatchState", "PresenceChange"}, extras
# The export: the same match as one document, and first in our own ndjson export.
exported = expect(export_match.sync(match_id, client=me), MatchExport)
assert len(exported.fleets) == 2 and all(fleet.commitment_verified for fleet in exported.fleets)
assert [type(event) for event in exported.events] == kinds, "the export holds every event"
newest = list(export_matches(me, session.id, max=1))
assert [match.id for match in newest] == [exported.id], "our newest finished match comes first"

winner = "we" if finished.winner == session.id else "the bot"
print(
    f"{RULESET.value}: {shots} shots, {len(events)} typed events (as many streamed), "
    f"{finished.reason.value}, {winner} won against {bot.name}"
)
