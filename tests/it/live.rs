//! Live updates over server-sent events: match streams, the player feed, resumption,
//! two replicas on one database, a killed listener, hidden information, limits.

use crate::common;

use std::pin::Pin;
use std::time::Duration;

use common::{Player, TestApp, allow_connections, spawn_app, spawn_app_full, standard_settings};
use futures::{Stream, StreamExt};
use reqwest::StatusCode;
use serde_json::{Value, json};
use sqlx::PgPool;
use statki::live::{HubSettings, LISTENER_APPLICATION_NAME};

/// How long a test waits for an event before failing.
const PATIENCE: Duration = Duration::from_secs(10);

/// One parsed server-sent event.
#[derive(Clone, Debug)]
struct Sse {
    id: Option<String>,
    event: Option<String>,
    data: Value,
}

impl Sse {
    fn seq(&self) -> i64 {
        self.id
            .as_deref()
            .expect("every event has an id")
            .parse()
            .expect("numeric id")
    }

    fn kind(&self) -> &str {
        self.event.as_deref().expect("every event has a name")
    }
}

type Body = Pin<Box<dyn Stream<Item = reqwest::Result<Vec<u8>>> + Send>>;

/// A client of one event stream, parsing the `text/event-stream` format by hand.
struct SseClient {
    body: Body,
    buffer: String,
    /// Comment lines seen (keep-alives).
    comments: usize,
    /// Everything received, for checks on the raw text.
    raw: String,
    /// `presence` events not yet taken (by [`SseClient::next_presence`]); [`SseClient::next`]
    /// passes over them, since they are not numbered events of the match.
    presence: std::collections::VecDeque<Sse>,
    /// Numbered events read while looking for a presence event, handed out next.
    held: std::collections::VecDeque<Sse>,
}

async fn open(app: &TestApp, path: &str, token: &str, last_event_id: Option<i64>) -> SseClient {
    let response = open_raw(app, path, token, last_event_id).await;
    assert_eq!(response.status(), StatusCode::OK, "{path}");
    let content_type = response.headers()["content-type"]
        .to_str()
        .unwrap()
        .to_owned();
    assert!(
        content_type.starts_with("text/event-stream"),
        "{content_type}"
    );
    SseClient {
        body: Box::pin(
            response
                .bytes_stream()
                .map(|chunk| chunk.map(|bytes| bytes.to_vec())),
        ),
        buffer: String::new(),
        comments: 0,
        raw: String::new(),
        presence: Default::default(),
        held: Default::default(),
    }
}

async fn open_raw(
    app: &TestApp,
    path: &str,
    token: &str,
    last_event_id: Option<i64>,
) -> reqwest::Response {
    let mut request = app.client.get(app.url(path)).bearer_auth(token);
    if let Some(id) = last_event_id {
        request = request.header("Last-Event-ID", id.to_string());
    }
    request.send().await.expect("stream request")
}

impl SseClient {
    /// The next event; `None` when the server ended the stream. Fails after `PATIENCE`.
    async fn next(&mut self) -> Option<Sse> {
        tokio::time::timeout(PATIENCE, self.next_inner())
            .await
            .expect("no event arrived in time")
    }

    async fn next_inner(&mut self) -> Option<Sse> {
        if let Some(event) = self.held.pop_front() {
            return Some(event);
        }
        loop {
            let event = self.next_block().await?;
            if event.event.as_deref() == Some("presence") {
                self.presence.push_back(event);
                continue;
            }
            return Some(event);
        }
    }

    /// The next `presence` event (numbered events read meanwhile are kept for `next`).
    async fn next_presence(&mut self) -> Sse {
        let wait = async {
            loop {
                if let Some(event) = self.presence.pop_front() {
                    return event;
                }
                let event = self.next_block().await.expect("the stream ended");
                if event.event.as_deref() == Some("presence") {
                    return event;
                }
                self.held.push_back(event);
            }
        };
        tokio::time::timeout(PATIENCE, wait)
            .await
            .expect("no presence event arrived in time")
    }

    /// The next event of any kind, as framed.
    async fn next_block(&mut self) -> Option<Sse> {
        loop {
            if let Some(end) = self.buffer.find("\n\n") {
                let block: String = self.buffer.drain(..end + 2).collect();
                let (mut id, mut event, mut data) = (None, None, Vec::new());
                for line in block.lines() {
                    if line.starts_with(':') {
                        self.comments += 1;
                        continue;
                    }
                    let (field, value) = line.split_once(':').unwrap_or((line, ""));
                    let value = value.strip_prefix(' ').unwrap_or(value).to_owned();
                    match field {
                        "id" => id = Some(value),
                        "event" => event = Some(value),
                        "data" => data.push(value),
                        _ => {}
                    }
                }
                if data.is_empty() {
                    continue;
                }
                let data = serde_json::from_str(&data.join("\n")).expect("JSON data");
                return Some(Sse { id, event, data });
            }
            match self.body.next().await {
                Some(chunk) => {
                    let text = String::from_utf8(chunk.expect("stream chunk")).unwrap();
                    self.raw.push_str(&text);
                    self.buffer.push_str(&text);
                }
                None => return None,
            }
        }
    }

    async fn take(&mut self, count: usize) -> Vec<Sse> {
        let mut events = Vec::with_capacity(count);
        for _ in 0..count {
            events.push(self.next().await.expect("stream ended early"));
        }
        events
    }

    /// Events up to and including the first of `kind`.
    async fn until(&mut self, kind: &str) -> Vec<Sse> {
        let mut events = Vec::new();
        loop {
            let event = self
                .next()
                .await
                .unwrap_or_else(|| panic!("ended before {kind}"));
            let done = event.kind() == kind;
            events.push(event);
            if done {
                return events;
            }
        }
    }

    async fn expect_end(&mut self) {
        if let Some(event) = self.next().await {
            panic!("expected the end of the stream, got {event:?}");
        }
    }

    /// Asserts no event arrives within `wait`.
    async fn expect_quiet(&mut self, wait: Duration) {
        if let Ok(event) = tokio::time::timeout(wait, self.next_inner()).await {
            panic!("expected silence, got {event:?}");
        }
    }
}

async fn fire(app: &TestApp, id: &str, player: &Player, cell: &str) -> Value {
    let reply = app
        .post(
            &format!("/v1/matches/{id}/shots"),
            &player.token,
            json!({ "cell": cell }),
        )
        .await;
    assert_eq!(reply.status, StatusCode::OK, "{:?}", reply.body);
    reply.body
}

/// Cells every test fleet leaves empty, so shots at them miss and the turn passes.
fn empty_cells() -> impl Iterator<Item = String> {
    [2, 4, 6, 8, 10]
        .into_iter()
        .flat_map(|row| ('A'..='J').map(move |col| format!("{col}{row}")))
}

/// `count` misses, alternating between the two players; returns the last seq.
async fn exchange_misses(
    app: &TestApp,
    id: &str,
    first: &Player,
    second: &Player,
    count: usize,
) -> i64 {
    let mut seq = 0;
    for shot in 0..count {
        let shooter = if shot % 2 == 0 { first } else { second };
        seq = fire(app, id, shooter, &shot_cell(shot)).await["seq"]
            .as_i64()
            .unwrap();
    }
    seq
}

/// The `shot`-th shot of an exchange: each player works through the empty cells.
fn shot_cell(shot: usize) -> String {
    empty_cells().nth(shot / 2).unwrap()
}

async fn events_after(app: &TestApp, id: &str, token: &str, after: i64) -> Vec<Value> {
    let reply = app
        .get(
            &format!("/v1/matches/{id}/events?after={after}"),
            Some(token),
        )
        .await;
    assert_eq!(reply.status, StatusCode::OK);
    reply.body.as_array().unwrap().clone()
}

fn seqs(events: &[Sse]) -> Vec<i64> {
    events.iter().map(Sse::seq).collect()
}

#[sqlx::test]
async fn a_stream_sees_the_opponents_shot(pool: PgPool) {
    let app = spawn_app(pool).await;
    let (id, shooter, target) = app.battle_match("statki").await;
    let last = app
        .get(&format!("/v1/matches/{id}"), Some(&target.token))
        .await
        .body["seq"]
        .as_i64()
        .unwrap();
    let mut stream = open(
        &app,
        &format!("/v1/matches/{id}/stream?after=0"),
        &target.token,
        None,
    )
    .await;

    // The backlog: every event so far, numbered 1…last, as the events feed shows them.
    let backlog = stream.take(last as usize).await;
    assert_eq!(seqs(&backlog), (1..=last).collect::<Vec<_>>());
    let feed = events_after(&app, &id, &target.token, 0).await;
    for (event, resource) in backlog.iter().zip(&feed) {
        assert_eq!(&event.data, resource);
        assert_eq!(event.kind(), resource["kind"]);
    }

    let answer = fire(&app, &id, &shooter, "B2").await;
    let shot = stream.next().await.expect("the shot");
    assert_eq!(shot.kind(), "shot_fired");
    assert_eq!(shot.seq(), answer["seq"].as_i64().unwrap());
    assert_eq!(shot.data["player"], shooter.id.as_str());
    assert_eq!(shot.data["cell"], "B2");
    assert_eq!(shot.data["outcome"], "miss");
    assert_eq!(
        shot.data,
        events_after(&app, &id, &target.token, last).await[0]
    );
}

#[sqlx::test]
async fn a_reconnect_gets_exactly_the_missed_events(pool: PgPool) {
    let app = spawn_app(pool).await;
    let (id, first, second) = app.battle_match("statki").await;
    let path = format!("/v1/matches/{id}/stream");
    let mut stream = open(&app, &format!("{path}?after=0"), &second.token, None).await;
    let seen = stream.until("battle_started").await;
    let resume = seen.last().unwrap().seq();
    drop(stream);

    let last = exchange_misses(&app, &id, &first, &second, 6).await;

    // Last-Event-ID: exactly the events after it, in order, none twice.
    let mut resumed = open(&app, &path, &second.token, Some(resume)).await;
    let missed = resumed.take((last - resume) as usize).await;
    assert_eq!(seqs(&missed), ((resume + 1)..=last).collect::<Vec<_>>());
    let expected = events_after(&app, &id, &second.token, resume).await;
    assert_eq!(
        missed.iter().map(|e| e.data.clone()).collect::<Vec<_>>(),
        expected
    );
    resumed.expect_quiet(Duration::from_millis(300)).await;

    // Then live, still without repeats.
    let answer = fire(&app, &id, &first, "J10").await;
    let live = resumed.next().await.unwrap();
    assert_eq!(live.seq(), answer["seq"].as_i64().unwrap());
    assert_eq!(live.seq(), last + 1);

    // `?after=` does the same; a Last-Event-ID header wins over it.
    let mut by_query = open(
        &app,
        &format!("{path}?after={}", last - 2),
        &second.token,
        None,
    )
    .await;
    assert_eq!(
        seqs(&by_query.take(3).await),
        vec![last - 1, last, last + 1]
    );
    let mut both = open(&app, &format!("{path}?after=0"), &second.token, Some(last)).await;
    assert_eq!(seqs(&both.take(1).await), vec![last + 1]);
}

#[sqlx::test]
async fn the_player_stream_sees_a_challenge_and_the_opponent_joining(pool: PgPool) {
    let app = spawn_app(pool).await;
    let ala = app.register("ala").await;
    let bolek = app.register("bolek").await;
    let mut ala_feed = open(&app, "/v1/stream", &ala.token, None).await;
    let mut bolek_feed = open(&app, "/v1/stream", &bolek.token, None).await;

    let id = app
        .create_match(&ala, json!({ "ruleset": "statki", "opponent": bolek.id }))
        .await;
    let challenge = bolek_feed.next().await.unwrap();
    assert_eq!(challenge.kind(), "challenge");
    assert_eq!(challenge.seq(), 1);
    assert_eq!(challenge.data["match_id"], id.as_str());
    assert_eq!(challenge.data["from"], ala.id.as_str());

    let joined = app
        .post(&format!("/v1/matches/{id}/join"), &bolek.token, json!({}))
        .await;
    assert_eq!(joined.status, StatusCode::OK);
    let notice = ala_feed.next().await.unwrap();
    assert_eq!(notice.kind(), "opponent_joined");
    assert_eq!(notice.seq(), 1);
    assert_eq!(notice.data["match_id"], id.as_str());
    assert_eq!(notice.data["player"], bolek.id.as_str());
    // Nobody else's notices.
    bolek_feed.expect_quiet(Duration::from_millis(300)).await;

    // A second challenge while Bolek is away; resuming after notice 1 brings just that.
    drop(bolek_feed);
    let second = app
        .create_match(&ala, json!({ "opponent": bolek.id }))
        .await;
    let mut resumed = open(&app, "/v1/stream", &bolek.token, Some(1)).await;
    let missed = resumed.next().await.unwrap();
    assert_eq!((missed.seq(), missed.kind()), (2, "challenge"));
    assert_eq!(missed.data["match_id"], second.as_str());
    resumed.expect_quiet(Duration::from_millis(300)).await;
}

#[sqlx::test]
async fn a_shot_made_on_one_replica_reaches_a_stream_on_the_other(pool: PgPool) {
    let one = spawn_app(pool.clone()).await;
    let two = spawn_app(pool).await;
    let (id, shooter, target) = one.battle_match("statki").await;
    let mut stream = open(
        &two,
        &format!("/v1/matches/{id}/stream?after=0"),
        &target.token,
        None,
    )
    .await;
    stream.until("battle_started").await;

    let answer = fire(&one, &id, &shooter, "C4").await;
    let shot = stream.next().await.unwrap();
    assert_eq!(shot.kind(), "shot_fired");
    assert_eq!(shot.seq(), answer["seq"].as_i64().unwrap());
    assert_eq!(shot.data["cell"], "C4");
    // And back: the target answers on replica two, a stream on replica one sees it.
    let mut back = open(
        &one,
        &format!("/v1/matches/{id}/stream"),
        &shooter.token,
        Some(shot.seq()),
    )
    .await;
    fire(&two, &id, &target, "D6").await;
    assert_eq!(back.next().await.unwrap().data["cell"], "D6");
}

/// Kills this database's listening connections; returns how many were killed.
async fn kill_listeners(pool: &PgPool) -> i64 {
    let killed: Vec<bool> = sqlx::query_scalar(
        "SELECT pg_terminate_backend(pid) FROM pg_stat_activity
         WHERE application_name = $1 AND datname = current_database()",
    )
    .bind(LISTENER_APPLICATION_NAME)
    .fetch_all(pool)
    .await
    .unwrap();
    killed.len() as i64
}

#[sqlx::test]
async fn killing_the_listener_loses_nothing(pool: PgPool) {
    // No periodic sweep within the test: only the catch-up after reconnecting can help.
    let live = HubSettings {
        catch_up_interval: Duration::from_secs(600),
        ..HubSettings::default()
    };
    let app = spawn_app_full(pool.clone(), standard_settings(), live.clone()).await;
    // The shots are made on another replica: this replica's own commits reach its streams
    // from memory, the other's only by their hints (lost while this one is not listening).
    let other = spawn_app_full(pool.clone(), standard_settings(), live).await;
    let (id, first, second) = app.battle_match("statki").await;
    let mut stream = open(
        &app,
        &format!("/v1/matches/{id}/stream?after=0"),
        &second.token,
        None,
    )
    .await;
    let start = stream.until("battle_started").await.last().unwrap().seq();

    // The listeners (one per replica) are found by their name and by their query.
    let by_query: i64 = sqlx::query_scalar(
        "SELECT count(*) FROM pg_stat_activity
         WHERE query ILIKE 'LISTEN%' AND datname = current_database()",
    )
    .fetch_one(&pool)
    .await
    .unwrap();
    assert_eq!(by_query, 2);
    assert_eq!(kill_listeners(&pool).await, 2);
    // Commits right after the kill, while the replicas are not listening.
    let last = exchange_misses(&other, &id, &first, &second, 4).await;
    let got = stream.take((last - start) as usize).await;
    assert_eq!(seqs(&got), ((start + 1)..=last).collect::<Vec<_>>());

    // Listening again, and live delivery works as before.
    let mut listening = false;
    for _ in 0..100 {
        if app.live.is_listening() && kill_count(&pool).await == 2 {
            listening = true;
            break;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    assert!(listening, "the hub did not reconnect");
    let answer = fire(&other, &id, &first, "H8").await;
    let shot = stream.next().await.unwrap();
    assert_eq!(shot.seq(), answer["seq"].as_i64().unwrap());
    stream.expect_quiet(Duration::from_millis(300)).await;
}

#[sqlx::test]
async fn events_committed_while_not_listening_arrive_after_reconnecting(
    options: sqlx::postgres::PgPoolOptions,
    connect: sqlx::postgres::PgConnectOptions,
) {
    // Every connection the app will need is opened before the database is closed to new
    // ones, so only the listener is locked out, never a command.
    let pool = options
        .min_connections(10)
        .max_connections(10)
        .connect_with(connect)
        .await
        .unwrap();
    let warm: Vec<_> = futures::future::join_all((0..10).map(|_| pool.acquire())).await;
    drop(warm);
    let live = HubSettings {
        catch_up_interval: Duration::from_secs(600),
        ..HubSettings::default()
    };
    let app = spawn_app_full(pool.clone(), standard_settings(), live.clone()).await;
    // The shots are made on another replica (see above).
    let other = spawn_app_full(pool.clone(), standard_settings(), live).await;
    let (id, first, second) = app.battle_match("statki").await;
    let mut stream = open(
        &app,
        &format!("/v1/matches/{id}/stream?after=0"),
        &second.token,
        None,
    )
    .await;
    let start = stream.until("battle_started").await.last().unwrap().seq();

    // Keep the listeners out for a while: every hint of these shots is lost.
    allow_connections(&pool, false).await;
    assert_eq!(kill_listeners(&pool).await, 2);
    let last = exchange_misses(&other, &id, &first, &second, 3).await;
    // The hub learns of its listener's end when it next reads from it (on Citus, with
    // password authentication, that was seen to take longer than the shots); locked out,
    // it cannot come back.
    let noticed = std::time::Instant::now();
    while app.live.is_listening() {
        assert!(
            noticed.elapsed() < PATIENCE,
            "the listener should be gone and locked out"
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    stream.expect_quiet(Duration::from_millis(300)).await;
    // A stream opened now reads those shots from the database; when the hub catches up
    // it publishes them again, and this stream must not repeat them.
    let mut late = open(
        &app,
        &format!("/v1/matches/{id}/stream"),
        &first.token,
        Some(start),
    )
    .await;
    assert_eq!(
        seqs(&late.take((last - start) as usize).await),
        ((start + 1)..=last).collect::<Vec<_>>()
    );
    allow_connections(&pool, true).await;

    let got = stream.take((last - start) as usize).await;
    assert_eq!(seqs(&got), ((start + 1)..=last).collect::<Vec<_>>());
    stream.expect_quiet(Duration::from_millis(300)).await;
    late.expect_quiet(Duration::from_millis(300)).await;
    let answer = fire(&other, &id, &second, &shot_cell(3)).await;
    assert_eq!(
        late.next().await.unwrap().seq(),
        answer["seq"].as_i64().unwrap()
    );
    assert_eq!(stream.next().await.unwrap().seq(), last + 1);
}

async fn kill_count(pool: &PgPool) -> i64 {
    sqlx::query_scalar(
        "SELECT count(*) FROM pg_stat_activity
         WHERE application_name = $1 AND datname = current_database()",
    )
    .bind(LISTENER_APPLICATION_NAME)
    .fetch_one(pool)
    .await
    .unwrap()
}

/// The ship positions a feed event reveals, if any.
fn reveals_position(event: &Sse, owner: &str) -> bool {
    let data = &event.data;
    data["player"] == owner && (data.get("placement").is_some() || data.get("salt").is_some())
}

#[sqlx::test]
async fn an_opponents_stream_never_carries_the_other_fleet_before_the_end(pool: PgPool) {
    let app = spawn_app(pool).await;
    let (id, ala, bolek) = app.placement_match("statki").await;
    let watcher = app.register("watcher").await;
    let path = format!("/v1/matches/{id}/stream?after=0");
    let mut bolek_stream = open(&app, &path, &bolek.token, None).await;
    let mut spectator = open(&app, &path, &watcher.token, None).await;
    let mut ala_stream = open(&app, &path, &ala.token, None).await;

    // Ala places ship by ship, moves one, then locks; Bolek places his whole fleet.
    for (index, bow) in ["A1", "A3", "A5", "A7"].iter().enumerate() {
        let reply = app
            .put(
                &format!("/v1/matches/{id}/ships/{index}"),
                &ala.token,
                json!({ "cell": bow, "orientation": "horizontal" }),
            )
            .await;
        assert_eq!(reply.status, StatusCode::OK, "{:?}", reply.body);
    }
    let moved = app
        .delete(&format!("/v1/matches/{id}/ships/3"), &ala.token)
        .await;
    assert_eq!(moved.status, StatusCode::OK);
    let fleet = app
        .put(
            &format!("/v1/matches/{id}/fleet"),
            &ala.token,
            common::legal_fleet("statki"),
        )
        .await;
    assert_eq!(fleet.status, StatusCode::OK, "{:?}", fleet.body);
    let fleet = app
        .put(
            &format!("/v1/matches/{id}/fleet"),
            &bolek.token,
            common::legal_fleet("statki"),
        )
        .await;
    assert_eq!(fleet.status, StatusCode::OK, "{:?}", fleet.body);

    let seen_by_bolek = bolek_stream.until("battle_started").await;
    let seen_by_spectator = spectator.until("battle_started").await;
    let seen_by_ala = ala_stream.until("battle_started").await;
    assert!(
        seen_by_bolek
            .iter()
            .any(|e| e.kind() == "ship_placed" && e.data["player"] == ala.id.as_str())
    );
    assert!(
        !seen_by_bolek.iter().any(|e| reveals_position(e, &ala.id)),
        "{:?}",
        bolek_stream.raw
    );
    assert!(
        !seen_by_spectator
            .iter()
            .any(|e| reveals_position(e, &ala.id) || reveals_position(e, &bolek.id))
    );
    // The owner does see her own placements.
    assert!(
        seen_by_ala
            .iter()
            .any(|e| e.kind() == "ship_placed" && !e.data["placement"].is_null())
    );

    // At the end the streams deliver the final event, then close; the record is public.
    let resigned = app
        .post(&format!("/v1/matches/{id}/resign"), &ala.token, json!({}))
        .await;
    assert_eq!(resigned.status, StatusCode::OK);
    let end = bolek_stream.until("match_finished").await;
    assert_eq!(end.last().unwrap().data["winner"], bolek.id.as_str());
    bolek_stream.expect_end().await;
    spectator.until("match_finished").await;
    spectator.expect_end().await;
    let last = end.last().unwrap().seq();

    let mut replay = open(&app, &path, &bolek.token, None).await;
    let record = replay.until("match_finished").await;
    assert!(
        record.iter().any(|e| reveals_position(e, &ala.id)),
        "the record opens after the end"
    );
    replay.expect_end().await;
    // Nothing after the last event of a finished match: 204 tells EventSource to stop.
    let done = open_raw(&app, &path, &bolek.token, Some(last)).await;
    assert_eq!(done.status(), StatusCode::NO_CONTENT);
}

#[sqlx::test]
async fn streams_are_limited_per_player_and_per_replica(pool: PgPool) {
    let live = HubSettings {
        streams_per_player: 2,
        streams_per_replica: 3,
        keep_alive: Duration::from_millis(100),
        ..HubSettings::default()
    };
    let app = spawn_app_full(pool, standard_settings(), live).await;
    let ala = app.register("ala").await;
    let bolek = app.register("bolek").await;
    let celina = app.register("celina").await;
    let id = app.create_match(&ala, json!({})).await;
    let path = format!("/v1/matches/{id}/stream");

    let first = open(&app, &path, &ala.token, None).await;
    let _second = open(&app, "/v1/stream", &ala.token, None).await;
    let refused = app.get(&path, Some(&ala.token)).await;
    assert_eq!(refused.status, StatusCode::TOO_MANY_REQUESTS);
    assert_eq!(refused.code(), "too_many_streams");
    assert_eq!(refused.content_type, "application/problem+json");

    let _third = open(&app, &path, &bolek.token, None).await;
    let full = app.get("/v1/stream", Some(&celina.token)).await;
    assert_eq!(full.status, StatusCode::TOO_MANY_REQUESTS);
    assert_eq!(full.code(), "too_many_streams");

    // A closed stream gives its slot back (noticed at the next keep-alive at the latest).
    drop(first);
    let mut reopened = None;
    for _ in 0..50 {
        let response = open_raw(&app, &path, &celina.token, None).await;
        if response.status() == StatusCode::OK {
            reopened = Some(response);
            break;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    assert!(reopened.is_some(), "the slot was never given back");
}

/// A stream keeps its connection to itself: the head says `Connection: close` and chunks
/// the body, the first chunk is the caller's state, and a client that hangs up frees its
/// stream slot at once, long before a keep-alive would find the socket closed.
#[sqlx::test]
async fn a_stream_owns_its_connection_and_a_hang_up_frees_its_slot_at_once(pool: PgPool) {
    use tokio::io::{AsyncReadExt, AsyncWriteExt};

    let live = HubSettings {
        streams_per_player: 1,
        keep_alive: Duration::from_secs(60),
        ..HubSettings::default()
    };
    let app = spawn_app_full(pool, standard_settings(), live).await;
    let (id, ala, _bolek) = app.battle_match("statki").await;
    let path = format!("/v1/matches/{id}/stream");
    let mut socket = tokio::net::TcpStream::connect(app.address.trim_start_matches("http://"))
        .await
        .unwrap();
    let request = format!(
        "GET {path} HTTP/1.1\r\nHost: statki\r\nAuthorization: Bearer {}\r\n\r\n",
        ala.token
    );
    socket.write_all(request.as_bytes()).await.unwrap();
    let mut received = Vec::new();
    tokio::time::timeout(PATIENCE, async {
        while !String::from_utf8_lossy(&received).contains("\n\n\r\n") {
            let mut buffer = [0_u8; 4096];
            let read = socket.read(&mut buffer).await.unwrap();
            assert!(read > 0, "closed before the first event");
            received.extend_from_slice(&buffer[..read]);
        }
    })
    .await
    .expect("the first event in time");
    let text = String::from_utf8_lossy(&received).into_owned();
    let (head, body) = text.split_once("\r\n\r\n").unwrap();
    let head = head.to_ascii_lowercase();
    assert!(head.starts_with("http/1.1 200"), "{head}");
    assert!(head.contains("\r\ntransfer-encoding: chunked"), "{head}");
    assert!(head.contains("\r\nconnection: close"), "{head}");
    let (size, chunk) = body.split_once("\r\n").unwrap();
    let size = usize::from_str_radix(size, 16).unwrap();
    assert!(chunk.len() >= size + 2, "{body}");
    assert!(chunk[..size].contains("event: state\n"), "{chunk}");
    assert_eq!(&chunk[size..size + 2], "\r\n");

    let refused = app.get(&path, Some(&ala.token)).await;
    assert_eq!(refused.code(), "too_many_streams");
    drop(socket);
    let started = std::time::Instant::now();
    loop {
        let response = open_raw(&app, &path, &ala.token, None).await;
        if response.status() == StatusCode::OK {
            break;
        }
        assert!(
            started.elapsed() < Duration::from_secs(5),
            "the slot was not given back after the hang-up"
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

#[sqlx::test]
async fn a_slow_consumer_is_dropped_without_holding_up_the_others(pool: PgPool) {
    let live = HubSettings {
        channel_capacity: 2,
        ..HubSettings::default()
    };
    let app = spawn_app_full(pool, standard_settings(), live).await;
    let (id, first, second) = app.battle_match("statki").await;
    let mut fast = open(
        &app,
        &format!("/v1/matches/{id}/stream?after=0"),
        &second.token,
        None,
    )
    .await;
    let start = fast.until("battle_started").await.last().unwrap().seq();
    // A subscriber that never reads.
    let first_id = first.id.parse().unwrap();
    let slow = app
        .live
        .match_feed(id.parse().unwrap(), first_id, Some(start))
        .await
        .unwrap()
        .unwrap();
    assert_eq!(slow.backlog(), 0);

    // Each shot is its own batch: wait for the fast stream to get each.
    for shot in 0..5 {
        let shooter = if shot % 2 == 0 { &first } else { &second };
        let answer = fire(&app, &id, shooter, &shot_cell(shot)).await;
        let event = fast.next().await.unwrap();
        assert_eq!(event.seq(), answer["seq"].as_i64().unwrap());
    }
    // The slow one has fallen more than two batches behind: it ends, sending nothing
    // stale; its client would resume with Last-Event-ID.
    let mut slow = Box::pin(slow.into_stream());
    let next = tokio::time::timeout(PATIENCE, slow.next()).await.unwrap();
    assert!(
        next.is_none(),
        "a lagging subscriber must be dropped, got {next:?}"
    );
}

#[sqlx::test]
async fn idle_streams_get_keep_alive_comments(pool: PgPool) {
    let live = HubSettings {
        keep_alive: Duration::from_millis(200),
        ..HubSettings::default()
    };
    let app = spawn_app_full(pool, standard_settings(), live).await;
    let ala = app.register("ala").await;
    let id = app.create_match(&ala, json!({})).await;
    let mut stream = open(
        &app,
        &format!("/v1/matches/{id}/stream?after=0"),
        &ala.token,
        None,
    )
    .await;
    assert_eq!(stream.next().await.unwrap().kind(), "match_created");
    stream.expect_quiet(Duration::from_millis(700)).await;
    assert!(stream.comments >= 2, "{:?}", stream.raw);
}

#[sqlx::test]
async fn stream_requests_are_checked(pool: PgPool) {
    let app = spawn_app(pool).await;
    let ala = app.register("ala").await;
    let id = app.create_match(&ala, json!({})).await;

    let anonymous = app.get(&format!("/v1/matches/{id}/stream"), None).await;
    assert_eq!(anonymous.status, StatusCode::UNAUTHORIZED);
    assert_eq!(
        app.get("/v1/stream", None).await.status,
        StatusCode::UNAUTHORIZED
    );
    let unknown = app
        .get(
            &format!("/v1/matches/{}/stream", uuid::Uuid::now_v7()),
            Some(&ala.token),
        )
        .await;
    assert_eq!(unknown.status, StatusCode::NOT_FOUND);
    assert_eq!(unknown.code(), "not_found");
    let bad_id = app
        .send(
            app.client
                .get(app.url(&format!("/v1/matches/{id}/stream")))
                .bearer_auth(&ala.token)
                .header("Last-Event-ID", "seven"),
        )
        .await;
    assert_eq!(bad_id.status, StatusCode::BAD_REQUEST);
    assert_eq!(bad_id.code(), "invalid_last_event_id");
    // The refused requests hold no slot and no topic.
    assert_eq!(app.live.open_streams(), 0);
    assert_eq!(app.live.followed(), (0, 0));

    let spec = app.get("/openapi.yaml", None).await;
    assert_eq!(spec.status, StatusCode::OK);
}

/// A view without its clock reading, which moves between two reads, and without who is
/// online (opening the stream brings its caller online).
fn without_clock(mut view: Value) -> Value {
    let fields = view.as_object_mut().expect("a view is an object");
    fields.remove("deadline_ms_left");
    fields.remove("presence");
    view
}

#[sqlx::test]
async fn a_fresh_match_stream_begins_with_the_callers_state(pool: PgPool) {
    let app = spawn_app(pool).await;
    let (id, shooter, target) = app.battle_match("statki").await;
    let watcher = app.register("watcher").await;
    let path = format!("/v1/matches/{id}/stream");
    for (player, viewer) in [(&target, "participant"), (&watcher, "spectator")] {
        let view = app
            .get(&format!("/v1/matches/{id}"), Some(&player.token))
            .await
            .body;
        let mut stream = open(&app, &path, &player.token, None).await;
        let state = stream.next().await.expect("the state");
        assert_eq!(state.kind(), "state");
        assert_eq!(state.data["kind"], "state");
        assert_eq!(state.seq(), view["seq"].as_i64().unwrap());
        assert_eq!(state.data["seq"], view["seq"]);
        assert_eq!(state.data["view"]["viewer"], viewer);
        assert_eq!(
            without_clock(state.data["view"].clone()),
            without_clock(view)
        );
        if viewer == "participant" {
            assert_eq!(state.data["view"]["presence"][&player.id], "online");
            assert_eq!(state.data["view"]["presence"][&shooter.id], "away");
        }
        // The state stands for the history: nothing before the next change.
        stream.expect_quiet(Duration::from_millis(300)).await;
    }

    let mut stream = open(&app, &path, &target.token, None).await;
    let state = stream.next().await.expect("the state");
    let answer = fire(&app, &id, &shooter, "B2").await;
    let shot = stream.next().await.expect("the shot");
    assert_eq!((shot.kind(), shot.seq()), ("shot_fired", state.seq() + 1));
    assert_eq!(shot.seq(), answer["seq"].as_i64().unwrap());
    drop(stream);

    // A reconnect continues after its last event, with no new state.
    fire(&app, &id, &target, "B2").await;
    let mut resumed = open(&app, &path, &target.token, Some(shot.seq())).await;
    let next = resumed.next().await.expect("the missed shot");
    assert_eq!((next.kind(), next.seq()), ("shot_fired", shot.seq() + 1));
}

#[sqlx::test]
async fn the_final_event_carries_the_record(pool: PgPool) {
    let app = spawn_app(pool).await;
    let (id, shooter, target) = app.battle_match("statki").await;
    let path = format!("/v1/matches/{id}/stream");
    let mut stream = open(&app, &path, &target.token, None).await;
    assert_eq!(stream.next().await.expect("the state").kind(), "state");
    let resigned = app
        .post(
            &format!("/v1/matches/{id}/resign"),
            &shooter.token,
            json!({}),
        )
        .await;
    assert_eq!(resigned.status, StatusCode::OK);
    let finished = stream.until("match_finished").await.pop().unwrap();
    stream.expect_end().await;

    let view = app
        .get(&format!("/v1/matches/{id}"), Some(&target.token))
        .await
        .body;
    let record = &view["record"];
    let fleets = record.as_array().expect("a finished view has the record");
    assert_eq!(fleets.len(), 2);
    assert!(
        fleets
            .iter()
            .all(|fleet| fleet["commitment_verified"] == true)
    );
    assert_eq!(&finished.data["record"], record);

    // The events feed says the same, and only on the final event.
    let events = events_after(&app, &id, &target.token, 0).await;
    let (last, earlier) = events.split_last().unwrap();
    assert_eq!(last["kind"], "match_finished");
    assert_eq!(&last["record"], record);
    assert!(earlier.iter().all(|event| event.get("record").is_none()));

    // After the end, a fresh stream is the finished view alone.
    let mut late = open(&app, &path, &shooter.token, None).await;
    let state = late.next().await.expect("the state");
    assert_eq!(state.kind(), "state");
    assert_eq!(state.data["view"]["phase"], "finished");
    assert_eq!(&state.data["view"]["record"], record);
    late.expect_end().await;
}

async fn ticket(app: &TestApp, token: &str) -> String {
    let reply = app.post("/v1/stream-tickets", token, json!({})).await;
    assert_eq!(reply.status, StatusCode::CREATED, "{:?}", reply.body);
    assert_eq!(reply.body["expires_in"], 60);
    let ticket = reply.body["ticket"].as_str().unwrap().to_owned();
    assert_eq!(ticket.len(), 64);
    ticket
}

/// A stream request with a ticket and no `Authorization` header.
async fn with_ticket(app: &TestApp, path: &str, ticket: &str) -> reqwest::Response {
    app.client
        .get(app.url(&format!("{path}?ticket={ticket}")))
        .send()
        .await
        .unwrap()
}

#[sqlx::test]
async fn a_stream_ticket_opens_one_stream_once(pool: PgPool) {
    let app = spawn_app(pool.clone()).await;
    let (id, shooter, target) = app.battle_match("statki").await;
    let path = format!("/v1/matches/{id}/stream");

    let first = ticket(&app, &target.token).await;
    let response = with_ticket(&app, &path, &first).await;
    assert_eq!(response.status(), StatusCode::OK);
    let mut stream = SseClient {
        body: Box::pin(
            response
                .bytes_stream()
                .map(|chunk| chunk.map(|bytes| bytes.to_vec())),
        ),
        buffer: String::new(),
        comments: 0,
        raw: String::new(),
        presence: Default::default(),
        held: Default::default(),
    };
    let state = stream.next().await.expect("the state");
    assert_eq!(state.kind(), "state");
    assert_eq!(
        state.data["view"]["you"],
        target.id.as_str(),
        "the ticket's player"
    );
    fire(&app, &id, &shooter, "B2").await;
    assert_eq!(stream.next().await.unwrap().kind(), "shot_fired");

    // Single use.
    let again = with_ticket(&app, &path, &first).await;
    assert_eq!(again.status(), StatusCode::UNAUTHORIZED);
    // The player feed takes one too; other routes do not.
    let feed = ticket(&app, &target.token).await;
    assert_eq!(
        with_ticket(&app, "/v1/stream", &feed).await.status(),
        StatusCode::OK
    );
    let elsewhere = ticket(&app, &target.token).await;
    let me = app
        .client
        .get(app.url(&format!("/v1/me?ticket={elsewhere}")))
        .send()
        .await
        .unwrap();
    assert_eq!(me.status(), StatusCode::UNAUTHORIZED);

    // A refused request uses its ticket up too (any answer spends it).
    let spent = ticket(&app, &target.token).await;
    let refused = app
        .client
        .get(app.url(&format!("{path}?ticket={spent}")))
        .header("Last-Event-ID", "seven")
        .send()
        .await
        .unwrap();
    assert_eq!(refused.status(), StatusCode::BAD_REQUEST);
    assert_eq!(
        with_ticket(&app, &path, &spent).await.status(),
        StatusCode::UNAUTHORIZED
    );

    // An expired ticket is refused; only digests are stored.
    let stale = ticket(&app, &target.token).await;
    let stored: Vec<Vec<u8>> = sqlx::query_scalar("SELECT digest FROM stream_tickets")
        .fetch_all(&pool)
        .await
        .unwrap();
    assert!(stored.iter().all(|digest| digest.len() == 32));
    assert!(!stored.iter().any(|digest| digest == stale.as_bytes()));
    sqlx::query("UPDATE stream_tickets SET expires_at = now() - interval '1 second'")
        .execute(&pool)
        .await
        .unwrap();
    assert_eq!(
        with_ticket(&app, &path, &stale).await.status(),
        StatusCode::UNAUTHORIZED
    );
}

#[sqlx::test]
async fn a_ticket_dies_with_its_token(pool: PgPool) {
    let app = spawn_app(pool).await;
    let ala = app.register("ala").await;
    let ticket = ticket(&app, &ala.token).await;
    let revoked = app.delete("/v1/me/tokens", &ala.token).await;
    assert_eq!(revoked.status, StatusCode::OK);
    assert_eq!(
        with_ticket(&app, "/v1/stream", &ticket).await.status(),
        StatusCode::UNAUTHORIZED
    );
}

#[sqlx::test]
async fn a_reaction_reaches_the_opponents_and_a_spectators_stream(pool: PgPool) {
    let app = spawn_app(pool).await;
    let (id, shooter, target) = app.battle_match("statki").await;
    let watcher = app.register("watcher").await;
    let path = format!("/v1/matches/{id}/stream");
    let mut opponent = open(&app, &path, &target.token, None).await;
    let mut spectator = open(&app, &path, &watcher.token, None).await;
    let state = opponent.next().await.expect("the state");
    assert_eq!(state.kind(), "state");
    assert_eq!(spectator.next().await.expect("the state").kind(), "state");

    let answer = app
        .post(
            &format!("/v1/matches/{id}/reactions"),
            &shooter.token,
            json!({"reaction": "nice_shot"}),
        )
        .await;
    assert_eq!(answer.status, StatusCode::OK, "{:?}", answer.body);
    let feed = events_after(&app, &id, &watcher.token, state.seq()).await;
    assert_eq!(feed.len(), 1);
    for stream in [&mut opponent, &mut spectator] {
        let reaction = stream.next().await.expect("the reaction");
        assert_eq!(
            (reaction.kind(), reaction.seq()),
            ("reaction", state.seq() + 1)
        );
        assert_eq!(reaction.data["player"], shooter.id.as_str());
        assert_eq!(reaction.data["reaction"], "nice_shot");
        assert_eq!(reaction.data, feed[0]);
    }
    // The turn did not pass: the shooter still fires next, and both streams see it.
    fire(&app, &id, &shooter, "B2").await;
    for stream in [&mut opponent, &mut spectator] {
        let shot = stream.next().await.expect("the shot");
        assert_eq!((shot.kind(), shot.seq()), ("shot_fired", state.seq() + 2));
    }
}

#[sqlx::test]
async fn presence_follows_the_players_streams_across_replicas(pool: PgPool) {
    let live = HubSettings {
        keep_alive: Duration::from_millis(100),
        ..HubSettings::default()
    };
    let one = spawn_app_full(pool.clone(), standard_settings(), live.clone()).await;
    let two = spawn_app_full(pool, standard_settings(), live).await;
    let (id, shooter, target) = one.battle_match("statki").await;
    let watcher = one.register("watcher").await;
    let view_path = format!("/v1/matches/{id}");
    let path = format!("/v1/matches/{id}/stream");
    let presence_of = |view: &Value, player: &Player| view["presence"][&player.id].clone();

    let read_view = |tag: Option<String>| {
        let mut request = one
            .client
            .get(one.url(&view_path))
            .bearer_auth(&target.token);
        if let Some(tag) = tag {
            request = request.header("if-none-match", tag);
        }
        async move {
            let response = request.send().await.expect("view");
            let status = response.status();
            let tag = response.headers()["etag"].to_str().unwrap().to_owned();
            let body: Value = response.json().await.unwrap_or(Value::Null);
            (status, tag, body)
        }
    };

    // Nobody streams: both away, in the view and in its tag.
    let (_, away_tag, before) = read_view(None).await;
    assert_eq!(presence_of(&before, &shooter), "away");
    assert_eq!(presence_of(&before, &target), "away");
    let (status, _, _) = read_view(Some(away_tag.clone())).await;
    assert_eq!(status, StatusCode::NOT_MODIFIED);

    // The target follows the match on replica one, a spectator on replica two.
    let mut opponent = open(&one, &path, &target.token, None).await;
    let state = opponent.next().await.expect("the state");
    assert_eq!(state.kind(), "state");
    assert_eq!(presence_of(&state.data["view"], &target), "online");
    assert_eq!(presence_of(&state.data["view"], &shooter), "away");
    let mut spectator = open(&two, &path, &watcher.token, None).await;
    let seen = spectator.next().await.expect("the state");
    assert_eq!(presence_of(&seen.data["view"], &target), "online");
    assert_eq!(presence_of(&seen.data["view"], &shooter), "away");

    // The shooter opens the app (their own feed) on replica two: both streams are told.
    let feed = open(&two, "/v1/stream", &shooter.token, None).await;
    for stream in [&mut opponent, &mut spectator] {
        let came = stream.next_presence().await;
        assert_eq!(came.id, None, "presence is not a numbered event");
        assert_eq!(
            came.data,
            json!({"kind": "presence", "player": shooter.id, "presence": "online"})
        );
    }
    let (status, online_tag, online) = read_view(Some(away_tag.clone())).await;
    assert_eq!(
        status,
        StatusCode::OK,
        "a presence change is not answered 304"
    );
    assert_eq!(presence_of(&online, &shooter), "online");
    assert_eq!(presence_of(&online, &target), "online");
    assert_ne!(online_tag, away_tag);

    // The shooter leaves: away again, on both replicas' streams.
    drop(feed);
    for stream in [&mut opponent, &mut spectator] {
        let went = stream.next_presence().await;
        assert_eq!(
            went.data,
            json!({"kind": "presence", "player": shooter.id, "presence": "away"})
        );
    }
    // The match's numbered events are untouched: the next one is the shot.
    fire(&one, &id, &shooter, "C4").await;
    let shot = opponent.next().await.expect("the shot");
    assert_eq!((shot.kind(), shot.seq()), ("shot_fired", state.seq() + 1));
}

#[sqlx::test]
async fn lists_carry_the_players_ladder_ratings(pool: PgPool) {
    let app = spawn_app(pool.clone()).await;
    let rated = app.register("rated").await;
    let fresh = app.register("fresh").await;
    sqlx::query(
        "INSERT INTO ratings (ruleset, player_id, name, rating, deviation, volatility, games,
                              wins, losses, draws, updated_at)
         VALUES ('statki', $1, 'rated', 1612.5, 80, 0.06, 3, 2, 1, 0, now()),
                ('classic', $1, 'rated', 1400, 80, 0.06, 1, 0, 1, 0, now())",
    )
    .bind(rated.id.parse::<uuid::Uuid>().unwrap())
    .execute(&pool)
    .await
    .unwrap();
    let statki = app.create_match(&rated, json!({"ruleset": "statki"})).await;
    let open = app.get("/v1/matches?status=open", Some(&fresh.token)).await;
    let row = open.body["matches"]
        .as_array()
        .unwrap()
        .iter()
        .find(|row| row["id"] == statki.as_str())
        .expect("the open match is listed")
        .clone();
    assert_eq!(
        row["ratings"],
        json!({ rated.id.clone(): 1612.5 }),
        "this ladder's rating only"
    );
    let join = app
        .post(
            &format!("/v1/matches/{statki}/join"),
            &fresh.token,
            json!({}),
        )
        .await;
    assert_eq!(join.status, StatusCode::OK);
    let mine = app
        .get(
            &format!("/v1/players/{}/matches", fresh.id),
            Some(&fresh.token),
        )
        .await;
    assert_eq!(
        mine.body["matches"][0]["ratings"],
        json!({ rated.id.clone(): 1612.5 }),
        "a player without a rated game has none"
    );
}

#[sqlx::test]
async fn a_stream_opened_before_the_join_tells_the_joiners_presence(pool: PgPool) {
    let live = HubSettings {
        keep_alive: Duration::from_millis(100),
        ..HubSettings::default()
    };
    let app = spawn_app_full(pool, standard_settings(), live).await;
    let ala = app.register("ala").await;
    let bolek = app.register("bolek").await;
    let id = app.create_match(&ala, json!({})).await;
    let mut stream = open(&app, &format!("/v1/matches/{id}/stream"), &ala.token, None).await;
    let state = stream.next().await.expect("the state");
    assert_eq!(
        state.data["view"]["presence"],
        json!({ ala.id.clone(): "online" })
    );
    let feed = open(&app, "/v1/stream", &bolek.token, None).await;
    let joined = app
        .post(&format!("/v1/matches/{id}/join"), &bolek.token, json!({}))
        .await;
    assert_eq!(joined.status, StatusCode::OK);
    let came = stream.next_presence().await;
    assert_eq!(
        came.data,
        json!({"kind": "presence", "player": bolek.id, "presence": "online"})
    );
    assert_eq!(
        stream.next().await.expect("the join").kind(),
        "player_joined"
    );
    // From then on the joiner is watched like a player seated from the start.
    drop(feed);
    let went = stream.next_presence().await;
    assert_eq!(went.data["presence"], "away");
    assert_eq!(went.data["player"], bolek.id.as_str());
}

#[sqlx::test]
async fn a_ticket_not_of_a_tickets_form_is_refused_even_beside_a_bearer_header(pool: PgPool) {
    let app = spawn_app(pool).await;
    let (id, _, target) = app.battle_match("statki").await;
    let upper = "A".repeat(64);
    let short = "ab12";
    for path in [format!("/v1/matches/{id}/stream"), "/v1/stream".to_owned()] {
        for bad in [short, upper.as_str(), "not-a-ticket"] {
            for bearer in [true, false] {
                let mut request = app
                    .client
                    .get(app.url(&format!("{path}?ticket={bad}")))
                    .timeout(Duration::from_secs(5));
                if bearer {
                    request = request.bearer_auth(&target.token);
                }
                let reply = app.send(request).await;
                assert_eq!(
                    (reply.status, reply.code()),
                    (StatusCode::BAD_REQUEST, "invalid_query"),
                    "{path} ticket={bad} bearer={bearer}: {:?}",
                    reply.body
                );
                assert!(
                    reply.body["detail"]
                        .as_str()
                        .unwrap_or_default()
                        .contains("ticket"),
                    "{:?}",
                    reply.body
                );
            }
        }
    }
    // A ticket of the right form beside the header is not used, only spent, as documented.
    let spare = ticket(&app, &target.token).await;
    let beside = app
        .client
        .get(app.url(&format!("/v1/stream?ticket={spare}")))
        .bearer_auth(&target.token)
        .timeout(Duration::from_secs(5))
        .send()
        .await
        .unwrap();
    assert_eq!(beside.status(), StatusCode::OK);
    drop(beside);
    assert_eq!(
        with_ticket(&app, "/v1/stream", &spare).await.status(),
        StatusCode::UNAUTHORIZED
    );
}
