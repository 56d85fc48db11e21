//! The bounds of every value the OpenAPI document describes: the longest string, the
//! largest integer and the most items the server sends or accepts, from the constants it
//! writes and checks them with, so that generated clients and validators can rely on
//! them (and the OWASP API rules, which want every value bounded, are met).
//!
//! Values are bounded by what they are (a `uuid`, a `date-time`, a cell, a player's name,
//! a sequence number), named by format or by field, so a field added later under a known
//! name is bounded too. A bound already declared where the value is defined (a request
//! schema checked by its handler) is kept.

use utoipa::openapi::schema::{AdditionalProperties, ArrayItems, Schema, SchemaFormat, Type};
use utoipa::openapi::{KnownFormat, OpenApi, RefOr};

use super::error::{DETAIL_MAX_CHARS, RETRY_AFTER_MAX_SECONDS};
use super::stream::CURSOR_MAX;
use crate::accounts::password;
use crate::app::{EVENTS_PAGE, STREAM_TICKET_SECONDS, ladder, reads};
use crate::auth::TOKEN_MAX_BYTES;
use crate::bot::Level;
use crate::engine::cell::BOARD_SIZE;
use crate::engine::ruleset::{FLEET_SHIPS_MAX, RuleSetId};
use crate::names::NAME_MAX_CHARS;

/// `2026-12-03T16:56:04.123456789+00:00`: seconds, nanoseconds and an offset.
const DATE_TIME_MAX: usize = 35;
const UUID_LENGTH: usize = 36;
/// `J10`.
const CELL_MAX: usize = 3;
const CELL_PATTERN: &str = "^[A-J](10|[1-9])$";
/// A page cursor: 16 digits or hex digits, a dot, a simple uuid.
const CURSOR_LENGTH_MAX: usize = 49;
/// A server-written line of text: a rule set's title, a bot's description, a ship's name,
/// a problem's title (tests/it/contract.rs and the client checks read every one of them
/// against these bounds).
const TEXT_MAX: usize = 200;
/// The longest ship and the largest fleet of any preset.
const SHIP_CELLS_MAX: usize = 5;
const BOARD_CELLS: usize = BOARD_SIZE as usize * BOARD_SIZE as usize;
/// An entity tag: `W/"<seq>-<player, 32 hex>"` for a match view, or a quoted SHA-256 digest
/// (64 hex) for a shared answer (src/http/conditional.rs).
const ETAG_MAX: usize = 66;
/// Seats in a match.
const SEATS: usize = 2;
/// A match's one-line-per-move text: under 80 bytes a line, at most `MATCH_EVENTS_MAX` events.
const EXPORT_TEXT_MAX: usize = 64 * 1024;
/// Whole seconds of a clock setting (`u32`).
const SECONDS_MAX: i64 = u32::MAX as i64;

/// Bounds every value of `doc` that does not have its own.
pub fn bound(doc: &mut OpenApi) {
    if let Some(components) = doc.components.as_mut() {
        for schema in components.schemas.values_mut() {
            walk(schema, None);
        }
    }
    for item in doc.paths.paths.values_mut() {
        for operation in super::contract::operations_mut(item) {
            for parameter in operation.parameters.iter_mut().flatten() {
                if let RefOr::T(parameter) = parameter {
                    let name = parameter.name.clone();
                    if let Some(schema) = parameter.schema.as_mut() {
                        walk(schema, Some(&name));
                    }
                }
            }
            for response in operation.responses.responses.values_mut() {
                let RefOr::T(response) = response else {
                    continue;
                };
                for (name, header) in response.headers.iter_mut() {
                    if let RefOr::T(header) = header
                        && let Some(schema) = header.schema.as_mut()
                    {
                        walk(schema, Some(name));
                    }
                }
                // A whole body is named by its operation (`list_bots`, `readyz`).
                let body = operation.operation_id.as_deref();
                for content in response.content.values_mut() {
                    if let RefOr::T(content) = content
                        && let Some(schema) = content.schema.as_mut()
                    {
                        walk(schema, body);
                    }
                }
            }
        }
    }
}

fn walk(schema: &mut RefOr<Schema>, field: Option<&str>) {
    let RefOr::T(schema) = schema else {
        return;
    };
    walk_schema(schema, field);
}

fn walk_schema(schema: &mut Schema, field: Option<&str>) {
    match schema {
        Schema::Object(object) => {
            bound_value(object, field);
            for (name, property) in object.properties.iter_mut() {
                walk(property, Some(name));
            }
            if let Some(values) = object.additional_properties.as_deref_mut()
                && let AdditionalProperties::RefOr(values) = values
            {
                // A map's values are named by the map: `names` holds players' names.
                let item = field.map(|name| format!("{name}[]"));
                walk(values, item.as_deref());
            }
            if let Some(keys) = object.property_names.as_deref_mut() {
                walk_schema(keys, None);
            }
        }
        Schema::Array(array) => {
            if array.max_items.is_none() {
                array.max_items = field.and_then(items_max);
            }
            if let ArrayItems::RefOrSchema(items) = &mut array.items {
                let item = field.map(|name| format!("{name}[]"));
                walk(items, item.as_deref());
            }
        }
        Schema::OneOf(one_of) => {
            for item in one_of.items.iter_mut() {
                walk(item, field);
            }
        }
        Schema::AllOf(all_of) => {
            for item in all_of.items.iter_mut() {
                walk(item, field);
            }
        }
        Schema::AnyOf(any_of) => {
            for item in any_of.items.iter_mut() {
                walk(item, field);
            }
        }
        _ => {}
    }
}

fn is(object: &utoipa::openapi::schema::Object, kind: Type) -> bool {
    use utoipa::openapi::schema::SchemaType;
    match &object.schema_type {
        SchemaType::Type(one) => *one == kind,
        SchemaType::Array(types) => types.contains(&kind),
        SchemaType::AnyValue => false,
    }
}

fn bound_value(object: &mut utoipa::openapi::schema::Object, field: Option<&str>) {
    if object.enum_values.is_some() {
        return;
    }
    if is(object, Type::String) && object.max_length.is_none() {
        let known = match &object.format {
            Some(SchemaFormat::KnownFormat(KnownFormat::Uuid)) => Some(UUID_LENGTH),
            Some(SchemaFormat::KnownFormat(KnownFormat::DateTime)) => Some(DATE_TIME_MAX),
            _ => None,
        };
        object.max_length = known.or_else(|| field.and_then(|name| string_max(object, name)));
    }
    if is(object, Type::Integer) {
        if object.format.is_none() {
            object.format = Some(SchemaFormat::KnownFormat(KnownFormat::Int64));
        }
        if (object.minimum.is_none() || object.maximum.is_none())
            && let Some((min, max)) = field.and_then(integer_range)
        {
            object.minimum.get_or_insert(min.into());
            object.maximum.get_or_insert(max.into());
        }
    }
}

/// The longest string named `field`, and its pattern where the bound alone says little.
fn string_max(object: &mut utoipa::openapi::schema::Object, field: &str) -> Option<usize> {
    let pattern = |object: &mut utoipa::openapi::schema::Object, pattern: &str| {
        object.pattern.get_or_insert_with(|| pattern.to_owned());
    };
    match field {
        "cell" | "cells[]" | "marked[]" | "hits[]" | "horizontal[]" | "vertical[]" => {
            pattern(object, CELL_PATTERN);
            Some(CELL_MAX)
        }
        // Players' names (a bot is a player); a log-in name longer than any is refused.
        "name" | "names[]" => Some(NAME_MAX_CHARS),
        "password" | "current_password" => Some(password::MAX_CHARS),
        "token" => Some(TOKEN_MAX_BYTES),
        "commitment" => {
            pattern(object, "^[0-9a-f]{64}$");
            Some(64)
        }
        "salt" => {
            pattern(object, "^[0-9a-f]{32}$");
            Some(32)
        }
        "next" | "after" => Some(CURSOR_LENGTH_MAX),
        "type" => {
            pattern(object, "^urn:statki:problem:[a-z_]+$");
            Some(64)
        }
        "detail" => Some(DETAIL_MAX_CHARS),
        "ETag" => Some(ETAG_MAX),
        "title" | "description" => Some(TEXT_MAX),
        // `ok`, `ready`.
        "healthz" | "readyz" => Some(16),
        // The text form: a few header lines, then at most a line per shot and per event.
        "export_match" => Some(EXPORT_TEXT_MAX),
        _ => None,
    }
}

/// The range of the integer named `field`.
fn integer_range(field: &str) -> Option<(i64, i64)> {
    let cursor = (0, CURSOR_MAX);
    Some(match field {
        "seq" | "after" | "Last-Event-ID" => cursor,
        // Milliseconds and counts: never negative, and exact in every JSON client.
        "deadline_ms_left" | "expires_ms_left" | "milliseconds" => cursor,
        "wins" | "losses" | "draws" | "games" | "game" | "waiting" => cursor,
        "rank" => (1, CURSOR_MAX),
        "index" => (0, FLEET_SHIPS_MAX as i64 - 1),
        "length" => (1, SHIP_CELLS_MAX as i64),
        "fleet_cells" => (1, BOARD_CELLS as i64),
        "join_seconds" | "placement_seconds" | "shot_seconds" | "min" | "max" => (0, SECONDS_MAX),
        "Retry-After" => (1, RETRY_AFTER_MAX_SECONDS as i64),
        "expires_in" => (1, STREAM_TICKET_SECONDS),
        _ => return None,
    })
}

/// The most items of the list named `field`.
fn items_max(field: &str) -> Option<usize> {
    Some(match field {
        "cells" | "hits" => SHIP_CELLS_MAX,
        "fleet" | "ships" | "sunk" => FLEET_SHIPS_MAX,
        "shots" | "incoming" | "marked" | "horizontal" | "vertical" => BOARD_CELLS,
        "players" | "fleets" | "record" | "sides" | "changes" | "offers" => SEATS,
        "rulesets" | "ladders" => RuleSetId::ALL.len(),
        "entries" => ladder::PAGE_MAX as usize,
        "matches" => reads::LIST_PAGE_MAX as usize,
        "events" | "match_events" => EVENTS_PAGE as usize,
        "list_bots" => Level::ALL.len(),
        _ => return None,
    })
}

#[cfg(test)]
mod tests {
    #[test]
    fn every_value_of_the_document_is_bounded() {
        let doc = serde_json::to_value(super::super::openapi()).expect("the document serialises");
        let mut unbounded = Vec::new();
        find_unbounded(&doc, "#", &mut unbounded);
        assert!(
            unbounded.is_empty(),
            "values without bounds (name them in src/http/bounds.rs): {unbounded:#?}"
        );
    }

    fn find_unbounded(value: &serde_json::Value, at: &str, found: &mut Vec<String>) {
        match value {
            serde_json::Value::Object(map) => {
                let types: Vec<&str> = match map.get("type") {
                    Some(serde_json::Value::String(one)) => vec![one.as_str()],
                    Some(serde_json::Value::Array(many)) => {
                        many.iter().filter_map(|t| t.as_str()).collect()
                    }
                    _ => Vec::new(),
                };
                let fixed = map.contains_key("enum") || map.contains_key("const");
                if types.contains(&"string") && !fixed && !map.contains_key("maxLength") {
                    found.push(format!("{at}: string without maxLength"));
                }
                if types.contains(&"integer")
                    && !fixed
                    && !(map.contains_key("minimum") && map.contains_key("maximum"))
                {
                    found.push(format!("{at}: integer without minimum and maximum"));
                }
                if types.contains(&"array") && !map.contains_key("maxItems") {
                    found.push(format!("{at}: array without maxItems"));
                }
                for (key, inner) in map {
                    // Examples are values, not schemas.
                    if key != "example" && key != "examples" {
                        find_unbounded(inner, &format!("{at}/{key}"), found);
                    }
                }
            }
            serde_json::Value::Array(items) => {
                for (index, inner) in items.iter().enumerate() {
                    find_unbounded(inner, &format!("{at}/{index}"), found);
                }
            }
            _ => {}
        }
    }
}
