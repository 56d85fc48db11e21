//! What a UI renders without extra round trips: the live list for spectators, paged lists
//! with cursors, player names next to ids, the effective rules, the clock on events, and
//! the headers browsers may read.

use crate::common;

use common::{Reply, spawn_app};
use reqwest::StatusCode;
use serde_json::json;
use sqlx::PgPool;

fn ids(reply: &Reply) -> Vec<String> {
    reply.body["matches"]
        .as_array()
        .unwrap_or_else(|| panic!("a page of matches: {:?}", reply.body))
        .iter()
        .map(|m| m["id"].as_str().unwrap().to_owned())
        .collect()
}

#[sqlx::test]
async fn live_matches_are_listed_newest_first_a_page_at_a_time(pool: PgPool) {
    let app = spawn_app(pool).await;
    let spectator = app.register("Spectator").await;
    let (placing, _, _) = app.placement_match("statki").await;
    let (fighting, _, _) = app.battle_match("classic").await;
    let (newest, _, _) = app.placement_match("battaglia").await;
    let waiting = app.create_match(&spectator, json!({})).await;

    let all = app
        .get("/v1/matches?status=live", Some(&spectator.token))
        .await;
    assert_eq!(all.status, StatusCode::OK, "{:?}", all.body);
    assert_eq!(
        ids(&all),
        [newest.clone(), fighting.clone(), placing.clone()]
    );
    assert!(!ids(&all).contains(&waiting), "a waiting match is not live");
    assert!(all.body.get("next").is_none(), "one page holds them all");
    // A spectator sees the sides, not a participant's own fields.
    let view = &all.body["matches"][0];
    assert!(view["you"].is_null());
    assert!(view.get("fleet").is_none());

    let first = app
        .get("/v1/matches?status=live&limit=2", Some(&spectator.token))
        .await;
    assert_eq!(ids(&first), [newest.clone(), fighting.clone()]);
    let next = first.body["next"].as_str().expect("a next page");
    let rest = app
        .get(
            &format!("/v1/matches?status=live&limit=2&after={next}"),
            Some(&spectator.token),
        )
        .await;
    assert_eq!(ids(&rest), std::slice::from_ref(&placing));
    assert!(rest.body.get("next").is_none());
}

#[sqlx::test]
async fn finished_matches_leave_the_live_list(pool: PgPool) {
    let app = spawn_app(pool).await;
    let spectator = app.register("Spectator").await;
    let (id, on_turn, _) = app.battle_match("statki").await;
    let resigned = app
        .post(
            &format!("/v1/matches/{id}/resign"),
            &on_turn.token,
            json!({}),
        )
        .await;
    assert_eq!(resigned.status, StatusCode::OK, "{:?}", resigned.body);
    let live = app
        .get("/v1/matches?status=live", Some(&spectator.token))
        .await;
    assert!(ids(&live).is_empty(), "{:?}", live.body);
}

#[sqlx::test]
async fn bad_list_queries_are_coded_problems(pool: PgPool) {
    let app = spawn_app(pool).await;
    let ala = app.register("Ala").await;
    for (query, code) in [
        ("status=finished", "invalid_query"),
        ("limit=0", "invalid_query"),
        ("limit=101", "invalid_query"),
        ("limit=ten", "invalid_query"),
        ("after=nonsense", "invalid_cursor"),
        ("colour=red", "invalid_query"),
    ] {
        let reply = app
            .get(&format!("/v1/matches?{query}"), Some(&ala.token))
            .await;
        assert_eq!(
            (reply.status, reply.code()),
            (StatusCode::BAD_REQUEST, code),
            "{query}: {:?}",
            reply.body
        );
    }
}

#[sqlx::test]
async fn open_matches_are_newest_first_and_the_callers_own_are_marked(pool: PgPool) {
    let app = spawn_app(pool).await;
    let ala = app.register("Ala").await;
    let bolek = app.register("Bolek").await;
    let older = app.create_match(&ala, json!({})).await;
    let mine = app.create_match(&bolek, json!({})).await;
    let open = app.get("/v1/matches?status=open", Some(&bolek.token)).await;
    assert_eq!(ids(&open), [mine.clone(), older.clone()]);
    assert_eq!(open.body["matches"][0]["you"], bolek.id.as_str());
    assert!(open.body["matches"][1]["you"].is_null());
    // Names travel with the ids.
    assert_eq!(open.body["matches"][1]["names"][&ala.id], "Ala");
}

#[sqlx::test]
async fn views_and_events_name_their_players(pool: PgPool) {
    let app = spawn_app(pool).await;
    let (id, a, b) = app.placement_match("statki").await;
    let view = app.get(&format!("/v1/matches/{id}"), Some(&a.token)).await;
    assert_eq!(view.body["names"][&a.id], a.name.as_str());
    assert_eq!(view.body["names"][&b.id], b.name.as_str());
    let events = app
        .get(&format!("/v1/matches/{id}/events"), Some(&b.token))
        .await;
    let joined = events
        .body
        .as_array()
        .unwrap()
        .iter()
        .find(|event| event["kind"] == "player_joined")
        .expect("a join");
    assert_eq!(joined["names"][&b.id], b.name.as_str());
    // The join set the placement clock: the event says how long it runs.
    assert_eq!(joined["deadline_ms_left"], 120_000);
}

#[sqlx::test]
async fn a_view_states_the_rules_as_played(pool: PgPool) {
    let app = spawn_app(pool).await;
    let ala = app.register("Ala").await;
    for (ruleset, options, extra_shot) in [
        ("classic", json!(null), true),
        ("statki", json!(null), false),
        ("battaglia", json!(null), false),
        ("battaglia", json!({"extra_shot_on_hit": true}), true),
    ] {
        let id = app
            .create_match(&ala, json!({"ruleset": ruleset, "options": options}))
            .await;
        let view = app
            .get(&format!("/v1/matches/{id}"), Some(&ala.token))
            .await;
        assert_eq!(
            view.body["rules"]["options"]["extra_shot_on_hit"], extra_shot,
            "{ruleset} {options}"
        );
    }
}

#[sqlx::test]
async fn the_shot_answer_carries_the_clock(pool: PgPool) {
    let app = spawn_app(pool).await;
    let (id, on_turn, _) = app.battle_match("statki").await;
    let shot = app
        .post(
            &format!("/v1/matches/{id}/shots"),
            &on_turn.token,
            json!({"cell": "E5"}),
        )
        .await;
    assert_eq!(shot.status, StatusCode::OK, "{:?}", shot.body);
    let left = shot.body["deadline_ms_left"].as_i64().expect("ms left");
    assert!((29_000..=30_000).contains(&left), "{left}");
}

#[sqlx::test]
async fn browsers_may_read_the_retry_request_id_and_rate_limit_headers(pool: PgPool) {
    let app = spawn_app(pool).await;
    let response = app
        .client
        .get(app.url("/healthz"))
        .header("origin", "https://play.example")
        .send()
        .await
        .unwrap();
    let exposed = response
        .headers()
        .get("access-control-expose-headers")
        .expect("exposed headers")
        .to_str()
        .unwrap()
        .to_ascii_lowercase();
    for header in [
        "retry-after",
        "x-request-id",
        "ratelimit",
        "ratelimit-policy",
    ] {
        assert!(exposed.contains(header), "{header} in {exposed}");
    }
}

#[sqlx::test]
async fn an_idempotency_key_is_visible_ascii(pool: PgPool) {
    let app = spawn_app(pool).await;
    let ala = app.register("Ala").await;
    let reply = app
        .send(
            app.client
                .post(app.url("/v1/matches"))
                .bearer_auth(&ala.token)
                .header("idempotency-key", "two words")
                .json(&json!({})),
        )
        .await;
    assert_eq!(
        (reply.status, reply.code()),
        (StatusCode::BAD_REQUEST, "invalid_idempotency_key")
    );
}

#[sqlx::test]
async fn a_classic_match_created_event_states_the_rules_as_played(pool: PgPool) {
    let app = spawn_app(pool).await;
    let ala = app.register("Ala").await;
    let id = app.create_match(&ala, json!({"ruleset": "classic"})).await;
    let view = app
        .get(&format!("/v1/matches/{id}"), Some(&ala.token))
        .await;
    let events = app
        .get(&format!("/v1/matches/{id}/events"), Some(&ala.token))
        .await;
    assert_eq!(events.body[0]["kind"], "match_created", "{:?}", events.body);
    assert_eq!(view.body["rules"]["options"]["extra_shot_on_hit"], true);
    assert_eq!(events.body[0]["rules"], view.body["rules"]);
}

#[sqlx::test]
async fn a_players_matches_are_public_like_the_profile(pool: PgPool) {
    let app = spawn_app(pool).await;
    let ala = app.register("Ala").await;
    let id = app.create_match(&ala, json!({})).await;
    let path = format!("/v1/players/{}/matches", ala.id);
    let public = app.get(&path, None).await;
    assert_eq!(public.status, StatusCode::OK, "{:?}", public.body);
    assert_eq!(ids(&public), std::slice::from_ref(&id));
    assert!(public.body["matches"][0]["you"].is_null());
    let own = app.get(&path, Some(&ala.token)).await;
    assert_eq!(own.body["matches"][0]["you"], ala.id.as_str());
    // A token that is sent must still be valid.
    let forged = app.get(&path, Some("not-a-token")).await;
    assert_eq!(forged.status, StatusCode::UNAUTHORIZED);
}

#[sqlx::test]
async fn created_resources_are_located(pool: PgPool) {
    let app = spawn_app(pool).await;
    let player = app
        .client
        .post(app.url("/v1/players"))
        .json(&json!({"name": "Ala"}))
        .send()
        .await
        .unwrap();
    assert_eq!(player.status(), StatusCode::CREATED);
    let location = player.headers()["location"].to_str().unwrap().to_owned();
    let body: serde_json::Value = player.json().await.unwrap();
    assert_eq!(
        location,
        format!("/v1/players/{}", body["id"].as_str().unwrap())
    );
    let token = body["token"].as_str().unwrap();
    let created = app
        .client
        .post(app.url("/v1/matches"))
        .bearer_auth(token)
        .json(&json!({}))
        .send()
        .await
        .unwrap();
    assert_eq!(created.status(), StatusCode::CREATED);
    let location = created.headers()["location"].to_str().unwrap().to_owned();
    let body: serde_json::Value = created.json().await.unwrap();
    assert_eq!(
        location,
        format!("/v1/matches/{}", body["id"].as_str().unwrap())
    );
    let followed = app.get(&location, Some(token)).await;
    assert_eq!(followed.status, StatusCode::OK);
}

#[sqlx::test]
async fn what_is_the_same_for_everyone_may_be_cached(pool: PgPool) {
    let app = spawn_app(pool).await;
    for path in ["/v1/rulesets", "/v1/bots", "/openapi.yaml"] {
        let response = app.client.get(app.url(path)).send().await.unwrap();
        assert_eq!(response.status(), StatusCode::OK, "{path}");
        assert_eq!(
            response.headers()["cache-control"],
            "public, max-age=300",
            "{path}"
        );
    }
    let me = app.register("Ala").await;
    let private = app
        .client
        .get(app.url("/v1/me"))
        .bearer_auth(&me.token)
        .send()
        .await
        .unwrap();
    assert_eq!(private.headers()["cache-control"], "no-store");
}

#[sqlx::test]
async fn texts_longer_than_the_document_allows_are_refused_before_any_look_up(pool: PgPool) {
    let app = spawn_app(pool).await;
    let ala = app.register("Ala").await;
    let log_in =
        |body: serde_json::Value| app.send(app.client.post(app.url("/v1/sessions")).json(&body));
    let long_name = log_in(json!({ "name": "A".repeat(33), "password": "correct horse" })).await;
    assert_eq!(
        (long_name.status, long_name.code()),
        (StatusCode::UNPROCESSABLE_ENTITY, "invalid_body"),
        "{:?}",
        long_name.body
    );
    let long_password = log_in(json!({ "name": "Ala", "password": "p".repeat(129) })).await;
    assert_eq!(
        (long_password.status, long_password.code()),
        (StatusCode::UNPROCESSABLE_ENTITY, "invalid_body")
    );
    // At the bounds, a log-in is looked up and checked as ever.
    let at_bounds = log_in(json!({ "name": "A".repeat(32), "password": "p".repeat(128) })).await;
    assert_eq!(
        (at_bounds.status, at_bounds.code()),
        (StatusCode::UNAUTHORIZED, "invalid_credentials")
    );
    let long_current = app
        .put(
            "/v1/me/password",
            &ala.token,
            json!({ "password": "battery staple", "current_password": "c".repeat(129) }),
        )
        .await;
    assert_eq!(
        (long_current.status, long_current.code()),
        (StatusCode::UNPROCESSABLE_ENTITY, "invalid_body")
    );
}

#[sqlx::test]
async fn an_events_page_starts_after_a_sequence_number_from_0_to_2_53(pool: PgPool) {
    let app = spawn_app(pool).await;
    let ala = app.register("Ala").await;
    let id = app.create_match(&ala, json!({})).await;
    for after in ["-1", "9007199254740992"] {
        let reply = app
            .get(
                &format!("/v1/matches/{id}/events?after={after}"),
                Some(&ala.token),
            )
            .await;
        assert_eq!(
            (reply.status, reply.code()),
            (StatusCode::BAD_REQUEST, "invalid_query"),
            "after={after}"
        );
    }
    for after in ["0", "9007199254740991"] {
        let reply = app
            .get(
                &format!("/v1/matches/{id}/events?after={after}"),
                Some(&ala.token),
            )
            .await;
        assert_eq!(reply.status, StatusCode::OK, "after={after}");
    }
}

#[sqlx::test]
async fn a_problem_quotes_at_most_1024_characters_of_the_request(pool: PgPool) {
    let app = spawn_app(pool).await;
    let ala = app.register("Ala").await;
    // An unknown field is named in the refusal: a long one is cut.
    let field = "x".repeat(5_000);
    let reply = app
        .post("/v1/matches", &ala.token, json!({ field: true }))
        .await;
    assert_eq!(reply.code(), "invalid_body", "{:?}", reply.status);
    let detail = reply.body["detail"].as_str().expect("a detail");
    assert!(
        detail.contains("xxxx"),
        "the detail names the field: {detail}"
    );
    assert_eq!(detail.chars().count(), 1024);
}

#[sqlx::test]
async fn list_entries_are_compact_summaries_with_the_view_one_get_away(pool: PgPool) {
    let app = spawn_app(pool).await;
    let (id, shooter, target) = app.battle_match("statki").await;
    for (player, cell) in [(&shooter, "B2"), (&target, "B2"), (&shooter, "C2")] {
        let shot = app
            .post(
                &format!("/v1/matches/{id}/shots"),
                &player.token,
                json!({ "cell": cell }),
            )
            .await;
        assert_eq!(shot.status, StatusCode::OK, "{:?}", shot.body);
    }
    let resigned = app
        .post(
            &format!("/v1/matches/{id}/resign"),
            &target.token,
            json!({}),
        )
        .await;
    assert_eq!(resigned.status, StatusCode::OK);

    let list = app
        .get(&format!("/v1/players/{}/matches", shooter.id), None)
        .await;
    let entry = &list.body["matches"][0];
    assert_eq!(entry["id"], id.as_str());
    assert_eq!(entry["phase"], "finished");
    assert_eq!(entry["ruleset"], "statki");
    assert_eq!(entry["result"]["winner"], shooter.id.as_str());
    assert_eq!(entry["result"]["reason"], "resigned");
    assert_eq!(entry["names"][&shooter.id], shooter.name.as_str());
    assert_eq!(entry["players"].as_array().unwrap().len(), 2);
    // Nothing of either side: no shots, fleets or record.
    for heavy in [
        "sides",
        "record",
        "fleet",
        "shots",
        "incoming",
        "placement_hints",
    ] {
        assert!(entry.get(heavy).is_none(), "{heavy} in a list entry");
    }
    let size = serde_json::to_vec(entry).unwrap().len();
    assert!(size < 1024, "a summary of {size} bytes");

    let view = app
        .get(&format!("/v1/matches/{id}"), Some(&shooter.token))
        .await;
    assert_eq!(view.body["seq"], entry["seq"]);
    assert_eq!(view.body["record"].as_array().unwrap().len(), 2);
}

/// The `Location` a `201` declares in the document, per path of the operation.
fn declared_location(document: &serde_json::Value, path: &str) -> Option<serde_json::Value> {
    document["paths"][path]["post"]["responses"]["201"]["headers"]
        .get("Location")
        .cloned()
}

#[sqlx::test]
async fn a_201_declares_a_location_exactly_where_it_sends_one(pool: PgPool) {
    let app = spawn_app(pool).await;
    let document = serde_json::to_value(statki::http::openapi()).expect("the document as JSON");
    let player = app.register("Ala").await;
    let answers = [
        (
            "/v1/stream-tickets",
            app.client
                .post(app.url("/v1/stream-tickets"))
                .bearer_auth(&player.token)
                .send()
                .await
                .unwrap(),
        ),
        (
            "/v1/queue",
            app.client
                .post(app.url("/v1/queue"))
                .bearer_auth(&player.token)
                .json(&json!({"ruleset": "statki"}))
                .send()
                .await
                .unwrap(),
        ),
        (
            "/v1/matches",
            app.client
                .post(app.url("/v1/matches"))
                .bearer_auth(&player.token)
                .json(&json!({}))
                .send()
                .await
                .unwrap(),
        ),
    ];
    for (path, answer) in answers {
        assert_eq!(answer.status(), StatusCode::CREATED, "{path}");
        let sent = answer.headers().get("location").is_some();
        let declared = declared_location(&document, path).is_some();
        assert_eq!(
            sent, declared,
            "{path}: Location sent {sent}, declared {declared}"
        );
        if path == "/v1/matches" {
            assert!(sent, "a created match is located");
        } else {
            assert!(!sent, "{path} creates nothing to read at a location");
        }
    }
    assert!(document["paths"].get("/v1/stream-tickets/{id}").is_none());
}

const README: &str = include_str!("../../README.md");

/// The rows of the README's table whose header line is `header`: every line from there up
/// to the first that is not a table row.
fn readme_table(header: &str) -> Vec<&'static str> {
    let mut lines = README.lines().skip_while(|line| *line != header);
    assert!(lines.next().is_some(), "the README has the table {header}");
    lines.take_while(|line| line.starts_with('|')).collect()
}

#[test]
fn the_readme_endpoint_table_is_one_table_naming_every_path() {
    let rows = readme_table("| verb and path | what it does |").join("\n");
    let document = serde_json::to_value(statki::http::openapi()).expect("the document as JSON");
    let paths = document["paths"].as_object().expect("paths");
    // A path's `{id}` may be written as `…` in a row that names several operations.
    let missing: Vec<&String> = paths
        .keys()
        .filter(|path| {
            let shortened = path.replacen("/v1/matches/{id}", "…", 1);
            !rows.contains(&format!("{path}`"))
                && !rows.contains(&format!("{path}?"))
                && !rows.contains(&format!("{path} "))
                && !rows.contains(&format!("{shortened}`"))
        })
        .collect();
    assert!(
        missing.is_empty(),
        "paths the README's endpoint table (one unbroken table) does not name: {missing:?}"
    );
}

#[test]
fn the_readme_error_table_lists_every_code() {
    let rows = readme_table("| status | codes |");
    let document = serde_json::to_value(statki::http::openapi()).expect("the document as JSON");
    let codes = document["components"]["schemas"]["ErrorCode"]["enum"]
        .as_array()
        .expect("the codes");
    let missing: Vec<&str> = codes
        .iter()
        .filter_map(|code| code.as_str())
        .filter(|code| !rows.iter().any(|row| row.contains(&format!("`{code}`"))))
        .collect();
    assert!(
        missing.is_empty(),
        "codes missing from the README's error table: {missing:?}"
    );
}

#[sqlx::test]
async fn a_views_etag_has_the_form_the_readme_gives(pool: PgPool) {
    let app = spawn_app(pool).await;
    let (id, shooter, _) = app.battle_match("statki").await;
    assert!(
        README.contains(r#"`W/"<seq>-<caller>-<presence>"`"#),
        "the README gives the view tag's form"
    );
    let answer = app
        .client
        .get(app.url(&format!("/v1/matches/{id}")))
        .bearer_auth(&shooter.token)
        .send()
        .await
        .unwrap();
    let tag = answer.headers()["etag"].to_str().unwrap().to_owned();
    let view: serde_json::Value = answer.json().await.unwrap();
    let inner = tag
        .strip_prefix("W/\"")
        .and_then(|rest| rest.strip_suffix('"'))
        .unwrap_or_else(|| panic!("a weak tag: {tag}"));
    let parts: Vec<&str> = inner.split('-').collect();
    assert_eq!(parts.len(), 3, "{tag}");
    assert_eq!(parts[0], view["seq"].to_string(), "{tag}");
    assert_eq!(parts[1], shooter.id.replace('-', ""), "{tag}");
    assert_eq!(parts[2].len(), 2, "one mark per seated player: {tag}");
    assert!(
        parts[2].chars().all(|mark| mark == 'o' || mark == 'a'),
        "{tag}"
    );
}

#[test]
fn public_operations_declare_no_security_requirement_rather_than_an_empty_one() {
    let document = serde_json::to_value(statki::http::openapi()).expect("the document as JSON");
    let mut public = Vec::new();
    for (path, item) in document["paths"].as_object().expect("paths") {
        for (method, operation) in item.as_object().expect("an item") {
            let security = operation["security"]
                .as_array()
                .unwrap_or_else(|| panic!("{method} {path} says what it needs"));
            // `[{}]` alone reads as "a requirement" to generators (openapi-python-client
            // then asks for an authenticated client): a public operation says `[]`.
            assert!(
                !(security.len() == 1 && security[0] == json!({})),
                "{method} {path}: security [{{}}]"
            );
            if security.is_empty() {
                public.push(format!("{method} {path}"));
            }
        }
    }
    for expected in [
        "post /v1/players",
        "post /v1/sessions",
        "get /v1/rulesets",
        "get /v1/bots",
    ] {
        assert!(
            public.contains(&expected.to_owned()),
            "{expected} is public: {public:?}"
        );
    }
}
