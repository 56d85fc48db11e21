//! What openapi.yaml says of how the API is served, beside what each operation declares:
//! the CORS header any answer may carry, the server's audience and environment, and the
//! profile of the bearer tokens.

use utoipa::openapi::extensions::ExtensionsBuilder;
use utoipa::openapi::header::HeaderBuilder;
use utoipa::openapi::schema::{ObjectBuilder, Type};
use utoipa::openapi::security::SecurityScheme;
use utoipa::openapi::{OpenApi, Ref, RefOr};

use crate::config::CORS_ORIGIN_MAX;

/// Every answer may carry `Access-Control-Allow-Origin`, declared once and referenced.
const CORS_HEADER: &str = "Access-Control-Allow-Origin";

/// Applies all of it to `doc`.
pub fn describe(doc: &mut OpenApi) {
    for item in doc.paths.paths.values_mut() {
        for operation in super::contract::operations_mut(item) {
            for response in operation.responses.responses.values_mut() {
                if let RefOr::T(response) = response {
                    response.headers.insert(
                        CORS_HEADER.to_owned(),
                        RefOr::Ref(Ref::new(format!("#/components/headers/{CORS_HEADER}"))),
                    );
                }
            }
        }
    }

    let components = doc.components.get_or_insert_with(Default::default);
    components.headers.insert(
        CORS_HEADER.to_owned(),
        HeaderBuilder::new()
            .schema(Some(
                ObjectBuilder::new()
                    .schema_type(Type::String)
                    .max_length(Some(CORS_ORIGIN_MAX)),
            ))
            .description(Some(
                "The request's `Origin` (or `*`), sent only when it is one the operator allows \
                 with `STATKI_CORS_ORIGINS` (none by default)",
            ))
            .build()
            .into(),
    );
    if let Some(RefOr::T(SecurityScheme::Http(bearer))) =
        components.security_schemes.get_mut("bearer")
    {
        bearer.description = Some(
            "A JWT the server issues (`POST /v1/players`, `POST /v1/sessions`), handled as \
             RFC8725 advises: the algorithm is pinned (HS256, never `none`), the key has at \
             least 32 bytes, and issuer, audience and expiry are checked on every request."
                .to_owned(),
        );
    }
    for server in doc.servers.iter_mut().flatten() {
        // One document for every deployment: it is served by the server it describes.
        server.description = Some(
            "The server this document is served from, in every environment (local, staging, \
             production)"
                .to_owned(),
        );
        server.extensions = Some(ExtensionsBuilder::new().add("x-internal", false).build());
    }
}
