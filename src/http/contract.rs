//! Completes the generated OpenAPI document with what operations share, derived from how
//! each is declared: the problems any request of its shape may answer (bad path, query,
//! body or `Idempotency-Key`, a missing token, an unreachable database), the exact form of
//! the shared headers, and a description for every response. Handlers list only the
//! problems particular to them.

use utoipa::openapi::path::{Operation, Parameter, ParameterIn};
use utoipa::openapi::schema::{ObjectBuilder, Schema, SchemaFormat, Type};
use utoipa::openapi::security::SecurityRequirement;
use utoipa::openapi::{
    ContentBuilder, KnownFormat, OpenApi, Ref, RefOr, Required, ResponseBuilder,
    header::HeaderBuilder, link::LinkBuilder,
};

use super::error::ErrorCode;
use super::extract::{IDEMPOTENCY_KEY_MAX, IDEMPOTENCY_KEY_PATTERN};

/// The operations of a path the document describes (the service answers GET, PUT, POST and
/// DELETE), for the passes that complete, bound and describe them.
pub(super) fn operations_mut(
    item: &mut utoipa::openapi::path::PathItem,
) -> impl Iterator<Item = &mut Operation> {
    [
        item.get.as_mut(),
        item.put.as_mut(),
        item.post.as_mut(),
        item.delete.as_mut(),
    ]
    .into_iter()
    .flatten()
}

/// Applies every completion below to `doc`.
pub fn complete(doc: &mut OpenApi) {
    for (path, item) in doc.paths.paths.iter_mut() {
        let limited = !super::limits::exempt(path);
        for operation in operations_mut(item) {
            // An operation without a token says so, rather than saying nothing: `[]`, no
            // requirement (`[{}]` would read as "some requirement" to generators such as
            // openapi-python-client, which then ask for an authenticated client).
            if operation.security.is_none() {
                operation.security = Some(Vec::new());
            }
            shared_headers(operation);
            shared_problems(operation, limited);
            describe_responses(operation);
            if limited {
                rate_limit_headers(operation);
            }
        }
    }
    typed_views(doc);
    link_created_resources(doc);
    discriminate(doc, "EventResource", "Event", "Event");
    discriminate(doc, "Notice", "NoticeData", "Notice");
    record_on_finish(doc);
    match_stream_events(doc);
}

/// The record travels on `match_finished` alone (always there, as the match is over by
/// then), so the other event kinds do not declare it.
fn record_on_finish(doc: &mut OpenApi) {
    let Some(components) = doc.components.as_mut() else {
        return;
    };
    for (name, schema) in components.schemas.iter_mut() {
        let RefOr::T(Schema::Object(object)) = schema else {
            continue;
        };
        if !name.ends_with("Event") || !object.properties.contains_key("record") {
            continue;
        }
        if name == "MatchFinishedEvent" {
            require(object, &["record"]);
        } else {
            object.properties.remove("record");
            object.required.retain(|field| field != "record");
        }
    }
}

/// A match stream's data is the `state` snapshot, a `presence` change or one of the events:
/// one flat `oneOf` of `MatchState`, `PresenceChange` and every `EventResource` variant,
/// discriminated by `kind`, so generators see one level of variants.
fn match_stream_events(doc: &mut OpenApi) {
    use utoipa::openapi::schema::{Discriminator, OneOfBuilder};
    let Some(components) = doc.components.as_mut() else {
        return;
    };
    let (Some(RefOr::T(Schema::OneOf(stream))), Some(RefOr::T(Schema::OneOf(events)))) = (
        components.schemas.get("MatchStreamEvent").cloned(),
        components.schemas.get("EventResource").cloned(),
    ) else {
        return;
    };
    let mut discriminator = Discriminator::new("kind");
    discriminator.mapping.insert(
        "state".to_owned(),
        "#/components/schemas/MatchState".to_owned(),
    );
    discriminator.mapping.insert(
        "presence".to_owned(),
        "#/components/schemas/PresenceChange".to_owned(),
    );
    if let Some(event_kinds) = &events.discriminator {
        discriminator.mapping.extend(event_kinds.mapping.clone());
    }
    let mut one_of = OneOfBuilder::new()
        .description(stream.description.clone())
        .item(Ref::from_schema_name("MatchState"))
        .item(Ref::from_schema_name("PresenceChange"));
    for item in events.items {
        one_of = one_of.item(item);
    }
    components.schemas.insert(
        "MatchStreamEvent".to_owned(),
        RefOr::T(Schema::OneOf(
            one_of.discriminator(Some(discriminator)).build(),
        )),
    );
}

/// `shot_fired` → `ShotFired`.
fn pascal(snake: &str) -> String {
    snake
        .split('_')
        .map(|word| {
            let mut chars = word.chars();
            chars
                .next()
                .map(|first| first.to_ascii_uppercase().to_string() + chars.as_str())
                .unwrap_or_default()
        })
        .collect()
}

/// The one value a tagged variant's `kind` may take.
fn kind_of(variant: &utoipa::openapi::schema::Object) -> Option<String> {
    let RefOr::T(Schema::Object(kind)) = variant.properties.get("kind")? else {
        return None;
    };
    match kind.enum_values.as_deref()? {
        [serde_json::Value::String(kind)] => Some(kind.clone()),
        _ => None,
    }
}

/// A resource written as an envelope flattened around a tagged enum (`allOf` of the enum's
/// `oneOf` and the envelope's object) becomes what generators type well: one flat object
/// per kind, named `{Kind}{suffix}` (`ShotFiredEvent`), holding the envelope's fields and
/// the kind's own, and the resource a `oneOf` of them discriminated by `kind`. The enum's
/// own component goes.
fn discriminate(doc: &mut OpenApi, resource: &str, tagged: &str, suffix: &str) {
    use utoipa::openapi::schema::{Discriminator, OneOfBuilder};
    let Some(components) = doc.components.as_mut() else {
        return;
    };
    let Some(RefOr::T(Schema::OneOf(variants))) = components.schemas.get(tagged).cloned() else {
        return;
    };
    let Some(RefOr::T(Schema::AllOf(wrapper))) = components.schemas.get(resource).cloned() else {
        return;
    };
    let Some(envelope) = wrapper.items.iter().find_map(|item| match item {
        RefOr::T(Schema::Object(envelope)) => Some(envelope.clone()),
        _ => None,
    }) else {
        return;
    };
    let mut discriminator = Discriminator::new("kind");
    let mut one_of = OneOfBuilder::new().description(wrapper.description.clone());
    for variant in &variants.items {
        let RefOr::T(Schema::Object(variant)) = variant else {
            continue;
        };
        let Some(kind) = kind_of(variant) else {
            continue;
        };
        let name = format!("{}{suffix}", pascal(&kind));
        let mut flat = envelope.clone();
        for (field, schema) in &variant.properties {
            flat.properties.insert(field.clone(), schema.clone());
        }
        for field in &variant.required {
            if !flat.required.contains(field) {
                flat.required.push(field.clone());
            }
        }
        require(&mut flat, &["names"]);
        flat.description = Some(
            variant
                .description
                .clone()
                .unwrap_or_else(|| format!("A `{kind}` {}.", suffix.to_lowercase())),
        );
        let reference = format!("#/components/schemas/{name}");
        discriminator.mapping.insert(kind, reference);
        one_of = one_of.item(Ref::from_schema_name(name.clone()));
        components
            .schemas
            .insert(name, RefOr::T(Schema::Object(flat)));
    }
    components.schemas.remove(tagged);
    components.schemas.insert(
        resource.to_owned(),
        RefOr::T(Schema::OneOf(
            one_of.discriminator(Some(discriminator)).build(),
        )),
    );
}

/// A `POST` to a collection (`/v1/matches`, `/v1/players`) links its created `id` to every
/// operation on that resource (`/v1/matches/{id}…`), so generated clients and stateful
/// testers can follow them, and declares the `Location` it sends. A `201` whose answer has
/// no resource to read (`/v1/stream-tickets`, `/v1/queue`) declares neither.
fn link_created_resources(doc: &mut OpenApi) {
    let mut targets: Vec<(String, String)> = Vec::new();
    let readable: std::collections::BTreeSet<String> = doc
        .paths
        .paths
        .iter()
        .filter(|(_, item)| item.get.is_some())
        .map(|(path, _)| path.clone())
        .collect();
    for (path, item) in &doc.paths.paths {
        let operations = [&item.get, &item.put, &item.post, &item.delete];
        for operation in operations.into_iter().flatten() {
            if let Some(id) = &operation.operation_id {
                targets.push((path.clone(), id.clone()));
            }
        }
    }
    for (path, item) in doc.paths.paths.iter_mut() {
        let Some(create) = item.post.as_mut() else {
            continue;
        };
        if !readable.contains(&format!("{path}/{{id}}")) {
            continue;
        }
        let Some(RefOr::T(created)) = create.responses.responses.get_mut("201") else {
            continue;
        };
        created.headers.insert(
            "Location".to_owned(),
            HeaderBuilder::new()
                .schema(Some(
                    ObjectBuilder::new()
                        .schema_type(Type::String)
                        .format(Some(SchemaFormat::Custom("uri-reference".to_owned())))
                        .max_length(Some(path.len() + "/".len() + 36)),
                ))
                .description(Some(format!("The created resource: `{path}/{{id}}`")))
                .build()
                .into(),
        );
        let prefix = format!("{path}/{{id}}");
        for (target_path, operation_id) in &targets {
            if target_path == &prefix || target_path.starts_with(&format!("{prefix}/")) {
                let link = LinkBuilder::new()
                    .operation_id(operation_id.clone())
                    .parameter("id", "$response.body#/id")
                    .description(format!("`{operation_id}` on the created resource"))
                    .build();
                created.links.insert(operation_id.clone(), RefOr::T(link));
            }
        }
    }
}

fn problem_response(description: String) -> utoipa::openapi::Response {
    ResponseBuilder::new()
        .description(description)
        .content(
            "application/problem+json",
            ContentBuilder::new()
                .schema(Some(Ref::from_schema_name("Problem")))
                .build(),
        )
        .build()
}

/// Documents `status` with `code` on `operation`, next to the codes already listed there.
fn add_problem(operation: &mut Operation, status: u16, code: ErrorCode, why: &str) {
    let key = status.to_string();
    let entry = format!("`{code}` ({why})");
    match operation.responses.responses.get_mut(&key) {
        Some(RefOr::T(response)) => {
            if !response.description.contains(&format!("`{code}`")) {
                response.description = if response.description.is_empty() {
                    entry
                } else {
                    format!("{}; {entry}", response.description)
                };
            }
            if response.content.is_empty() {
                *response = problem_response(response.description.clone());
            }
        }
        Some(RefOr::Ref(_)) => {}
        None => {
            operation
                .responses
                .responses
                .insert(key, RefOr::T(problem_response(entry)));
        }
    }
}

fn parameters(operation: &Operation) -> impl Iterator<Item = &Parameter> {
    operation
        .parameters
        .iter()
        .flatten()
        .filter_map(|parameter| match parameter {
            RefOr::T(parameter) => Some(parameter),
            RefOr::Ref(_) => None,
        })
}

fn is_header(parameter: &Parameter, name: &str) -> bool {
    parameter.parameter_in == ParameterIn::Header && parameter.name.eq_ignore_ascii_case(name)
}

/// A typed path parameter (an id or an index) can be malformed; a free string cannot.
fn is_typed_path(parameter: &Parameter) -> bool {
    parameter.parameter_in == ParameterIn::Path
        && match &parameter.schema {
            Some(RefOr::T(Schema::Object(object))) => {
                object.format.is_some() || object.schema_type != Type::String.into()
            }
            _ => false,
        }
}

fn shared_problems(operation: &mut Operation, limited: bool) {
    let secured = operation
        .security
        .iter()
        .flatten()
        .any(|requirement| *requirement != SecurityRequirement::default());
    let typed_path = parameters(operation).any(is_typed_path);
    let query = parameters(operation).any(|p| p.parameter_in == ParameterIn::Query);
    let idempotent = parameters(operation).any(|p| is_header(p, "Idempotency-Key"));
    let body = operation.request_body.is_some();
    if typed_path {
        add_problem(
            operation,
            400,
            ErrorCode::InvalidPath,
            "a malformed path parameter",
        );
    }
    let names_a_resource = parameters(operation)
        .any(|parameter| parameter.parameter_in == ParameterIn::Path && parameter.name == "id");
    if names_a_resource {
        add_problem(operation, 404, ErrorCode::NotFound, "no such resource");
    }
    if query {
        add_problem(
            operation,
            400,
            ErrorCode::InvalidQuery,
            "a malformed or unknown query parameter",
        );
    }
    if body {
        add_problem(
            operation,
            400,
            ErrorCode::InvalidJson,
            "the body is not JSON",
        );
        add_problem(
            operation,
            413,
            ErrorCode::PayloadTooLarge,
            "the body is over 16 KiB",
        );
        add_problem(
            operation,
            415,
            ErrorCode::UnsupportedMediaType,
            "the body is not `application/json`",
        );
        add_problem(
            operation,
            422,
            ErrorCode::InvalidBody,
            "the JSON does not fit the request schema",
        );
    }
    if idempotent {
        add_problem(
            operation,
            400,
            ErrorCode::InvalidIdempotencyKey,
            "a malformed `Idempotency-Key`",
        );
        add_problem(
            operation,
            409,
            ErrorCode::IdempotencyKeyInProgress,
            "the first request with this key is still running",
        );
        add_problem(
            operation,
            422,
            ErrorCode::IdempotencyKeyReused,
            "this key came with another request",
        );
    }
    if secured {
        add_problem(
            operation,
            401,
            ErrorCode::Unauthorized,
            "no valid bearer token",
        );
    }
    add_problem(
        operation,
        408,
        ErrorCode::RequestTimeout,
        "the answer did not start within the request timeout, 15 s by default",
    );
    add_problem(
        operation,
        431,
        ErrorCode::HeadersTooLarge,
        "the request line and headers are over 32 KiB",
    );
    let system = operation
        .tags
        .as_ref()
        .is_some_and(|tags| tags.iter().any(|tag| tag == "system"));
    if limited {
        add_problem(
            operation,
            429,
            ErrorCode::RateLimited,
            "the client address or player is over a rate limit (see `Retry-After`)",
        );
    }
    if !system {
        add_problem(
            operation,
            503,
            ErrorCode::Unavailable,
            "the database is unreachable; nothing changed",
        );
        add_problem(
            operation,
            500,
            ErrorCode::Internal,
            "an unexpected fault, logged under the answer's `x-request-id`",
        );
    }
}

/// `Idempotency-Key` and `Last-Event-ID` are stated as the server parses them.
fn shared_headers(operation: &mut Operation) {
    for parameter in operation.parameters.iter_mut().flatten() {
        let RefOr::T(parameter) = parameter else {
            continue;
        };
        if is_header(parameter, "Idempotency-Key") {
            parameter.required = Required::False;
            parameter.description = Some(format!(
                "Retry-safe key, scoped to the caller: 1 to {IDEMPOTENCY_KEY_MAX} visible ASCII \
                 characters. A retry with the same key and request answers the first answer \
                 and changes nothing."
            ));
            parameter.schema = Some(RefOr::T(Schema::Object(
                ObjectBuilder::new()
                    .schema_type(Type::String)
                    .min_length(Some(1))
                    .max_length(Some(IDEMPOTENCY_KEY_MAX))
                    .pattern(Some(IDEMPOTENCY_KEY_PATTERN))
                    .build(),
            )));
        }
        if is_header(parameter, "Last-Event-ID") {
            parameter.required = Required::False;
            parameter.schema = Some(RefOr::T(Schema::Object(
                ObjectBuilder::new()
                    .schema_type(Type::Integer)
                    .format(Some(SchemaFormat::KnownFormat(KnownFormat::Int64)))
                    .minimum(Some(0))
                    .maximum(Some(super::stream::CURSOR_MAX as f64))
                    .build(),
            )));
        }
    }
}

/// Every answer of a rate-limited route says where its caller stands (when limits are on):
/// the draft IETF `RateLimit-Policy` and `RateLimit` headers of the limit with the least
/// room left (docs/security.md). Declared on every answer the limiter sees, which is all
/// of them but 408 and 431: those are answered by layers outside it (the request's time
/// limit and the head's size, src/http/mod.rs), before the limiter has counted the request.
fn rate_limit_headers(operation: &mut Operation) {
    let header = |description: &str, example: &str| {
        HeaderBuilder::new()
            .schema(Some(
                ObjectBuilder::new()
                    .schema_type(Type::String)
                    .max_length(Some(200))
                    .examples([serde_json::Value::String(example.to_owned())]),
            ))
            .description(Some(description.to_owned()))
            .build()
            .into()
    };
    for (status, response) in operation.responses.responses.iter_mut() {
        let RefOr::T(response) = response else {
            continue;
        };
        let seen_by_the_limiter = status.starts_with('2')
            || status.starts_with('3')
            || (status.starts_with('4') && status != "408" && status != "431");
        if !seen_by_the_limiter {
            continue;
        }
        response.headers.insert(
            "RateLimit-Policy".to_owned(),
            header(
                "The limit this answer reports: `\"name\";q=<burst>;w=<seconds a spent burst takes to come back>`; `name` is `address`, `player`, `register`, `login`, `register_network` or `login_network` (an IPv6 /48)",
                "\"player\";q=100;w=2",
            ),
        );
        response.headers.insert(
            "RateLimit".to_owned(),
            header(
                "Where the caller stands on that limit: `\"name\";r=<requests left>;t=<seconds until the burst is whole again>` (`r=0` on a 429)",
                "\"player\";r=97;t=1",
            ),
        );
    }
}

/// Every response has a description; a bare one gets its status's reason.
fn describe_responses(operation: &mut Operation) {
    for (status, response) in operation.responses.responses.iter_mut() {
        if let RefOr::T(response) = response
            && response.description.is_empty()
        {
            let reason = status
                .parse::<u16>()
                .ok()
                .and_then(|code| axum::http::StatusCode::from_u16(code).ok())
                .and_then(|code| code.canonical_reason())
                .unwrap_or("The answer");
            response.description = reason.to_owned();
        }
        if let RefOr::T(response) = response
            && (status == "429" || status == "503")
        {
            response.headers.insert(
                "Retry-After".to_owned(),
                HeaderBuilder::new()
                    .schema(Some(
                        ObjectBuilder::new()
                            .schema_type(Type::Integer)
                            .minimum(Some(0)),
                    ))
                    .description(Some("Seconds to wait before trying again"))
                    .build()
                    .into(),
            );
        }
    }
}

fn object_of(schema: Option<&RefOr<Schema>>) -> Option<utoipa::openapi::schema::Object> {
    match schema? {
        RefOr::T(Schema::Object(object)) => Some(object.clone()),
        RefOr::T(Schema::AllOf(all)) => all.items.iter().find_map(|item| match item {
            RefOr::T(Schema::Object(object)) => Some(object.clone()),
            _ => None,
        }),
        _ => None,
    }
}

fn one_value(value: &str) -> RefOr<Schema> {
    RefOr::T(Schema::Object(
        ObjectBuilder::new()
            .schema_type(Type::String)
            .enum_values(Some([value]))
            .build(),
    ))
}

fn require(object: &mut utoipa::openapi::schema::Object, fields: &[&str]) {
    for field in fields {
        if !object.required.iter().any(|present| present == field) {
            object.required.push((*field).to_owned());
        }
    }
}

/// A match is typed by its viewer: `ParticipantMatch` (the caller's own side, every field
/// present, `you` set) or `SpectatorMatch` (no own side, `you` null), one flat object
/// each, and `MatchResource` a `oneOf` of them discriminated by `viewer`. Reads carry
/// `names`; the answers to commands are `MatchUpdate`, the participant's view without them
/// (a decline's, whose caller never sat, `SpectatorUpdate`).
fn typed_views(doc: &mut OpenApi) {
    use utoipa::openapi::schema::{Discriminator, OneOfBuilder};
    let Some(components) = doc.components.as_mut() else {
        return;
    };
    let (Some(envelope), Some(common), Some(own)) = (
        object_of(components.schemas.get("MatchResource")),
        object_of(components.schemas.get("MatchView")),
        object_of(components.schemas.get("ParticipantView")),
    ) else {
        return;
    };
    let mut base = envelope.clone();
    for (field, schema) in common.properties {
        base.properties.insert(field, schema);
    }
    for field in common.required {
        require(&mut base, &[field.as_str()]);
    }
    require(&mut base, &["you", "names", "viewer"]);

    let mut spectator = base.clone();
    spectator.properties.insert(
        "you".to_owned(),
        RefOr::T(Schema::Object(
            ObjectBuilder::new()
                .schema_type(Type::Null)
                .description(Some("Null: the caller is not a participant."))
                .build(),
        )),
    );
    spectator
        .properties
        .insert("viewer".to_owned(), one_value("spectator"));
    spectator.description = Some(
        "A match as a spectator sees it (any player not seated in it): both public sides, no own side."
            .to_owned(),
    );

    let mut participant = base;
    for (field, schema) in own.properties {
        participant.properties.insert(field.clone(), schema);
        require(&mut participant, &[field.as_str()]);
    }
    participant.properties.insert(
        "you".to_owned(),
        RefOr::T(Schema::Object(
            ObjectBuilder::new()
                .schema_type(Type::String)
                .format(Some(SchemaFormat::KnownFormat(KnownFormat::Uuid)))
                .description(Some("The caller's own id."))
                .build(),
        )),
    );
    participant
        .properties
        .insert("viewer".to_owned(), one_value("participant"));
    participant.description =
        Some("A match as one of its players sees it: the public sides and its own.".to_owned());

    let mut update = participant.clone();
    update.properties.remove("names");
    update.required.retain(|field| field != "names");
    update.description = Some(
        "The match as the player who sent a command sees it after the change: a `ParticipantMatch` without `names` (commands do not look names up)."
            .to_owned(),
    );

    // A decline's answer: the invited player never took a seat, so they see the cancelled
    // match as a spectator does.
    let mut spectator_update = spectator.clone();
    spectator_update.properties.remove("names");
    spectator_update.required.retain(|field| field != "names");
    spectator_update.description = Some(
        "The match as a caller without a seat sees it after their command (a decline): a `SpectatorMatch` without `names`."
            .to_owned(),
    );

    let mut discriminator = Discriminator::new("viewer");
    for (kind, name) in [
        ("participant", "ParticipantMatch"),
        ("spectator", "SpectatorMatch"),
    ] {
        discriminator
            .mapping
            .insert(kind.to_owned(), format!("#/components/schemas/{name}"));
    }
    let resource = OneOfBuilder::new()
        .item(Ref::from_schema_name("ParticipantMatch"))
        .item(Ref::from_schema_name("SpectatorMatch"))
        .discriminator(Some(discriminator))
        .description(Some(
            "A match as one caller sees it, by `viewer`: a participant's or a spectator's view.",
        ))
        .build();
    components.schemas.remove("MatchView");
    components.schemas.remove("ParticipantView");
    components.schemas.remove("ViewerKind");
    for (name, schema) in [
        ("ParticipantMatch", Schema::Object(participant)),
        ("SpectatorMatch", Schema::Object(spectator)),
        ("MatchUpdate", Schema::Object(update)),
        ("SpectatorUpdate", Schema::Object(spectator_update)),
        ("MatchResource", Schema::OneOf(resource)),
    ] {
        components.schemas.insert(name.to_owned(), RefOr::T(schema));
    }

    // Commands answer the caller's own view without names (a decline, a spectator's).
    for item in doc.paths.paths.values_mut() {
        let commands = [item.put.as_mut(), item.post.as_mut(), item.delete.as_mut()];
        for operation in commands.into_iter().flatten() {
            let answer = if operation.operation_id.as_deref() == Some("decline") {
                "SpectatorUpdate"
            } else {
                "MatchUpdate"
            };
            for response in operation.responses.responses.values_mut() {
                let RefOr::T(response) = response else {
                    continue;
                };
                for content in response.content.values_mut() {
                    let RefOr::T(content) = content else {
                        continue;
                    };
                    if let Some(RefOr::Ref(reference)) = &content.schema
                        && reference.ref_location == "#/components/schemas/MatchResource"
                    {
                        content.schema = Some(RefOr::Ref(Ref::from_schema_name(answer)));
                    }
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn operations(doc: &OpenApi) -> Vec<(String, &Operation)> {
        let mut all = Vec::new();
        for (path, item) in &doc.paths.paths {
            let operations = [&item.get, &item.put, &item.post, &item.delete];
            for operation in operations.into_iter().flatten() {
                all.push((path.clone(), operation));
            }
        }
        all
    }

    #[test]
    fn every_response_is_described_and_every_refusal_is_a_problem() {
        let doc = crate::http::openapi();
        let codes: Vec<&str> = ErrorCode::ALL.iter().map(|code| code.as_str()).collect();
        for (path, operation) in operations(&doc) {
            for (status, response) in &operation.responses.responses {
                let RefOr::T(response) = response else {
                    panic!("{path} {status}: a reference");
                };
                assert!(!response.description.is_empty(), "{path} {status}");
                if status.starts_with('4') || status.starts_with('5') {
                    let problem = response.content.get("application/problem+json");
                    assert!(problem.is_some(), "{path} {status} is not a problem");
                    // Every code a description names is a real one.
                    for quoted in response.description.split('`').skip(1).step_by(2) {
                        let looks_like_code =
                            quoted.chars().all(|c| c.is_ascii_lowercase() || c == '_');
                        if looks_like_code {
                            assert!(codes.contains(&quoted), "{path} {status}: `{quoted}`");
                        }
                    }
                }
            }
        }
    }

    #[test]
    fn secured_operations_document_401_and_id_paths_404() {
        let doc = crate::http::openapi();
        for (path, operation) in operations(&doc) {
            let responses = &operation.responses.responses;
            let secured = operation
                .security
                .iter()
                .flatten()
                .any(|requirement| *requirement != SecurityRequirement::default());
            // Every secured operation may answer 401; an open one only to refuse credentials
            // it was given (log-in).
            if secured {
                assert!(responses.contains_key("401"), "{path}");
            } else if let Some(RefOr::T(unauthorized)) = responses.get("401") {
                assert!(
                    unauthorized.description.contains("invalid_credentials"),
                    "{path}: an open operation answering 401"
                );
            }
            if path.contains("{id}") {
                assert!(responses.contains_key("404"), "{path}");
            }
        }
    }
}
