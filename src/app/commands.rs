//! Player commands, group-committed: concurrent commands on different matches are decided
//! together and stored in one transaction (one claim of idempotency keys, one lock of the
//! match rows, one write statement, one commit), so the database does its per-transaction
//! work once for the whole batch. Batching is natural: a lane takes whatever commands are
//! waiting when it is free, so a lone command never waits for a timer, and while one lane
//! commits the next batch gathers for another.
//!
//! When the replica holds the state it stored last for every match of a batch, the batch is
//! decided from those states without the lock, and its write stores only if no row moved on
//! meanwhile; otherwise it is rolled back and decided again under the locks (see
//! [`super::cache`]).
//!
//! A batch holds at most one command per match and per idempotency key; the rest wait for
//! the next batch, so each answer is exactly the state its command produced. A command the
//! engine refuses, or a retry answered from its key, changes nothing and never holds up or
//! rolls back the others.

use std::collections::{HashMap, HashSet};
use std::sync::Arc;
use std::time::Instant;

use chrono::{DateTime, Utc};
use sqlx::pool::PoolConnection;
use sqlx::{PgPool, Postgres};
use tokio::sync::{mpsc, oneshot};
use uuid::Uuid;

use super::cache::MatchCache;
use super::committed::{Committed, Heralds};
use super::idempotency::{Answer, Idempotency, replay_on_match, to_json};
use super::resources::{MatchResource, ShotAnswer};
use super::write::{self, Change, Extras, Judged, Stored};
use super::{AppError, Result};
use crate::engine::Command;
use crate::store::citus::{Kind, KindCell};
use crate::store::{self, StoreError, idempotency as keys, matches};

/// Most commands one batch decides and stores together.
pub const BATCH_MAX: usize = 256;
/// Commands waiting for a lane; a request beyond waits to be queued.
const QUEUE_CAPACITY: usize = 4_096;
/// How often a batch that lost a deadlock to another replica is tried again.
const DEADLOCK_RETRIES: usize = 3;

/// What a command's caller is answered with.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum AnswerKind {
    /// The caller's view of the match after the command.
    View,
    /// The shooter's answer to a shot.
    Shot,
}

/// A command's answer, as rendered inside its batch.
#[derive(Debug)]
pub(crate) enum Reply {
    View(Box<MatchResource>),
    Shot(Box<ShotAnswer>),
}

impl serde::Serialize for Reply {
    fn serialize<S: serde::Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        match self {
            Reply::View(view) => view.serialize(serializer),
            Reply::Shot(shot) => shot.serialize(serializer),
        }
    }
}

struct Job {
    match_id: Uuid,
    /// On Citus, the worker group holding the match's shard (see [`Routes`]).
    worker: Option<i32>,
    actor: Uuid,
    command: Command,
    key: Option<Idempotency>,
    kind: AnswerKind,
    reply: oneshot::Sender<Result<Answer<Reply>>>,
}

/// The handle requests submit commands through; lanes run until every handle is dropped.
///
/// Each match belongs to one lane, chosen from its id: two commands of one match never run
/// in two lanes at once, so two batches of one replica never wait on each other's rows.
#[derive(Clone)]
pub(crate) struct Committer {
    lanes: Arc<[mpsc::Sender<Job>]>,
    cache: Arc<MatchCache>,
    routes: Arc<Routes>,
}

/// How long the shard placements read from Citus's metadata are trusted before they are
/// read again (they are also read again after a batch fails, as after a shard moved).
const PLACEMENTS_LIFETIME: std::time::Duration = std::time::Duration::from_secs(30);

/// On Citus, which worker holds each match: a batch holds matches of one worker only, so it
/// is that worker's transaction alone (no two-phase commit on the shot path), and the lanes
/// are shared out among the workers so each lane's batches fill with one worker's matches.
/// On plain PostgreSQL every match is on the one server and nothing is routed.
pub(crate) struct Routes {
    pool: PgPool,
    kind: KindCell,
    state: std::sync::RwLock<RouteState>,
}

enum RouteState {
    Unknown,
    Plain,
    Citus {
        placements: store::citus::Placements,
        read_at: Instant,
        stale: bool,
    },
}

/// Where one match goes: its worker group, that group's place among the workers, and how
/// many workers there are.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct Route {
    pub worker: i32,
    pub index: usize,
    pub workers: usize,
}

impl Routes {
    fn new(pool: PgPool, kind: KindCell) -> Self {
        Routes {
            pool,
            kind,
            state: std::sync::RwLock::new(RouteState::Unknown),
        }
    }

    /// The route of `match_id`, reading the placements when they are unknown, old or
    /// marked stale; `None` on plain PostgreSQL, or when they cannot be read now (the
    /// batch may then span workers, as it did before routing).
    pub(crate) async fn route(&self, match_id: Uuid) -> Option<Route> {
        if let Some(known) = self.known(match_id) {
            return known;
        }
        match self.read().await {
            Ok(()) => self.known(match_id).flatten(),
            Err(error) => {
                tracing::warn!(%error, "shard placements unreadable; batching without them");
                None
            }
        }
    }

    /// The route from what is known, if that is fresh.
    fn known(&self, match_id: Uuid) -> Option<Option<Route>> {
        let state = self.state.read().ok()?;
        match &*state {
            RouteState::Unknown => None,
            RouteState::Plain => Some(None),
            RouteState::Citus {
                placements,
                read_at,
                stale,
            } => {
                if *stale || read_at.elapsed() > PLACEMENTS_LIFETIME {
                    return None;
                }
                let workers = placements.workers();
                Some(placements.worker_of(match_id).and_then(|worker| {
                    let index = workers.iter().position(|w| *w == worker)?;
                    Some(Route {
                        worker,
                        index,
                        workers: workers.len(),
                    })
                }))
            }
        }
    }

    async fn read(&self) -> std::result::Result<(), StoreError> {
        let mut conn = self.pool.acquire().await?;
        let next = if self.kind.get(&mut *conn).await?.distributed() {
            RouteState::Citus {
                placements: store::citus::placements(&mut conn).await?,
                read_at: Instant::now(),
                stale: false,
            }
        } else {
            RouteState::Plain
        };
        if let Ok(mut state) = self.state.write() {
            *state = next;
        }
        Ok(())
    }

    /// After a failed batch: a shard may have moved, so the placements are read again.
    fn mark_stale(&self) {
        if let Ok(mut state) = self.state.write()
            && let RouteState::Citus { stale, .. } = &mut *state
        {
            *stale = true;
        }
    }
}

/// The lane of a match among `lanes`: on Citus, one of the lanes given to its worker.
pub(crate) fn lane_for(match_id: Uuid, route: Option<Route>, lanes: usize) -> usize {
    let lanes = lanes.max(1);
    match route {
        None => lane_of(match_id, lanes),
        Some(route) => {
            let per_worker = (lanes / route.workers.max(1)).max(1);
            (route.index * per_worker + lane_of(match_id, per_worker)) % lanes
        }
    }
}

/// The lane of `match_id` among `lanes`: stable for the life of the replica.
pub(crate) fn lane_of(match_id: Uuid, lanes: usize) -> usize {
    // The low bits of an id are random (v4) or random-filled (v7).
    let low = match_id.as_u128() as u64;
    (low % lanes.max(1) as u64) as usize
}

impl Committer {
    /// Starts `lanes` lanes on `pool`, whose database's kind `kind` keeps, keeping match
    /// states in up to `kept_bytes`.
    pub fn start(
        pool: PgPool,
        kind: KindCell,
        heralds: Heralds,
        lanes: usize,
        kept_bytes: u64,
    ) -> Self {
        let cache = Arc::new(MatchCache::with_bytes(kept_bytes));
        heralds.keep_current(cache.clone());
        let routes = Arc::new(Routes::new(pool.clone(), kind));
        let senders: Vec<mpsc::Sender<Job>> = (0..lanes.max(1))
            .map(|_| {
                let (jobs, queue) = mpsc::channel(QUEUE_CAPACITY);
                tokio::spawn(lane(
                    pool.clone(),
                    queue,
                    cache.clone(),
                    routes.clone(),
                    heralds.clone(),
                ));
                jobs
            })
            .collect();
        Committer {
            lanes: senders.into(),
            cache,
            routes,
        }
    }

    /// The match states the lanes keep.
    pub fn cache(&self) -> Arc<MatchCache> {
        self.cache.clone()
    }

    /// Runs `actor`'s command on `match_id` in the next batch and waits for its answer.
    pub async fn submit(
        &self,
        match_id: Uuid,
        actor: Uuid,
        command: Command,
        key: Option<Idempotency>,
        kind: AnswerKind,
    ) -> Result<Answer<Reply>> {
        let (reply, answer) = oneshot::channel();
        let route = self.routes.route(match_id).await;
        let job = Job {
            match_id,
            worker: route.map(|route| route.worker),
            actor,
            command,
            key,
            kind,
            reply,
        };
        let lane = &self.lanes[lane_for(match_id, route, self.lanes.len())];
        lane.send(job).await.map_err(|_| AppError::ShuttingDown)?;
        answer.await.map_err(|_| AppError::ShuttingDown)?
    }
}

async fn lane(
    pool: PgPool,
    mut queue: mpsc::Receiver<Job>,
    cache: Arc<MatchCache>,
    routes: Arc<Routes>,
    heralds: Heralds,
) {
    let mut waiting: Vec<Job> = Vec::new();
    // The lane keeps one connection across batches (no acquire and health check per
    // batch); a batch that fails gives it up, and the next takes a fresh one.
    let mut connection: Option<LaneConnection> = None;
    loop {
        if waiting.is_empty() {
            if queue.is_empty() && connection.as_ref().is_some_and(|lane| lane.in_transaction) {
                // Going idle: end the transaction opened for commands that did not come,
                // so no transaction stays open while nothing happens.
                if let Some(lane) = connection.as_mut()
                    && lane.commit(false).await.is_err()
                {
                    connection = None;
                }
                continue;
            }
            // Closing the pool (shutdown) ends an idle lane, so the connection it keeps is
            // given back and the close can finish; commands still queued are answered
            // `unavailable` as their senders drop.
            let next = tokio::select! {
                next = queue.recv() => next,
                () = pool.close_event() => return,
            };
            match next {
                Some(job) => waiting.push(job),
                None => return,
            }
        }
        // Commands left over from the last batch go first, then whatever is waiting, until
        // the batch is full: a match with several commands in flight puts one in each
        // batch and never keeps other matches' commands out.
        let mut split = Split::default();
        for job in std::mem::take(&mut waiting) {
            split.push(job);
        }
        while split.batch.len() < BATCH_MAX {
            match queue.try_recv() {
                Ok(job) => split.push(job),
                Err(_) => break,
            }
        }
        waiting = split.later;
        let more_waiting = !waiting.is_empty() || !queue.is_empty();
        if !run(
            &pool,
            &routes.kind,
            &cache,
            &heralds,
            &mut connection,
            split.batch,
            more_waiting,
        )
        .await
        {
            routes.mark_stale();
        }
    }
}

/// The connection a lane keeps, and whether a transaction is open on it.
///
/// When commands are already waiting as a batch commits, the lane opens the next batch's
/// transaction in the commit's round trip (`COMMIT; BEGIN`), so under load a batch costs
/// three round trips (lock, write, commit) instead of four. An idle lane holds no open
/// transaction. A connection dropped with a transaction open is closed, never handed back
/// to the pool in the middle of one.
struct LaneConnection {
    conn: PoolConnection<Postgres>,
    in_transaction: bool,
}

impl LaneConnection {
    async fn begin(&mut self) -> std::result::Result<(), StoreError> {
        if !self.in_transaction {
            // Marked first: if the `BEGIN` fails half-way, the connection is closed.
            self.in_transaction = true;
            store::begin(&mut self.conn).await?;
        }
        Ok(())
    }

    async fn commit(&mut self, begin_next: bool) -> std::result::Result<(), StoreError> {
        store::commit(&mut self.conn, begin_next).await?;
        self.in_transaction = begin_next;
        Ok(())
    }

    async fn rollback(&mut self) -> std::result::Result<(), StoreError> {
        if !self.in_transaction {
            return Ok(());
        }
        store::rollback(&mut self.conn).await?;
        self.in_transaction = false;
        Ok(())
    }
}

impl Drop for LaneConnection {
    fn drop(&mut self) {
        if self.in_transaction {
            self.conn.close_on_drop();
        }
    }
}

/// Commands split, in arrival order, into a batch with at most one command per match and
/// per idempotency key, all of one worker (on Citus), and the rest for later batches.
#[derive(Default)]
struct Split {
    batch: Vec<Job>,
    later: Vec<Job>,
    matches: HashSet<Uuid>,
    keys: HashSet<(Uuid, Uuid, String)>,
}

impl Split {
    fn push(&mut self, job: Job) {
        let key_free = job.key.as_ref().is_none_or(|key| {
            !self
                .keys
                .contains(&(job.match_id, job.actor, key.key.clone()))
        });
        let same_worker = self
            .batch
            .first()
            .is_none_or(|first| first.worker == job.worker);
        if key_free
            && same_worker
            && self.batch.len() < BATCH_MAX
            && !self.matches.contains(&job.match_id)
        {
            self.matches.insert(job.match_id);
            if let Some(key) = &job.key {
                self.keys.insert((job.match_id, job.actor, key.key.clone()));
            }
            self.batch.push(job);
        } else {
            self.later.push(job);
        }
    }
}

/// Runs a batch: first from the cached states of its matches when every one is cached,
/// then, if that cannot be committed as decided, under the row locks. Whether it committed.
#[tracing::instrument(skip_all, fields(batch = jobs.len()))]
async fn run(
    pool: &PgPool,
    kind: &KindCell,
    cache: &MatchCache,
    heralds: &Heralds,
    connection: &mut Option<LaneConnection>,
    jobs: Vec<Job>,
    more_waiting: bool,
) -> bool {
    let ids: Vec<Uuid> = jobs.iter().map(|job| job.match_id).collect();
    let mut decided = None;
    if let Some((rows, now)) = cache.take(&ids) {
        let source = Source::Cached(rows, now);
        match attempt(
            pool,
            kind,
            cache,
            heralds,
            connection,
            &jobs,
            more_waiting,
            source,
        )
        .await
        {
            Ok(Attempt::Committed(replies)) => {
                metrics::counter!("statki_command_batches_total", "decided_from" => "kept")
                    .increment(1);
                decided = Some(Ok(replies));
            }
            Ok(Attempt::Unsure) => {
                metrics::counter!("statki_command_batches_relocked_total").increment(1);
                // The taken states may be stale: forget them, give back whatever the
                // attempt did, and decide again under the locks.
                forget(cache, &ids);
                if let Some(lane) = connection.as_mut()
                    && lane.rollback().await.is_err()
                {
                    *connection = None;
                }
            }
            Err(error) => {
                // A fault is answered as one (the commit may even have gone through), but a
                // lost deadlock stored nothing and is tried again under the locks.
                *connection = None;
                forget(cache, &ids);
                if !lost_deadlock(&error) {
                    decided = Some(Err(error));
                }
            }
        }
    }
    let mut attempts = 0;
    let outcomes = match decided {
        Some(outcomes) => outcomes,
        None => loop {
            attempts += 1;
            let outcome = attempt(
                pool,
                kind,
                cache,
                heralds,
                connection,
                &jobs,
                more_waiting,
                Source::Locked,
            )
            .await;
            if outcome.is_err() {
                *connection = None;
            }
            match outcome {
                Err(error) if lost_deadlock(&error) && attempts <= DEADLOCK_RETRIES => {
                    tracing::warn!(
                        attempt = attempts,
                        "a command batch lost a deadlock; trying it again"
                    );
                }
                Ok(Attempt::Committed(replies)) => {
                    metrics::counter!("statki_command_batches_total", "decided_from" => "locked")
                        .increment(1);
                    break Ok(replies);
                }
                Ok(Attempt::Unsure) => {
                    break Err(AppError::Corrupt(
                        "a batch decided under its locks could not be stored as decided".into(),
                    ));
                }
                Err(error) => break Err(error),
            }
        },
    };
    metrics::histogram!("statki_command_batch_size").record(jobs.len() as f64);
    match outcomes {
        Ok(outcomes) => {
            for (job, outcome) in jobs.into_iter().zip(outcomes) {
                let _ = job.reply.send(outcome);
            }
            true
        }
        Err(error) => {
            tracing::error!(%error, "a command batch failed; nothing of it was stored");
            for job in jobs {
                let _ = job.reply.send(Err(error.shared()));
            }
            false
        }
    }
}

fn forget(cache: &MatchCache, ids: &[Uuid]) {
    for id in ids {
        cache.forget(id);
    }
}

fn lost_deadlock(error: &AppError) -> bool {
    matches!(error, AppError::Database(sqlx::Error::Database(db)) if db.code().as_deref() == Some("40P01"))
}

/// One try at a batch on the lane's connection (taking one from the pool if it has none).
#[allow(clippy::too_many_arguments)]
async fn attempt(
    pool: &PgPool,
    kind: &KindCell,
    cache: &MatchCache,
    heralds: &Heralds,
    connection: &mut Option<LaneConnection>,
    jobs: &[Job],
    more_waiting: bool,
    source: Source,
) -> Result<Attempt> {
    let lane = match connection {
        Some(lane) => lane,
        None => connection.insert(LaneConnection {
            conn: pool.acquire().await?,
            in_transaction: false,
        }),
    };
    // Asked of the database once per application, then kept: no query per batch.
    let kind = kind.get(&mut *lane.conn).await?;
    execute(lane, kind, cache, heralds, jobs, more_waiting, source).await
}

/// Where a batch's match states come from.
enum Source {
    /// Locked and read in the batch's own transaction, at the database's time.
    Locked,
    /// This replica's own last write of each match, at the estimated database time (see
    /// [`MatchCache`]); the write stores only if each row is still as cached.
    Cached(HashMap<Uuid, matches::MatchRow>, DateTime<Utc>),
}

/// How one try at a batch ended.
enum Attempt {
    /// Committed; every command's answer in order (accepted, refused or replayed).
    Committed(Vec<Result<Answer<Reply>>>),
    /// Decided from cached states that turned out stale, or that a command was refused or a
    /// clock ran out on (which only the locked row can confirm): nothing may be committed.
    Unsure,
}

/// What became of one command while its batch was decided.
enum Plan {
    /// Answered already (a replay, or a refusal).
    Done(Result<Answer<Reply>>),
    /// Accepted as change number `change` of the batch.
    Accepted {
        change: usize,
        created_at: DateTime<Utc>,
    },
}

/// Decides and stores one batch in one transaction; returns each job's answer in order.
/// With `begin_next`, the commit also opens the next batch's transaction.
async fn execute(
    lane: &mut LaneConnection,
    kind: Kind,
    cache: &MatchCache,
    heralds: &Heralds,
    jobs: &[Job],
    begin_next: bool,
    source: Source,
) -> Result<Attempt> {
    let mut plans: Vec<Option<Plan>> = jobs.iter().map(|_| None).collect();

    // Keys first: a retry is answered from its key and takes no part in the batch.
    let keyed: Vec<usize> = (0..jobs.len()).filter(|&i| jobs[i].key.is_some()).collect();
    let mut claimed_keys = HashSet::with_capacity(keyed.len());
    if !keyed.is_empty() {
        lane.begin().await?;
        let claims: Vec<keys::Claim<'_>> = keyed
            .iter()
            .filter_map(|&i| {
                let key = jobs[i].key.as_ref()?;
                Some(keys::Claim {
                    match_id: jobs[i].match_id,
                    player: jobs[i].actor,
                    key: &key.key,
                    request_hash: &key.request_hash,
                })
            })
            .collect();
        let claimed = keys::claim_many(&mut lane.conn, kind, &claims).await?;
        for (&i, claimed) in keyed.iter().zip(claimed) {
            if claimed {
                claimed_keys.insert(i);
            } else if let Some(key) = &jobs[i].key {
                let answer =
                    replay_on_match(&mut lane.conn, jobs[i].match_id, jobs[i].actor, key).await;
                plans[i] = Some(Plan::Done(answer.map(Answer::Replayed)));
            }
        }
    }

    let cached = matches!(source, Source::Cached(..));
    let (mut rows, now): (HashMap<Uuid, Result<matches::MatchRow, StoreError>>, _) = match source {
        Source::Cached(rows, now) => (
            rows.into_iter().map(|(id, row)| (id, Ok(row))).collect(),
            now,
        ),
        Source::Locked => {
            lane.begin().await?;
            // One lock for every match of the batch, in id order.
            let ids: Vec<Uuid> = (0..jobs.len())
                .filter(|&i| plans[i].is_none())
                .map(|i| jobs[i].match_id)
                .collect();
            let (locked, locked_at) = matches::lock_many(&mut lane.conn, kind, &ids).await?;
            let now = match locked_at {
                Some(now) => now,
                None => store::now(&mut *lane.conn).await?,
            };
            cache.read_clock(now, Instant::now());
            (locked.into_iter().map(|l| (l.id, l.row)).collect(), now)
        }
    };

    let mut changes = Vec::with_capacity(jobs.len());
    let mut unexpired = HashMap::new();
    let mut expiring = false;
    for (i, job) in jobs.iter().enumerate() {
        if plans[i].is_some() {
            continue;
        }
        let plan = match rows.remove(&job.match_id) {
            None => Plan::Done(Err(AppError::NotFound("match"))),
            Some(Err(error)) => Plan::Done(Err(error.into())),
            Some(Ok(row)) => {
                if cached && let Some(deadline) = row.state.deadline {
                    unexpired.insert(row.id, deadline);
                }
                decide(row, job, now, &mut changes, &mut expiring)
            }
        };
        if cached && !matches!(plan, Plan::Accepted { .. }) {
            return Ok(Attempt::Unsure);
        }
        plans[i] = Some(plan);
    }
    if expiring && !super::clocks::may_enforce(&mut lane.conn, now).await? {
        return Err(AppError::Unavailable(
            "a clock ran out during an outage the clock has not given back yet".into(),
        ));
    }

    // Rows before standings, on every path: a kept-state batch that locked standings first
    // could wait on a row the clock sweep or another replica holds while that one waits for
    // the standings. So the rows of the matches it finishes ranked are locked first (the
    // write still stores nothing over a row that moved on).
    let settling: Vec<Uuid> = changes
        .iter()
        .filter(|change| cached && change.settles_rating())
        .map(Change::id)
        .collect();
    if !settling.is_empty() {
        if !lane.in_transaction {
            lane.begin().await?;
        }
        matches::lock_many(&mut lane.conn, kind, &settling).await?;
    }

    // A batch decided from kept states whose changes are the write statement alone is that
    // one statement, atomic and durable on its own: no `BEGIN`, no `COMMIT`, one round trip.
    // On Citus the write is a statement per shard, so it always has a transaction.
    if !lane.in_transaction && (!changes.iter().all(Change::stands_alone) || kind.distributed()) {
        lane.begin().await?;
    }
    let folded = write::fold(&mut lane.conn, changes, now).await?;
    let mut replies: Vec<Option<Result<Answer<Reply>>>> = jobs.iter().map(|_| None).collect();
    let mut responses = Vec::new();
    let mut created = HashMap::with_capacity(folded.len());
    for (i, plan) in plans.into_iter().enumerate() {
        let job = &jobs[i];
        match plan {
            Some(Plan::Accepted { change, created_at }) => {
                created.insert(change, created_at);
                let change = &folded[change];
                let reply = render(job, change, created_at, now)?;
                if let Some(key) = &job.key {
                    responses.push((i, key, to_json(&reply)?));
                }
                replies[i] = Some(Ok(Answer::Fresh(reply)));
            }
            Some(Plan::Done(outcome)) => replies[i] = Some(outcome),
            None => replies[i] = Some(Err(AppError::Corrupt("an undecided command".into()))),
        }
    }
    let answers = responses
        .iter()
        .map(|(i, key, response)| keys::Answer {
            match_id: jobs[*i].match_id,
            player: jobs[*i].actor,
            key: &key.key,
            response,
        })
        .collect();
    // A claimed key whose command ended refused is given back, as if never used.
    let releases = claimed_keys
        .iter()
        .filter(|&&i| matches!(replies[i], Some(Err(_))))
        .filter_map(|&i| {
            Some(keys::KeyRef {
                match_id: jobs[i].match_id,
                player: jobs[i].actor,
                key: &jobs[i].key.as_ref()?.key,
            })
        })
        .collect();
    let extras = Extras {
        answers,
        releases,
        unexpired,
    };
    let mut told = Committed::default();
    match write::write(&mut lane.conn, kind, &folded, extras, now, &mut told).await? {
        Stored::All(read_now) => {
            if let Some(read_now) = read_now {
                cache.read_clock(read_now, Instant::now());
            }
        }
        Stored::Moved => return Ok(Attempt::Unsure),
    }
    if lane.in_transaction {
        // Only after a locked batch is the next one likely to need a transaction too.
        lane.commit(begin_next && !cached).await?;
    }
    heralds.tell(told);
    let events: usize = folded.iter().map(|change| change.events.len()).sum();
    metrics::counter!("statki_events_total").increment(events as u64);
    remember(cache, folded, &created);

    let shots = jobs
        .iter()
        .zip(&replies)
        .filter(|(job, reply)| {
            matches!(job.command, Command::Fire { .. })
                && matches!(reply, Some(Ok(Answer::Fresh(_))))
        })
        .count();
    metrics::counter!("statki_shots_total").increment(shots as u64);
    Ok(Attempt::Committed(
        replies
            .into_iter()
            .map(|reply| reply.unwrap_or(Err(AppError::Corrupt("an unanswered command".into()))))
            .collect(),
    ))
}

/// Keeps the committed state of every match still in play for the next command on it, and
/// forgets the ones that ended. `created` holds the creation time of each accepted change.
fn remember(
    cache: &MatchCache,
    folded: Vec<write::Folded>,
    created: &HashMap<usize, DateTime<Utc>>,
) {
    for (index, change) in folded.into_iter().enumerate() {
        match created.get(&index) {
            Some(&created_at) if !change.state.phase.is_over() => cache.keep(matches::MatchRow {
                id: change.id,
                state: change.state,
                last_seq: change.last_seq,
                created_at,
            }),
            _ => cache.forget(&change.id),
        }
    }
}

/// Judges one command against its locked match; an accepted command (or a clock that ran
/// out before it arrived) becomes a change of the batch.
fn decide(
    row: matches::MatchRow,
    job: &Job,
    now: DateTime<Utc>,
    changes: &mut Vec<Change>,
    expiring: &mut bool,
) -> Plan {
    let created_at = row.created_at;
    match write::judge(row, job.actor, &job.command, now) {
        Judged::Accepted(change) => {
            changes.push(change);
            Plan::Accepted {
                change: changes.len() - 1,
                created_at,
            }
        }
        Judged::Expired(expiry, refusal) => {
            *expiring = true;
            changes.push(expiry);
            Plan::Done(Err(refusal.into()))
        }
        Judged::Refused(refusal) => Plan::Done(Err(refusal.into())),
    }
}

fn render(
    job: &Job,
    change: &write::Folded,
    created_at: DateTime<Utc>,
    now: DateTime<Utc>,
) -> Result<Reply> {
    Ok(match job.kind {
        AnswerKind::View => Reply::View(Box::new(MatchResource::render(
            change.id,
            &change.state,
            change.last_seq,
            created_at,
            job.actor,
            now,
        ))),
        AnswerKind::Shot => {
            let shot = change
                .events
                .first()
                .and_then(|shot| ShotAnswer::render(shot, &change.state, change.last_seq, now))
                .ok_or_else(|| AppError::Corrupt("a shot without its event".into()))?;
            Reply::Shot(Box::new(shot))
        }
    })
}
