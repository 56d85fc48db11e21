//! `/v1/ladder`: the ranked ladder of each rule set.

use axum::extract::State;
use axum::http::{HeaderMap, StatusCode};
use axum::response::Response;
use serde::Deserialize;
use utoipa::IntoParams;
use utoipa_axum::{router::OpenApiRouter, routes};

use super::AppState;
use super::error::{ApiError, ErrorCode, Problem};
use super::extract::{ApiPath, ApiQuery};
use crate::app::ladder::{self, LadderPage};
use crate::engine::RuleSetId;

pub fn router() -> OpenApiRouter<AppState> {
    OpenApiRouter::new().routes(routes!(get_ladder))
}

#[derive(Deserialize, IntoParams)]
#[into_params(parameter_in = Query)]
#[serde(deny_unknown_fields)]
pub struct LadderQuery {
    /// Cursor: the `next` of the previous page.
    #[param(
        pattern = r"^([0-6][0-9a-f]{2}|7[0-9a-e][0-9a-f]|7f[0-9a-e]|[89a-e][0-9a-f]{2}|f[0-9a-e][0-9a-f]|ff[0-9a-e])[0-9a-f]{13}\.[0-9a-f]{32}$"
    )]
    pub after: Option<String>,
    /// Entries per page, 1 to 100 (default 50).
    #[param(minimum = 1, maximum = 100)]
    pub limit: Option<i64>,
}

/// A ladder, best first: rank, player, rating, deviation, provisional flag and record.
/// Players appear after their first rated match.
#[utoipa::path(
    get, path = "/v1/ladder/{ruleset}", tag = "ladder",
    params(("ruleset" = RuleSetId, Path, description = "The ladder's rule set"), LadderQuery),
    responses(
        (status = 200, description = "A page of the ladder, best first", body = LadderPage,
            headers(("ETag" = String, description = "A digest of the page; send it as `If-None-Match` to be answered 304 while it is unchanged"))),
        (status = 304, description = "Not modified: `If-None-Match` names the current page's tag",
            headers(("ETag" = String, description = "The page's tag"))),
        (status = 400, description = "`invalid_cursor`, `invalid_query`", body = Problem, content_type = "application/problem+json"),
        (status = 404, description = "`unknown_ruleset`", body = Problem, content_type = "application/problem+json"),
    )
)]
async fn get_ladder(
    State(state): State<AppState>,
    ApiPath(ruleset): ApiPath<String>,
    ApiQuery(query): ApiQuery<LadderQuery>,
    headers: HeaderMap,
) -> Result<Response, ApiError> {
    let id = RuleSetId::parse(&ruleset).ok_or_else(|| {
        ApiError::new(
            StatusCode::NOT_FOUND,
            ErrorCode::UnknownRuleset,
            format!("unknown rule set `{ruleset}`: use statki, classic or battaglia"),
        )
    })?;
    let limit = query.limit.unwrap_or(50);
    if !(1..=ladder::PAGE_MAX).contains(&limit) {
        return Err(ApiError::new(
            StatusCode::BAD_REQUEST,
            ErrorCode::InvalidQuery,
            format!("limit must be between 1 and {}", ladder::PAGE_MAX),
        ));
    }
    let after = match query.after.as_deref() {
        None => None,
        Some(text) => Some(ladder::parse_cursor(text).ok_or_else(|| {
            ApiError::new(
                StatusCode::BAD_REQUEST,
                ErrorCode::InvalidCursor,
                "`after` must be the `next` cursor of a previous page",
            )
        })?),
    };
    let page: LadderPage = state.app.ladder_page(id, after, limit).await?;
    let body = super::conditional::json_bytes(&page)?;
    Ok(super::conditional::revalidated(
        &headers,
        "application/json",
        body,
    ))
}
