// Plays a whole match against the hard bot with nothing but this package: registers a
// player, challenges the bot, places the fleet ship by ship from the server's hints,
// fires until the match ends, and follows the match stream meanwhile as typed events: it
// waits for the bot by the stream (the view is read again only when an event came), never
// by polling.
//
// Usage: node dist/play-bot.js <base URL> [ruleset]

import { strict as assert } from "node:assert";
import {
  createStatkiClient,
  followMatch,
  type MatchEvent,
  type MatchState,
  type OtherEvent,
  type ParticipantMatch,
  type Schemas,
} from "./index.js";

function usage(): never {
  throw new Error("usage: node dist/play-bot.js <base URL> [ruleset]");
}
const baseUrl: string = process.argv[2] ?? usage();
const rulesets: ReadonlyArray<Schemas["RuleSetId"]> = ["statki", "classic", "battaglia"];
const ruleset = rulesets.find((id) => id === (process.argv[3] ?? "statki"));
if (!ruleset) throw new Error(`no such rule set: ${process.argv[3]}`);
const deadline = Date.now() + 120_000;

/** The answer's body, or a failure naming the problem the server gave instead. */
function body<T>(result: { data?: T; error?: unknown; response: Response }): T {
  if (result.data === undefined) throw new Error(`${result.response.status}: ${JSON.stringify(result.error)}`);
  return result.data;
}

async function main() {
  const anonymous = createStatkiClient({ baseUrl });
  const me = body(await anonymous.POST("/v1/players", { body: { name: `Ts-${Math.random().toString(36).slice(2, 10)}` } }));
  const api = createStatkiClient({ baseUrl, token: me.token });

  const bots = body(await api.GET("/v1/bots"));
  const bot = bots.find((candidate) => candidate.level === "hard") ?? bots[0];
  assert.ok(bot, "the server has bots");
  const created = body(await api.POST("/v1/matches", { body: { ruleset, opponent: bot.id } }));
  const match = { params: { path: { id: created.id } } };

  // Every event of the match, typed by kind, until the stream ends with the match: the
  // opening `state`, `presence` changes and the match's numbered events.
  const events: MatchEvent[] = [];
  const states: MatchState[] = [];
  let presences = 0;
  const others: OtherEvent[] = [];
  // How many events have arrived, and who waits for the next one.
  let arrivals = 0;
  let waiters: Array<() => void> = [];
  const stream = followMatch(created.id, {
    baseUrl,
    token: () => me.token,
    onEvent: (streamed) => {
      if (!streamed.known) others.push(streamed.event);
      else if (streamed.event.kind === "state") states.push(streamed.event);
      else if (streamed.event.kind === "presence") presences += 1;
      else events.push(streamed.event);
      arrivals += 1;
      const waiting = waiters;
      waiters = [];
      for (const wake of waiting) wake();
    },
    onFatal: (response) => console.error(`the stream was refused: ${response.status}`),
  });
  /** Resolves once an event has arrived after the first `count`. */
  function arrivedAfter(count: number): Promise<void> {
    if (arrivals > count) return Promise.resolve();
    return new Promise((resolve, reject) => {
      const timer = setTimeout(() => reject(new Error("the stream brought nothing in time")), Math.max(0, deadline - Date.now()));
      waiters.push(() => {
        clearTimeout(timer);
        resolve();
      });
    });
  }

  async function view(): Promise<ParticipantMatch> {
    const current = body(await api.GET("/v1/matches/{id}", match));
    assert.equal(current.viewer, "participant", "a player gets the participant's view");
    if (current.viewer !== "participant") throw new Error("unreachable");
    return current;
  }
  /** The view once `ready` holds, read again only after the stream brought something new. */
  async function waitFor(ready: (view: ParticipantMatch) => boolean): Promise<ParticipantMatch> {
    for (;;) {
      const seen = arrivals;
      const current = await view();
      if (ready(current)) return current;
      if (Date.now() > deadline) throw new Error(`the bot did not move in time: ${current.phase}`);
      await arrivedAfter(seen);
    }
  }

  // Ship by ship, at the first bow cell the server says fits.
  let state = await waitFor((current) => current.phase !== "waiting");
  while (state.phase === "placement" && state.next_ship && state.placement_hints) {
    const { horizontal, vertical } = state.placement_hints;
    const cell = horizontal[0] ?? vertical[0];
    assert.ok(cell, "a ship to place has somewhere to go");
    const orientation = horizontal[0] ? "horizontal" : "vertical";
    const placed = body(
      await api.PUT("/v1/matches/{id}/ships/{index}", {
        params: { path: { id: created.id, index: state.next_ship.index } },
        body: { cell, orientation },
      }),
    );
    state = { ...placed, names: state.names };
  }
  assert.equal(state.fleet_locked, true, "the whole fleet is placed and locked");

  // The first cell in reading order neither shot at nor known empty, whenever it is our turn.
  const cells = Array.from({ length: 100 }, (_, i) => `${"ABCDEFGHIJ"[i % 10]}${Math.floor(i / 10) + 1}`);
  let shots = 0;
  for (;;) {
    state = await waitFor((current) => current.phase === "finished" || current.turn === me.id);
    if (state.phase === "finished") break;
    const known = new Set([...state.shots.map((shot) => shot.cell), ...state.marked]);
    const target = cells.find((cell) => !known.has(cell));
    assert.ok(target, "a cell is left to shoot");
    const answer = body(await api.POST("/v1/matches/{id}/shots", { ...match, body: { cell: target } }));
    shots += 1;
    if (answer.phase === "finished") break;
  }

  await Promise.race([stream.done, new Promise((resolve) => setTimeout(resolve, 10_000))]);
  stream.close();
  const final = await view();
  assert.equal(final.phase, "finished");
  assert.ok(final.result, "the match has a result");
  assert.equal(final.record?.length, 2, "the record opens both fleets");
  for (const opened of final.record ?? []) assert.equal(opened.commitment_verified, true);

  // The stream: opened with the caller's view, then every event once, in order, each typed by its kind.
  const opening = states[0];
  assert.ok(opening, "the stream opened with the caller's view (`state`)");
  assert.equal(opening.view.id, created.id);
  assert.equal(events[0]?.seq, opening.seq + 1, "the events follow the opening view");
  assert.deepEqual(events.map((event) => event.seq), events.map((_, i) => (events[0]?.seq ?? 1) + i), "no event missed or repeated");
  const ownShots = events.filter((event) => event.kind === "shot_fired" && event.player === me.id);
  assert.equal(ownShots.length, shots, "every shot we fired was streamed");
  const finished = events.find((event) => event.kind === "match_finished");
  assert.ok(finished && finished.kind === "match_finished", "the stream carried the end");
  const winner = finished.winner === me.id ? "we" : "the bot";
  console.log(
    `${ruleset}: ${shots} shots, ${events.length} typed events streamed` +
      ` after the opening state, ${presences} presence changes` +
      `${others.length ? ` (+${others.length} of other kinds: ${[...new Set(others.map((o) => o.kind))].join(", ")})` : ""}, ` +
      `${finished.reason}, ${winner} won against ${bot.name}`,
  );
}

main().catch((error: unknown) => {
  console.error(error);
  process.exit(1);
});
