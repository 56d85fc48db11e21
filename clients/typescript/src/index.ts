// The Statki client: the types generated from openapi.yaml, a fetch client typed by them
// (openapi-fetch), and the match stream and player feed read as typed events.

import createClient, { type Client } from "openapi-fetch";
import type { components, paths } from "./schema.js";
import { follow, type Follower, type RawEvent } from "./sse.js";

export type { components, paths } from "./schema.js";
export { follow, type FollowOptions, type Follower, type RawEvent } from "./sse.js";

export type Schemas = components["schemas"];
/** One match event, a union discriminated by `kind`. */
export type MatchEvent = Schemas["EventResource"];
export type EventKind = MatchEvent["kind"];
/** One notice of the player feed, a union discriminated by `kind`. */
export type Notice = Schemas["Notice"];
export type NoticeKind = Notice["kind"];
export type MatchView = Schemas["MatchResource"];
/** A match stream's `presence` event (no `id:`): a player came online or went away. */
export type PresenceChange = Schemas["PresenceChange"];
/** A match stream's first event when opened without a resume point: the caller's whole view. */
export type MatchState = Schemas["MatchState"];
/** Anything a match stream sends: its opening `state`, a `presence` change or a match event. */
export type MatchStreamEvent = Schemas["MatchStreamEvent"];
export type ParticipantMatch = Schemas["ParticipantMatch"];
export type StatkiClient = Client<paths>;

export interface ClientOptions {
  baseUrl: string;
  /** The bearer token, or a function giving the current one. */
  token?: string | (() => string | undefined);
  fetch?: typeof fetch;
}

/** A client for every operation of openapi.yaml, with the bearer token on each request. */
export function createStatkiClient(options: ClientOptions): StatkiClient {
  const client = createClient<paths>({ baseUrl: options.baseUrl, fetch: options.fetch });
  const token = options.token;
  client.use({
    onRequest({ request }) {
      const current = typeof token === "function" ? token() : token;
      if (current) request.headers.set("authorization", `Bearer ${current}`);
      return request;
    },
  });
  return client;
}

// The kinds this client types; a kind it does not know (a newer server's, such as a
// `state` snapshot) is handed over as an `OtherEvent` rather than dropped or mistyped.
const EVENT_KINDS: ReadonlySet<string> = new Set<EventKind>([
  "match_created",
  "player_joined",
  "ship_placed",
  "ship_removed",
  "fleet_locked",
  "battle_started",
  "shot_fired",
  "clock_extended",
  "match_finished",
  "match_cancelled",
  "rating_updated",
  "reaction",
]);
const NOTICE_KINDS: ReadonlySet<string> = new Set<NoticeKind>([
  "challenge",
  "opponent_joined",
  "paired",
  "rematch_offered",
  "rematch_started",
]);

function isRecord(value: unknown): value is Record<string, unknown> {
  return typeof value === "object" && value !== null && !Array.isArray(value);
}

function isMatchEvent(value: unknown): value is MatchEvent {
  return isRecord(value) && typeof value.kind === "string" && EVENT_KINDS.has(value.kind) && typeof value.seq === "number";
}

function isNotice(value: unknown): value is Notice {
  return isRecord(value) && typeof value.kind === "string" && NOTICE_KINDS.has(value.kind);
}

/** Whether a match stream event's data is a `presence` change. */
export function isPresenceChange(value: unknown): value is PresenceChange {
  return isRecord(value) && value.kind === "presence" && typeof value.player === "string" &&
    (value.presence === "online" || value.presence === "away");
}

/** Whether a match stream event's data is the opening `state`: a `seq` and the caller's view. */
export function isMatchState(value: unknown): value is MatchState {
  return isRecord(value) && value.kind === "state" && typeof value.seq === "number" &&
    isRecord(value.view) && (value.view.viewer === "participant" || value.view.viewer === "spectator");
}

function isMatchStreamEvent(value: unknown): value is MatchStreamEvent {
  return isMatchEvent(value) || isMatchState(value) || isPresenceChange(value);
}

/** An event of a kind this client does not type. */
export interface OtherEvent {
  kind: string;
  id: string | null;
  data: unknown;
}

export type Streamed<T> = { known: true; event: T } | { known: false; event: OtherEvent };

function decodeWith<T>(guard: (value: unknown) => value is T) {
  return (raw: RawEvent): Streamed<T> => {
    if (guard(raw.data)) return { known: true, event: raw.data };
    return { known: false, event: { kind: raw.event, id: raw.id, data: raw.data } };
  };
}

/** The match events kept in memory and after a stream event, typed. */
export const decodeMatchEvent = decodeWith(isMatchEvent);
/** What a match stream sends, typed: `state`, `presence` and every match event kind. */
export const decodeMatchStreamEvent = decodeWith(isMatchStreamEvent);
export const decodeNotice = decodeWith(isNotice);

export interface StreamOptions<T> {
  baseUrl: string;
  token: () => string;
  /** Resume after this event (the last `seq` seen); absent: from the start. */
  lastEventId?: string | null;
  onEvent: (event: Streamed<T>) => void;
  onState?: (state: "open" | "retrying" | "ended") => void;
  onFatal?: (response: Response) => void;
  fetch?: typeof fetch;
}

/**
 * Follows `GET /v1/matches/{id}/stream`: every event, resumed after a dropped connection,
 * typed by `kind` — the opening `state` (the caller's view), `presence` changes and the
 * match's events.
 */
export function followMatch(matchId: string, options: StreamOptions<MatchStreamEvent>): Follower {
  return follow(`${options.baseUrl}/v1/matches/${encodeURIComponent(matchId)}/stream`, {
    ...options,
    decode: decodeMatchStreamEvent,
    onEvent: (event) => options.onEvent(event),
  });
}

/** Follows `GET /v1/stream`: the caller's notices, resumed after a dropped connection. */
export function followNotices(options: StreamOptions<Notice>): Follower {
  return follow(`${options.baseUrl}/v1/stream`, {
    ...options,
    decode: decodeNotice,
    onEvent: (event) => options.onEvent(event),
  });
}
