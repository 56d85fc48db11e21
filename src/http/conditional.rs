//! Conditional reads: the `ETag` of an answer and `If-None-Match` → `304 Not Modified`.
//! A match view's tag is its sequence number (and the viewer: views differ by caller);
//! the answers that are the same for everyone are tagged by a digest of their bytes.

use axum::http::{HeaderMap, HeaderValue, StatusCode, header};
use axum::response::{IntoResponse, Response};
use sha2::{Digest, Sha256};
use uuid::Uuid;

use super::error::{ApiError, ErrorCode};

/// `Cache-Control` of a caller's own view: a client may keep it, but must ask again (with
/// `If-None-Match`) before using it; shared caches must not keep it at all.
const CACHE_PRIVATE: &str = "private, no-cache";

/// `Cache-Control` of a public answer that changes with play: kept anywhere, but checked
/// again before every use.
const CACHE_REVALIDATE: &str = "public, no-cache";

/// The tag of `viewer`'s view of a match at `seq` with its players' `presence` (one mark
/// per seated player, in the order of their ids: `o` online, `a` away). Weak: the view's clock reading
/// (`deadline_ms_left`) moves on while the view stays the same.
pub fn view_tag(
    seq: i64,
    viewer: Uuid,
    presence: &std::collections::BTreeMap<Uuid, crate::app::Presence>,
) -> String {
    let marks: String = presence
        .values()
        .map(|presence| match presence {
            crate::app::Presence::Online => 'o',
            crate::app::Presence::Away => 'a',
        })
        .collect();
    format!("W/\"{seq}-{}-{marks}\"", viewer.simple())
}

/// A strong tag of exactly these bytes.
fn digest_tag(body: &[u8]) -> String {
    let digest = Sha256::digest(body);
    let hex: String = digest[..12]
        .iter()
        .map(|byte| format!("{byte:02x}"))
        .collect();
    format!("\"{hex}\"")
}

/// Whether `If-None-Match` names `tag` (or is `*`). `If-None-Match` compares weakly: `W/`
/// is ignored on both sides (RFC 9110, section 13.1.2).
pub fn matches(headers: &HeaderMap, tag: &str) -> bool {
    let opaque = |tag: &str| tag.trim().trim_start_matches("W/").to_owned();
    let wanted = opaque(tag);
    headers
        .get_all(header::IF_NONE_MATCH)
        .iter()
        .filter_map(|value| value.to_str().ok())
        .flat_map(|value| value.split(','))
        .any(|candidate| candidate.trim() == "*" || opaque(candidate) == wanted)
}

/// `answer` tagged `tag`, or `304` with no body when the client already holds it.
fn tagged(
    headers: &HeaderMap,
    tag: &str,
    cache_control: &'static str,
    answer: Response,
) -> Response {
    let mut response = if matches(headers, tag) {
        StatusCode::NOT_MODIFIED.into_response()
    } else {
        answer
    };
    let response_headers = response.headers_mut();
    if let Ok(value) = HeaderValue::from_str(tag) {
        response_headers.insert(header::ETAG, value);
    }
    response_headers.insert(
        header::CACHE_CONTROL,
        HeaderValue::from_static(cache_control),
    );
    response
}

/// A caller's own view, tagged by its sequence number; it differs by token, so `Vary`.
pub fn view(headers: &HeaderMap, tag: &str, answer: Response) -> Response {
    varying(tagged(headers, tag, CACHE_PRIVATE, answer), "authorization")
}

/// `response` marked as depending on the request headers `vary` names.
fn varying(mut response: Response, vary: &'static str) -> Response {
    response
        .headers_mut()
        .insert(header::VARY, HeaderValue::from_static(vary));
    response
}

/// `body` as an answer tagged by a digest of its bytes, or `304` when the client holds it.
fn digest_tagged(
    headers: &HeaderMap,
    content_type: &'static str,
    body: Vec<u8>,
    cache_control: &'static str,
) -> Response {
    let tag = digest_tag(&body);
    let answer = ([(header::CONTENT_TYPE, content_type)], body).into_response();
    tagged(headers, &tag, cache_control, answer)
}

/// An answer that is the same for everyone (`Cache-Control` public for a while), tagged by
/// its bytes.
pub fn public(headers: &HeaderMap, content_type: &'static str, body: Vec<u8>) -> Response {
    digest_tagged(headers, content_type, body, super::CACHE_PUBLIC.1)
}

/// `value` as the bytes of a JSON answer; a value that does not serialise is our fault.
pub fn json_bytes<T: serde::Serialize>(value: &T) -> Result<Vec<u8>, ApiError> {
    serde_json::to_vec(value).map_err(|error| {
        ApiError::new(
            StatusCode::INTERNAL_SERVER_ERROR,
            ErrorCode::Internal,
            error.to_string(),
        )
    })
}

/// An answer that changes as play goes on (a profile): any cache may keep it, but must ask
/// again (with `If-None-Match`) before each use. Tagged by its bytes.
pub fn revalidated(headers: &HeaderMap, content_type: &'static str, body: Vec<u8>) -> Response {
    digest_tagged(headers, content_type, body, CACHE_REVALIDATE)
}

/// An answer read with the caller's token (an event page, an export), tagged by its bytes;
/// only the caller's own cache may keep it. `vary` names the request headers it depends
/// on besides the token.
pub fn private(
    headers: &HeaderMap,
    content_type: &'static str,
    body: Vec<u8>,
    vary: &'static str,
) -> Response {
    varying(
        digest_tagged(headers, content_type, body, CACHE_PRIVATE),
        vary,
    )
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::app::Presence;

    fn asking(value: &'static str) -> HeaderMap {
        let mut headers = HeaderMap::new();
        headers.insert(header::IF_NONE_MATCH, HeaderValue::from_static(value));
        headers
    }

    #[test]
    fn a_view_tag_changes_when_a_player_comes_or_goes() {
        let (ala, bolek) = (Uuid::from_u128(1), Uuid::from_u128(2));
        let online = [(ala, Presence::Online), (bolek, Presence::Online)].into();
        let away = [(ala, Presence::Online), (bolek, Presence::Away)].into();
        assert_ne!(view_tag(7, ala, &online), view_tag(7, ala, &away));
        assert_eq!(view_tag(7, ala, &away), view_tag(7, ala, &away));
    }

    #[test]
    fn if_none_match_compares_weakly_and_takes_lists_and_any() {
        let tag = view_tag(12, Uuid::nil(), &Default::default());
        let strong = tag.trim_start_matches("W/").to_owned();
        assert!(matches(
            &asking("\"a\", W/\"12-00000000000000000000000000000000-\""),
            &tag
        ));
        assert!(matches(&asking("*"), &tag));
        let mut headers = HeaderMap::new();
        headers.insert(
            header::IF_NONE_MATCH,
            HeaderValue::from_str(&strong).unwrap(),
        );
        assert!(matches(&headers, &tag));
        assert!(!matches(
            &asking("W/\"11-00000000000000000000000000000000\""),
            &tag
        ));
        assert!(!matches(&HeaderMap::new(), &tag));
    }

    #[test]
    fn digests_tell_bodies_apart() {
        assert_eq!(digest_tag(b"one"), digest_tag(b"one"));
        assert_ne!(digest_tag(b"one"), digest_tag(b"two"));
    }
}
