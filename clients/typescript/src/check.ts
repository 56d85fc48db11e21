// Plays the whole API through a client generated from openapi.yaml (openapi-typescript +
// openapi-fetch): every operation is called, every answer is validated against the schema
// the document gives for its status, and answers that depend on query parameters are
// checked, so a parameter the client failed to send would be caught.
//
// Usage: node dist/check.js <base URL>

import { readFileSync } from "node:fs";
import { strict as assert } from "node:assert";
import createClient, { type Client } from "openapi-fetch";
import { Ajv2020 } from "ajv/dist/2020.js";
import addFormatsModule from "ajv-formats";
import { parse } from "yaml";
import type { components, paths } from "./schema.js";

type Schemas = components["schemas"];
type Api = Client<paths>;

const baseUrl = process.argv[2];
if (!baseUrl) throw new Error("usage: node dist/check.js <base URL>");

// ---- every answer is checked against the document -------------------------------------

/** What this check reads of the document itself (the rest goes to Ajv whole). */
interface DocumentOperation {
  operationId?: string;
  responses?: Record<string, { content?: Record<string, { schema?: object }> }>;
}
interface Document {
  paths: Record<string, Record<string, DocumentOperation>>;
}
// `parse` answers `any`: the annotation is what the rest of the check relies on.
const document: Document = parse(readFileSync(new URL("../../../openapi.yaml", import.meta.url), "utf8"));
const ajv = new Ajv2020({ strict: false, allErrors: true });
// A CommonJS module: under NodeNext its default import is the module, whose `default` is the plugin.
addFormatsModule.default(ajv);
for (const format of ["int32", "int64", "uint", "uint8", "uint16", "uint32", "uint64", "double", "float"]) {
  ajv.addFormat(format, true);
}
ajv.addSchema({ ...document, $id: "openapi" });

let validated = 0;
const operationsSeen = new Set<string>();

function templateOf(url: string): [string, Record<string, DocumentOperation>] {
  const path = new URL(url).pathname;
  for (const [template, item] of Object.entries(document.paths)) {
    const pattern = new RegExp("^" + template.replace(/\{[^}]+\}/g, "[^/]+") + "$");
    if (pattern.test(path)) return [template, item];
  }
  throw new Error(`no documented path for ${path}`);
}

/** The request behind each answer, recorded by the clients' middleware. */
const requests = new WeakMap<Response, Request>();

/** Validates an answer against its documented schema and returns it. */
async function checked<T extends { response: Response; data?: unknown; error?: unknown }>(promise: Promise<T>, expected: number): Promise<T> {
  const result = await promise;
  const { response } = result;
  const method = requests.get(response)?.method.toLowerCase();
  assert.ok(method, "the request was recorded");
  const [template, item] = templateOf(response.url);
  const operation = item[method];
  assert.ok(operation?.operationId && operation.responses, `${method.toUpperCase()} ${template} is documented`);
  operationsSeen.add(operation.operationId);
  const body = result.data ?? result.error;
  assert.equal(response.status, expected, `${method.toUpperCase()} ${response.url}: ${response.status} ${JSON.stringify(body)}`);
  const documented = operation.responses[String(response.status)];
  assert.ok(documented, `${method.toUpperCase()} ${template} answered an undocumented ${response.status}`);
  const contentType = (response.headers.get("content-type") ?? "").split(";")[0]?.trim() ?? "";
  const schema = documented.content?.[contentType]?.schema;
  // An ndjson body is a line per document: the caller validates each line.
  if (schema && contentType.endsWith("json") && contentType !== "application/x-ndjson") {
    const pointer = `${template.replace(/~/g, "~0").replace(/\//g, "~1")}/${method}/responses/${response.status}/content/${contentType.replace(/\//g, "~1")}/schema`;
    const validate = ajv.getSchema(`openapi#/paths/${pointer}`);
    assert.ok(validate, `no schema at ${pointer}`);
    if (!validate(body)) {
      throw new Error(`${method.toUpperCase()} ${template} ${response.status} does not fit its schema: ${ajv.errorsText(validate.errors)}\n${JSON.stringify(body, null, 1)}`);
    }
    validated += 1;
  }
  return result;
}

function clientFor(token?: string): Api {
  const client = createClient<paths>({
    baseUrl,
    headers: token ? { Authorization: `Bearer ${token}` } : {},
  });
  client.use({
    onResponse({ request, response }) {
      requests.set(response, request);
    },
  });
  return client;
}

function data<T>(result: { data?: T }): T {
  assert.ok(result.data !== undefined, "an answer body");
  return result.data;
}

// ---- server-sent events ----------------------------------------------------------------

interface Sse {
  id: string;
  event: string;
  data: Record<string, unknown>;
}

/** Reads `count` events from an open stream answer, then closes it. */
async function readEvents(response: Response, count: number, controller: AbortController): Promise<Sse[]> {
  assert.equal(response.headers.get("content-type")?.split(";")[0], "text/event-stream");
  assert.ok(response.body, "a stream has a body");
  const reader = response.body.getReader();
  const decoder = new TextDecoder();
  const events: Sse[] = [];
  let buffer = "";
  while (events.length < count) {
    const { value, done } = await reader.read();
    if (done) break;
    buffer += decoder.decode(value, { stream: true });
    let end: number;
    while ((end = buffer.indexOf("\n\n")) >= 0 && events.length < count) {
      const block = buffer.slice(0, end);
      buffer = buffer.slice(end + 2);
      const fields: Record<string, string> = {};
      for (const line of block.split("\n")) {
        if (line.startsWith(":")) continue;
        const colon = line.indexOf(":");
        fields[line.slice(0, colon)] = line.slice(colon + 1).trimStart();
      }
      if (fields.data !== undefined) {
        events.push({ id: fields.id ?? "", event: fields.event ?? "", data: JSON.parse(fields.data) });
      }
    }
  }
  controller.abort();
  return events;
}

function isRecord(value: unknown): value is Record<string, unknown> {
  return typeof value === "object" && value !== null && !Array.isArray(value);
}

function validateAs(schema: string, value: unknown) {
  const validate = ajv.getSchema(`openapi#/components/schemas/${schema}`);
  assert.ok(validate, schema);
  if (!validate(value)) throw new Error(`${schema}: ${ajv.errorsText(validate.errors)}\n${JSON.stringify(value)}`);
  validated += 1;
}

// ---- the walk --------------------------------------------------------------------------

const anonymous = clientFor();
const unique = `${Date.now().toString(36)}${Math.floor(Math.random() * 1e6).toString(36)}`;

async function register(name: string): Promise<{ api: Api; me: Schemas["Session"] }> {
  const created = await checked(anonymous.POST("/v1/players", { body: { name: `${name}-${unique}` } }), 201);
  const me = data(created);
  return { api: clientFor(me.token), me };
}

const statkiFleet: Schemas["FleetRequest"] = {
  ships: ["A1", "A3", "A5", "A7", "A9"].map((cell): Schemas["ShipPosition"] => ({ cell, orientation: "horizontal" })),
};
const statkiCells = ["A1", "B1", "C1", "D1", "E1", "A3", "B3", "C3", "D3", "A5", "B5", "C5", "A7", "B7", "C7", "A9", "B9"];

async function main() {
  await checked(anonymous.GET("/healthz", { parseAs: "text" }), 200);
  await checked(anonymous.GET("/readyz", { parseAs: "text" }), 200);
  // Not public by default (docs/security.md): the server here runs with default settings.
  await checked(anonymous.GET("/metrics", { parseAs: "text" }), 404);
  await checked(anonymous.GET("/openapi.yaml", { parseAs: "text" }), 200);
  const rulesets = data(await checked(anonymous.GET("/v1/rulesets"), 200));
  assert.deepEqual(rulesets.rulesets.map((r) => r.id), ["statki", "classic", "battaglia"]);

  const ala = await register("ala");
  const bolek = await register("bolek");
  const watcher = await register("watcher");

  // Refusals are documented problems too.
  const noToken = await checked(anonymous.GET("/v1/matches", {}), 401);
  assert.equal(noToken.error?.code, "unauthorized");
  const taken = await checked(anonymous.POST("/v1/players", { body: { name: ala.me.name } }), 409);
  assert.equal(taken.error?.code, "name_taken");
  await checked(anonymous.GET("/v1/players/{id}", { params: { path: { id: ala.me.id } } }), 200);

  // A waiting match, then the match that will be played, then a classic one: the effective rules.
  const waiting = data(await checked(ala.api.POST("/v1/matches", { body: {} }), 201));
  const classic = data(await checked(bolek.api.POST("/v1/matches", { body: { ruleset: "classic" } }), 201));
  assert.equal(classic.rules.options.extra_shot_on_hit, true, "classic shoots again after a hit");
  await checked(bolek.api.POST("/v1/matches/{id}/resign", { params: { path: { id: classic.id } } }), 200);
  const key = `create-${unique}`;
  const created = data(
    await checked(
      ala.api.POST("/v1/matches", {
        params: { header: { "Idempotency-Key": key } },
        body: { ruleset: "statki", ranked: false, clock: { placement_seconds: 120, shot_seconds: 30 } },
      }),
      201,
    ),
  );
  const replay = data(
    await checked(
      ala.api.POST("/v1/matches", {
        params: { header: { "Idempotency-Key": key } },
        body: { ruleset: "statki", ranked: false, clock: { placement_seconds: 120, shot_seconds: 30 } },
      }),
      201,
    ),
  );
  assert.equal(replay.id, created.id, "the Idempotency-Key header reached the server");
  const id = created.id;
  const match = { params: { path: { id } } };

  // status=open vs status=live, limit and after: each changes the answer.
  const open = data(await checked(bolek.api.GET("/v1/matches", { params: { query: { status: "open" } } }), 200));
  assert.ok(open.matches.some((m) => m.id === id));
  assert.equal(open.matches[0]?.names?.[ala.me.id], ala.me.name, "lists name the players");
  const firstOpen = data(await checked(bolek.api.GET("/v1/matches", { params: { query: { status: "open", limit: 1 } } }), 200));
  assert.equal(firstOpen.matches.length, 1, "limit reached the server");
  assert.equal(firstOpen.matches[0]?.id, id, "newest first");
  assert.ok(firstOpen.next, "a next page");
  const secondOpen = data(
    await checked(bolek.api.GET("/v1/matches", { params: { query: { status: "open", limit: 1, after: firstOpen.next } } }), 200),
  );
  assert.equal(secondOpen.matches[0]?.id, waiting.id, "after reached the server");

  await checked(bolek.api.POST("/v1/matches/{id}/join", match), 200);
  const live = data(await checked(watcher.api.GET("/v1/matches", { params: { query: { status: "live" } } }), 200));
  assert.deepEqual(live.matches.map((m) => m.id).filter((m) => m === id || m === waiting.id), [id], "status reached the server");

  // Placement: ship by ship, a ship picked up again, then the whole fleet.
  const spectatorPlacing = data(await checked(watcher.api.GET("/v1/matches/{id}", match), 200));
  assert.equal(spectatorPlacing.viewer, "spectator", "a spectator gets the spectator view");
  for (const [index, cell] of ["A1", "A3"].entries()) {
    await checked(
      ala.api.PUT("/v1/matches/{id}/ships/{index}", {
        params: { path: { id, index } },
        body: { cell, orientation: "horizontal" },
      }),
      200,
    );
  }
  const removed = data(await checked(ala.api.DELETE("/v1/matches/{id}/ships/{index}", { params: { path: { id, index: 1 } } }), 200));
  assert.equal(removed.next_ship?.index, 1);
  const overlap = await checked(
    ala.api.PUT("/v1/matches/{id}/ships/{index}", { params: { path: { id, index: 1 } }, body: { cell: "B1", orientation: "horizontal" } }),
    422,
  );
  assert.equal(overlap.error?.code, "overlap");
  for (const [index, cell] of ["A3", "A5", "A7", "A9"].entries()) {
    await checked(
      ala.api.PUT("/v1/matches/{id}/ships/{index}", { params: { path: { id, index: index + 1 } }, body: { cell, orientation: "horizontal" } }),
      200,
    );
  }
  const battle = data(await checked(bolek.api.PUT("/v1/matches/{id}/fleet", { ...match, body: statkiFleet }), 200));
  assert.equal(battle.phase, "battle");
  const players = new Map([
    [ala.me.id, ala],
    [bolek.me.id, bolek],
  ]);
  const first = players.get(battle.turn ?? "");
  assert.ok(first, "the battle has a first shooter");
  let shooter = first;
  let target = shooter === ala ? bolek : ala;
  await checked(watcher.api.GET("/v1/matches/{id}", match), 200);

  // The match stream from a point: `after` reaches the server.
  const streamAbort = new AbortController();
  const stream = await checked(
    watcher.api.GET("/v1/matches/{id}/stream", { params: { path: { id }, query: { after: 2 } }, parseAs: "stream", signal: streamAbort.signal }),
    200,
  );
  const streamed = await readEvents(stream.response, 2, streamAbort);
  assert.deepEqual(streamed.map((e) => e.id), ["3", "4"], "after=2 reached the stream");
  streamed.forEach((e) => validateAs("EventResource", e.data));
  assert.deepEqual(streamed[0]?.data.names, { [ala.me.id]: ala.me.name, [bolek.me.id]: bolek.me.name }, "stream events name the players");

  // A reaction: a reaction event for everyone, the turn untouched; a spectator may not
  // react, and the same player again within 3 s is told when to retry.
  const reacted = data(await checked(target.api.POST("/v1/matches/{id}/reactions", { ...match, body: { reaction: "good_luck" } }), 200));
  assert.equal(reacted.turn, shooter.me.id, "a reaction does not take the turn");
  const seen = data(await checked(watcher.api.GET("/v1/matches/{id}/events", { params: { path: { id }, query: { after: reacted.seq - 1 } } }), 200));
  const reaction = seen[0];
  assert.ok(reaction && reaction.kind === "reaction", "the reaction is an event of its own");
  assert.equal(reaction.reaction, "good_luck");
  assert.equal(reaction.player, target.me.id);
  const spectatorReaction = await checked(watcher.api.POST("/v1/matches/{id}/reactions", { ...match, body: { reaction: "oops" } }), 403);
  assert.equal(spectatorReaction.error?.code, "not_a_player");
  const tooSoon = await checked(target.api.POST("/v1/matches/{id}/reactions", { ...match, body: { reaction: "oops" } }), 429);
  assert.equal(tooSoon.error?.code, "too_many_reactions");
  assert.ok(Number(tooSoon.response.headers.get("retry-after")) >= 1, "the gap says when to retry");

  // Battle: a refusal out of turn, then the shooter sinks the whole fleet.
  const outOfTurn = await checked(target.api.POST("/v1/matches/{id}/shots", { ...match, body: { cell: "J10" } }), 409);
  assert.equal(outOfTurn.error?.code, "not_your_turn");
  // statki passes the turn after every shot: the target misses down columns J and I.
  const misses = ["J", "I"].flatMap((column) => Array.from({ length: 10 }, (_, row) => `${column}${row + 1}`));
  for (const [turn, cell] of statkiCells.entries()) {
    const shot = data(await checked(shooter.api.POST("/v1/matches/{id}/shots", { ...match, body: { cell } }), 200));
    assert.notEqual(shot.outcome, "miss");
    if (shot.phase === "finished") break;
    assert.ok((shot.deadline_ms_left ?? 0) > 0, "the answer carries the clock");
    assert.equal(shot.next_turn, target.me.id);
    const missCell = misses[turn];
    assert.ok(missCell, "a cell to miss");
    const miss = data(await checked(target.api.POST("/v1/matches/{id}/shots", { ...match, body: { cell: missCell } }), 200));
    assert.equal(miss.outcome, "miss");
    if (turn === 0) {
      // Mid-battle, every viewer's view fits the schema.
      for (const viewer of [ala, bolek, watcher]) await checked(viewer.api.GET("/v1/matches/{id}/events", match), 200);
    }
  }
  for (const viewer of [ala, bolek, watcher]) {
    const finished = data(await checked(viewer.api.GET("/v1/matches/{id}", match), 200));
    assert.equal(finished.phase, "finished");
    assert.equal(finished.result?.winner, shooter.me.id);
    const events = data(await checked(viewer.api.GET("/v1/matches/{id}/events", { params: { path: { id }, query: { after: 3 } } }), 200));
    assert.equal(events[0]?.seq, 4, "after reached the server");
  }
  await checked(watcher.api.GET("/v1/matches/{id}/stream", { params: { path: { id }, query: { after: 1000 } }, parseAs: "stream" }), 204);

  // The export: the finished match as one document, as one line per move, and a player's
  // finished matches as ndjson.
  const exported = data(await checked(watcher.api.GET("/v1/matches/{id}/export", match), 200));
  assert.ok(typeof exported !== "string", "JSON unless text is asked for");
  assert.equal(exported.fleets.length, 2);
  assert.ok(exported.fleets.every((fleet) => fleet.commitment_verified), "both commitments check out");
  const moves = data(await checked(watcher.api.GET("/v1/matches/{id}/export", { ...match, headers: { Accept: "text/plain" }, parseAs: "text" }), 200));
  assert.ok(moves.startsWith(`# statki match ${id} `), `the text form: ${moves.slice(0, 80)}`);
  const bulk = data(
    await checked(ala.api.GET("/v1/players/{id}/matches/export", { params: { path: { id: ala.me.id }, query: { max: 1 } }, parseAs: "text" }), 200),
  );
  const lines = bulk.trimEnd().split("\n");
  assert.equal(lines.length, 1, "max reached the server");
  for (const line of lines) validateAs("MatchExport", JSON.parse(line));

  // Rematch, the player's matches with paging, the ladder, the queue and the player feed.
  await checked(target.api.POST("/v1/matches/{id}/rematch", match), 200);
  const rematch = data(await checked(shooter.api.GET("/v1/matches/{id}/rematch", match), 200));
  assert.ok(rematch);
  const mine = data(await checked(ala.api.GET("/v1/players/{id}/matches", { params: { path: { id: ala.me.id }, query: { limit: 1 } } }), 200));
  assert.equal(mine.matches.length, 1, "limit reached the server");
  assert.ok(mine.next, "a next page");
  const rest = data(
    await checked(ala.api.GET("/v1/players/{id}/matches", { params: { path: { id: ala.me.id }, query: { after: mine.next } } }), 200),
  );
  assert.ok(!rest.matches.some((m) => m.id === mine.matches[0]?.id), "after reached the server");
  const ladder = data(await checked(anonymous.GET("/v1/ladder/{ruleset}", { params: { path: { ruleset: "statki" }, query: { limit: 1 } } }), 200));
  assert.ok(ladder.entries.length <= 1, "limit reached the server");
  const badLimit = await checked(anonymous.GET("/v1/ladder/{ruleset}", { params: { path: { ruleset: "statki" }, query: { limit: 0 } } }), 400);
  assert.equal(badLimit.error?.code, "invalid_query", "a bad limit reached the server");

  const queued = data(await checked(watcher.api.POST("/v1/queue", { body: { ruleset: "classic" } }), 201));
  assert.equal(queued.status, "queued");
  assert.equal(data(await checked(watcher.api.GET("/v1/queue"), 200)).status, "queued");
  assert.equal(data(await checked(watcher.api.DELETE("/v1/queue"), 200)).status, "idle");

  const feedAbort = new AbortController();
  const feed = await checked(
    ala.api.GET("/v1/stream", { params: { query: { after: 0 } }, parseAs: "stream", signal: feedAbort.signal }),
    200,
  );
  const notices = await readEvents(feed.response, 1, feedAbort);
  assert.equal(notices[0]?.event, "opponent_joined");
  const names = notices[0]?.data.names;
  assert.ok(isRecord(names), "a notice names its players");
  assert.equal(names[bolek.me.id], bolek.me.name, "notices name the players");
  validateAs("Notice", notices[0]?.data);

  // Accounts: a password at registration, log-in, the own profile, a password change, a
  // fresh token, and revoking every earlier token.
  const carolName = `carol-${unique}`;
  const carol = data(await checked(anonymous.POST("/v1/players", { body: { name: carolName, password: "correct horse" } }), 201));
  const carolApi = clientFor(carol.token);
  const loggedIn = data(await checked(anonymous.POST("/v1/sessions", { body: { name: carolName, password: "correct horse" } }), 200));
  assert.equal(loggedIn.id, carol.id, "log-in names the registered player");
  const refused = await checked(anonymous.POST("/v1/sessions", { body: { name: carolName, password: "wrong horse!" } }), 401);
  assert.equal(refused.error?.code, "invalid_credentials");
  assert.equal(data(await checked(carolApi.GET("/v1/me"), 200)).id, carol.id);
  await checked(carolApi.PUT("/v1/me/password", { body: { password: "battery staple", current_password: "correct horse" } }), 204);
  const fresh = data(await checked(carolApi.POST("/v1/me/token"), 200));
  const renewed = data(await checked(clientFor(fresh.token).DELETE("/v1/me/tokens"), 200));
  await checked(carolApi.GET("/v1/me"), 401);
  assert.equal(data(await checked(clientFor(renewed.token).GET("/v1/me"), 200)).id, carol.id, "the new token works, the old ones do not");

  // A challenge the invited player declines, and a ticket for a browser's EventSource.
  const challenge = data(await checked(ala.api.POST("/v1/matches", { body: { opponent: bolek.me.id } }), 201));
  const declined = data(
    await checked(bolek.api.POST("/v1/matches/{id}/decline", { params: { path: { id: challenge.id } } }), 200),
  );
  assert.equal(declined.phase, "cancelled", "a declined challenge is cancelled");
  const ticket = data(await checked(ala.api.POST("/v1/stream-tickets"), 201));
  assert.ok(ticket.ticket.length > 0 && ticket.expires_in > 0, "a stream ticket and its lifetime");

  const bots = data(await checked(anonymous.GET("/v1/bots"), 200));
  assert.deepEqual(bots.map((bot) => bot.level).sort(), ["easy", "hard", "medium"]);

  const documented = new Set<string>();
  for (const item of Object.values(document.paths)) {
    for (const operation of Object.values(item)) if (operation.operationId) documented.add(operation.operationId);
  }
  const missed = [...documented].filter((operation) => !operationsSeen.has(operation));
  assert.deepEqual(missed, [], "every operation is called");
  console.log(`typescript client: ${operationsSeen.size} operations called, ${validated} answers validated against openapi.yaml`);
}

main().catch((error: unknown) => {
  console.error(error);
  process.exit(1);
});
