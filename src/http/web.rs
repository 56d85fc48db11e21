//! The bundled browser client: `GET /` and its assets, embedded in the binary at build
//! time (no build step, no network at run time). Kept out of the OpenAPI document, which
//! describes the API the client uses, not the client itself.

use axum::Router;
use axum::extract::Path;
use axum::http::{HeaderMap, HeaderValue, StatusCode, header};
use axum::response::{IntoResponse, Response};
use axum::routing::get;
use sha2::{Digest, Sha256};

use super::error::ApiError;

/// Only the page's own origin may supply scripts, styles, images and connections; the
/// page may not be framed, and no inline script or style runs.
const CONTENT_SECURITY_POLICY: &str = "default-src 'none'; script-src 'self'; style-src 'self'; \
     img-src 'self' data:; connect-src 'self'; font-src 'self'; manifest-src 'self'; \
     base-uri 'none'; form-action 'self'; frame-ancestors 'none'";

/// One embedded file.
struct Asset {
    path: &'static str,
    content_type: &'static str,
    body: &'static [u8],
}

macro_rules! asset {
    ($path:literal, $type:expr) => {
        Asset {
            path: $path,
            content_type: $type,
            body: include_bytes!(concat!("../../web/", $path)),
        }
    };
}

const JS: &str = "text/javascript; charset=utf-8";

static ASSETS: &[Asset] = &[
    asset!("index.html", "text/html; charset=utf-8"),
    asset!("style.css", "text/css; charset=utf-8"),
    asset!("icon.svg", "image/svg+xml"),
    asset!("icon-192.png", "image/png"),
    asset!("icon-512.png", "image/png"),
    asset!("icon-maskable-512.png", "image/png"),
    asset!("manifest.webmanifest", "application/manifest+json"),
    asset!("sw.js", JS),
    asset!("js/main.js", JS),
    asset!("js/api.js", JS),
    asset!("js/sse.js", JS),
    asset!("js/i18n.js", JS),
    asset!("js/dom.js", JS),
    asset!("js/board.js", JS),
    asset!("js/cells.js", JS),
    asset!("js/commit.js", JS),
    asset!("js/names.js", JS),
    asset!("js/alerts.js", JS),
    asset!("js/ships.js", JS),
    asset!("js/botgames.js", JS),
    asset!("js/views/auth.js", JS),
    asset!("js/views/lobby.js", JS),
    asset!("js/views/match.js", JS),
    asset!("js/views/replay.js", JS),
    asset!("js/views/ladder.js", JS),
    asset!("js/views/profile.js", JS),
];

pub fn router<S: Clone + Send + Sync + 'static>() -> Router<S> {
    Router::new()
        .route("/", get(index))
        // The service worker at the root, so its scope is the whole site.
        .route("/sw.js", get(service_worker))
        .route("/app/{*path}", get(asset))
}

async fn index(headers: HeaderMap) -> Response {
    serve("index.html", &headers)
}

async fn service_worker(headers: HeaderMap) -> Response {
    serve("sw.js", &headers)
}

async fn asset(Path(path): Path<String>, headers: HeaderMap) -> Response {
    serve(&path, &headers)
}

/// A strong validator: the first 16 bytes of the body's SHA-256.
fn etag(body: &[u8]) -> String {
    format!("\"{}\"", hex::encode(&Sha256::digest(body)[..16]))
}

fn serve(path: &str, headers: &HeaderMap) -> Response {
    let Some(asset) = ASSETS.iter().find(|asset| asset.path == path) else {
        return ApiError::not_found("no such file in the web client").into_response();
    };
    let tag = etag(asset.body);
    // Revalidated on every load (cheap with the ETag), so a new binary is picked up at once.
    let fresh = headers
        .get(header::IF_NONE_MATCH)
        .and_then(|value| value.to_str().ok())
        .is_some_and(|value| value.split(',').any(|candidate| candidate.trim() == tag));
    let mut response = if fresh {
        StatusCode::NOT_MODIFIED.into_response()
    } else {
        asset.body.into_response()
    };
    let set = response.headers_mut();
    set.insert(
        header::CONTENT_TYPE,
        HeaderValue::from_static(asset.content_type),
    );
    set.insert(header::CACHE_CONTROL, HeaderValue::from_static("no-cache"));
    if let Ok(value) = HeaderValue::from_str(&tag) {
        set.insert(header::ETAG, value);
    }
    set.insert(
        header::CONTENT_SECURITY_POLICY,
        HeaderValue::from_static(CONTENT_SECURITY_POLICY),
    );
    set.insert(
        header::X_CONTENT_TYPE_OPTIONS,
        HeaderValue::from_static("nosniff"),
    );
    set.insert(
        header::REFERRER_POLICY,
        HeaderValue::from_static("no-referrer"),
    );
    set.insert(header::X_FRAME_OPTIONS, HeaderValue::from_static("DENY"));
    if fresh {
        set.remove(header::CONTENT_LENGTH);
    }
    response
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_asset_is_found_by_its_path_and_typed() {
        for asset in ASSETS {
            let response = serve(asset.path, &HeaderMap::new());
            assert_eq!(response.status(), StatusCode::OK, "{}", asset.path);
            assert_eq!(
                response.headers()[header::CONTENT_TYPE],
                asset.content_type,
                "{}",
                asset.path
            );
        }
    }

    #[test]
    fn a_matching_etag_answers_not_modified() {
        let first = serve("index.html", &HeaderMap::new());
        let tag = first.headers()[header::ETAG].clone();
        let mut headers = HeaderMap::new();
        headers.insert(header::IF_NONE_MATCH, tag);
        assert_eq!(
            serve("index.html", &headers).status(),
            StatusCode::NOT_MODIFIED
        );
    }

    #[test]
    fn every_file_of_the_client_is_embedded() {
        fn walk(dir: &std::path::Path, root: &std::path::Path, found: &mut Vec<String>) {
            for entry in std::fs::read_dir(dir).expect("web/ is readable") {
                let path = entry.expect("a directory entry").path();
                if path.is_dir() {
                    walk(&path, root, found);
                } else {
                    let relative = path.strip_prefix(root).expect("under web/");
                    found.push(relative.to_string_lossy().replace('\\', "/"));
                }
            }
        }
        let root = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("web");
        let mut found = Vec::new();
        walk(&root, &root, &mut found);
        for file in found {
            assert!(
                ASSETS.iter().any(|asset| asset.path == file),
                "web/{file} is not served; add it to ASSETS"
            );
        }
    }

    #[test]
    fn the_policy_allows_only_this_origin_and_no_inline_code() {
        let response = serve("index.html", &HeaderMap::new());
        let policy = response.headers()[header::CONTENT_SECURITY_POLICY]
            .to_str()
            .expect("ascii");
        assert!(policy.starts_with("default-src 'none'"));
        assert!(policy.contains("script-src 'self';"));
        assert!(policy.contains("frame-ancestors 'none'"));
        assert!(!policy.contains("unsafe"));
        assert!(!policy.contains("http"));
    }

    #[test]
    fn an_unknown_path_is_not_found() {
        let response = serve("../Cargo.toml", &HeaderMap::new());
        assert_eq!(response.status(), StatusCode::NOT_FOUND);
    }
}
