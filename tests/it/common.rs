//! Black-box test harness: `spawn_app` serves the real application on a random local port
//! over the test's own database, and helpers speak to it over HTTP like any client.

pub use crate::fleets::{legal_fleet, legal_fleet_cells};
use reqwest::StatusCode;
use serde_json::{Value, json};
use sqlx::PgPool;
use statki::app::{App, GameSettings};
use statki::auth::Tokens;
use statki::engine::Clock;
use statki::http::{self, HttpSettings};
use statki::live::{Hub, HubSettings};

pub const SECRET: &[u8] = b"test-secret-for-statki-tests-32-bytes-at-least";

pub struct TestApp {
    pub address: String,
    pub client: reqwest::Client,
    pub pool: PgPool,
    pub app: App,
    /// This app's own live hub, as each replica has one.
    pub live: Hub,
}

#[derive(Clone, Debug)]
pub struct Player {
    pub id: String,
    pub name: String,
    pub token: String,
}

pub fn standard_settings() -> GameSettings {
    GameSettings {
        standard_clock: Clock {
            placement_seconds: 120,
            shot_seconds: 30,
        },
        join_seconds: 900,
        open_matches_per_player: 100,
    }
}

/// Serves the application on 127.0.0.1 with the standard clocks.
pub async fn spawn_app(pool: PgPool) -> TestApp {
    spawn_app_with(pool, standard_settings()).await
}

pub async fn spawn_app_with(pool: PgPool, settings: GameSettings) -> TestApp {
    spawn_app_full(pool, settings, HubSettings::default()).await
}

/// Serves the application with the given clocks and live-hub settings.
pub async fn spawn_app_full(pool: PgPool, settings: GameSettings, live: HubSettings) -> TestApp {
    spawn_app_http(pool, settings, live, test_http_settings()).await
}

/// The transport settings of test apps: one CORS origin, no rate limits.
pub fn test_http_settings() -> HttpSettings {
    HttpSettings {
        cors_origins: vec!["https://play.example".into()],
        request_timeout: None,
        rate_limits: None,
        metrics_access: Default::default(),
    }
}

/// Serves the application with the given clocks, live-hub and transport settings.
pub async fn spawn_app_http(
    pool: PgPool,
    settings: GameSettings,
    live: HubSettings,
    http_settings: HttpSettings,
) -> TestApp {
    spawn_app_served(
        pool,
        settings,
        live,
        http_settings,
        http::server::ConnectionSettings::default(),
    )
    .await
}

/// Serves the application with every setting given, connection limits too.
pub async fn spawn_app_served(
    pool: PgPool,
    settings: GameSettings,
    live: HubSettings,
    http_settings: HttpSettings,
    connection_settings: http::server::ConnectionSettings,
) -> TestApp {
    statki::store::migrate(&pool).await.expect("migrations");
    let core = App::new(pool.clone(), settings, Tokens::new(SECRET).expect("keys"));
    let live = Hub::start(&pool, live);
    let app = http::app(http::state(core.clone(), live.clone()), &http_settings);
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0")
        .await
        .expect("bind");
    let address = format!("http://{}", listener.local_addr().expect("address"));
    tokio::spawn(http::server::serve(
        listener,
        app,
        connection_settings,
        std::future::pending(),
        std::time::Duration::ZERO,
    ));
    TestApp {
        address,
        client: reqwest::Client::new(),
        pool,
        app: core,
        live,
    }
}

/// A response as status and JSON body (`Null` when the body is not JSON).
#[derive(Debug)]
pub struct Reply {
    pub status: StatusCode,
    pub content_type: String,
    pub body: Value,
}

impl Reply {
    /// The problem `code` of an error reply.
    pub fn code(&self) -> &str {
        self.body["code"].as_str().unwrap_or("")
    }
}

impl TestApp {
    pub fn url(&self, path: &str) -> String {
        format!("{}{}", self.address, path)
    }

    pub async fn send(&self, request: reqwest::RequestBuilder) -> Reply {
        let response = request.send().await.expect("request sent");
        let status = response.status();
        let content_type = response
            .headers()
            .get("content-type")
            .and_then(|v| v.to_str().ok())
            .unwrap_or("")
            .to_owned();
        let text = response.text().await.expect("body");
        let body = serde_json::from_str(&text).unwrap_or(Value::Null);
        Reply {
            status,
            content_type,
            body,
        }
    }

    // Requests are built before the returned future, so it borrows only `self`.
    pub fn get<'a>(
        &'a self,
        path: &str,
        token: Option<&str>,
    ) -> impl Future<Output = Reply> + use<'a> {
        let mut request = self.client.get(self.url(path));
        if let Some(token) = token {
            request = request.bearer_auth(token);
        }
        self.send(request)
    }

    pub fn post<'a>(
        &'a self,
        path: &str,
        token: &str,
        body: Value,
    ) -> impl Future<Output = Reply> + use<'a> {
        self.send(
            self.client
                .post(self.url(path))
                .bearer_auth(token)
                .json(&body),
        )
    }

    pub fn put<'a>(
        &'a self,
        path: &str,
        token: &str,
        body: Value,
    ) -> impl Future<Output = Reply> + use<'a> {
        self.send(
            self.client
                .put(self.url(path))
                .bearer_auth(token)
                .json(&body),
        )
    }

    pub fn delete<'a>(&'a self, path: &str, token: &str) -> impl Future<Output = Reply> + use<'a> {
        self.send(self.client.delete(self.url(path)).bearer_auth(token))
    }

    pub async fn register(&self, name: &str) -> Player {
        let reply = self
            .send(
                self.client
                    .post(self.url("/v1/players"))
                    .json(&json!({ "name": name })),
            )
            .await;
        assert_eq!(reply.status, StatusCode::CREATED, "{:?}", reply.body);
        Player {
            id: reply.body["id"].as_str().unwrap().to_owned(),
            name: name.to_owned(),
            token: reply.body["token"].as_str().unwrap().to_owned(),
        }
    }

    /// Creates a match as `creator` with the given body; returns its id.
    pub async fn create_match(&self, creator: &Player, body: Value) -> String {
        let reply = self.post("/v1/matches", &creator.token, body).await;
        assert_eq!(reply.status, StatusCode::CREATED, "{:?}", reply.body);
        reply.body["id"].as_str().unwrap().to_owned()
    }

    /// Two players in a match in the placement phase.
    pub async fn placement_match(&self, ruleset: &str) -> (String, Player, Player) {
        let a = self.register(&unique("ala")).await;
        let b = self.register(&unique("bolek")).await;
        let id = self.create_match(&a, json!({ "ruleset": ruleset })).await;
        let joined = self
            .post(&format!("/v1/matches/{id}/join"), &b.token, json!({}))
            .await;
        assert_eq!(joined.status, StatusCode::OK, "{:?}", joined.body);
        (id, a, b)
    }

    /// Two players in a battle; returns (id, player on turn, the other).
    pub async fn battle_match(&self, ruleset: &str) -> (String, Player, Player) {
        let (id, a, b) = self.placement_match(ruleset).await;
        for player in [&a, &b] {
            let reply = self
                .put(
                    &format!("/v1/matches/{id}/fleet"),
                    &player.token,
                    legal_fleet(ruleset),
                )
                .await;
            assert_eq!(reply.status, StatusCode::OK, "{:?}", reply.body);
        }
        let view = self.get(&format!("/v1/matches/{id}"), Some(&a.token)).await;
        let turn = view.body["turn"].as_str().unwrap();
        if turn == a.id { (id, a, b) } else { (id, b, a) }
    }

    pub async fn event_count(&self) -> i64 {
        statki::store::events::count_all(&self.pool)
            .await
            .expect("count")
    }
}

/// Whether the test's database is distributed with Citus (`scripts/test`'s second pass).
pub async fn on_citus(pool: &PgPool) -> bool {
    statki::store::citus::Kind::of(pool)
        .await
        .expect("ask for the citus extension")
        .distributed()
}

/// Lets connections to this test's database in, or keeps them out. Run from the server's
/// main database, as a database cannot lock itself out. On Citus only the coordinator's
/// database is closed, where the replicas connect and listen: the statement is kept from
/// the workers (`citus.enable_ddl_propagation`), whose databases the coordinator must still
/// reach to run every command.
pub async fn allow_connections(pool: &PgPool, allow: bool) {
    use sqlx::Connection;
    let name: String = sqlx::query_scalar("SELECT current_database()")
        .fetch_one(pool)
        .await
        .unwrap();
    let url = std::env::var("DATABASE_URL").expect("DATABASE_URL");
    let mut admin = sqlx::PgConnection::connect(&url).await.unwrap();
    if on_citus(pool).await {
        sqlx::query("SET citus.enable_ddl_propagation TO off")
            .execute(&mut admin)
            .await
            .unwrap();
    }
    let statement = format!("ALTER DATABASE \"{name}\" ALLOW_CONNECTIONS {allow}");
    sqlx::raw_sql(sqlx::AssertSqlSafe(statement))
        .execute(&mut admin)
        .await
        .unwrap();
    admin.close().await.unwrap();
}

/// A name no other test uses.
pub fn unique(prefix: &str) -> String {
    format!(
        "{prefix}-{}",
        &uuid::Uuid::new_v4().simple().to_string()[..8]
    )
}

/// The text of a gzip-compressed answer body.
pub fn gunzip(packed: &[u8]) -> String {
    use std::io::Read;
    let mut text = String::new();
    flate2::read::GzDecoder::new(packed)
        .read_to_string(&mut text)
        .expect("a gzip body");
    text
}

/// One of the repository's `scripts/`, to run as a test sets it up.
pub fn script(name: &str) -> std::process::Command {
    std::process::Command::new(
        std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
            .join("scripts")
            .join(name),
    )
}

/// Runs `command` and returns what it printed; the test fails with its error output when
/// it does not succeed.
pub fn run_ok(command: &mut std::process::Command, what: &str) -> String {
    let output = command
        .output()
        .unwrap_or_else(|e| panic!("run {what}: {e}"));
    assert!(
        output.status.success(),
        "{what}: {}\n{}",
        output.status,
        String::from_utf8_lossy(&output.stderr)
    );
    String::from_utf8_lossy(&output.stdout).into_owned()
}

/// `statki verify` on the database at `url`, which must pass.
pub fn verify(url: &str, on: &str) {
    let verified = std::process::Command::new(env!("CARGO_BIN_EXE_statki"))
        .arg("verify")
        .env("DATABASE_URL", url)
        .env("RUST_LOG", "warn")
        .output()
        .expect("run statki verify");
    assert!(
        verified.status.success(),
        "statki verify on {on} failed:\n{}\n{}",
        String::from_utf8_lossy(&verified.stdout),
        String::from_utf8_lossy(&verified.stderr)
    );
}

/// Takes the whole server-sent events out of `buffer` and returns the logged ones' data as
/// JSON: only the log's events carry an `id:`; presence changes are not part of the log, so
/// comparisons with the log leave them out.
pub fn take_logged_events(buffer: &mut String) -> Vec<Value> {
    let mut events = Vec::new();
    while let Some(end) = buffer.find("\n\n") {
        let block: String = buffer.drain(..end + 2).collect();
        let data: Vec<&str> = block
            .lines()
            .filter_map(|line| line.strip_prefix("data:"))
            .map(|data| data.strip_prefix(' ').unwrap_or(data))
            .collect();
        let logged = block.lines().any(|line| line.starts_with("id:"));
        if logged && !data.is_empty() {
            events.push(serde_json::from_str(&data.join("\n")).expect("JSON"));
        }
    }
    events
}

/// A free port on loopback, for a replica process to listen on.
pub fn free_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port()
}

/// Waits until the replica process on `port` is ready, then talks to it over HTTP like
/// `TestApp` talks to an in-process app (its tokens are the process's own).
pub async fn replica_app(port: u16, pool: &PgPool) -> TestApp {
    let client = reqwest::Client::new();
    let address = format!("http://127.0.0.1:{port}");
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(20);
    loop {
        if let Ok(reply) = client.get(format!("{address}/readyz")).send().await
            && reply.status().is_success()
        {
            break;
        }
        assert!(
            std::time::Instant::now() < deadline,
            "replica on {port} never got ready"
        );
        tokio::time::sleep(std::time::Duration::from_millis(100)).await;
    }
    TestApp {
        address,
        client,
        pool: pool.clone(),
        app: App::new(
            pool.clone(),
            standard_settings(),
            Tokens::new(SECRET).unwrap(),
        ),
        live: Hub::start(pool, HubSettings::default()),
    }
}

/// Prepares `sql` on `conn` under a fresh name, which it returns.
pub async fn prepare(conn: &mut sqlx::PgConnection, sql: &str) -> String {
    let name = format!("hot_{}", uuid::Uuid::new_v4().simple());
    sqlx::raw_sql(sqlx::AssertSqlSafe(format!("PREPARE {name} AS {sql}")))
        .execute(&mut *conn)
        .await
        .unwrap_or_else(|e| panic!("PREPARE {sql}: {e}"));
    name
}

/// The plan of the prepared statement `name` executed with `args` (SQL literals), as text.
pub async fn explain_execute(conn: &mut sqlx::PgConnection, name: &str, args: &str) -> String {
    let plan: Vec<String> = sqlx::query_scalar(sqlx::AssertSqlSafe(format!(
        "EXPLAIN EXECUTE {name}({args})"
    )))
    .fetch_all(&mut *conn)
    .await
    .unwrap_or_else(|e| panic!("EXPLAIN EXECUTE {name}({args}): {e}"));
    plan.join("\n")
}
