//! `/v1/ladder`: the ranked ladder of each rule set.

use axum::Json;
use axum::extract::State;
use axum::http::StatusCode;
use serde::Deserialize;
use utoipa::IntoParams;
use utoipa_axum::{router::OpenApiRouter, routes};

use super::AppState;
use super::error::{ApiError, Problem};
use super::extract::{ApiPath, ApiQuery};
use crate::app::ladder::{self, LadderPage};
use crate::engine::RuleSetId;

pub fn router() -> OpenApiRouter<AppState> {
    OpenApiRouter::new().routes(routes!(get_ladder))
}

#[derive(Deserialize, IntoParams)]
#[serde(deny_unknown_fields)]
pub struct LadderQuery {
    /// Cursor: the `next` of the previous page.
    pub after: Option<String>,
    /// Entries per page, 1 to 100 (default 50).
    pub limit: Option<i64>,
}

/// A ladder, best first: rank, player, rating, deviation, provisional flag and record.
/// Players appear after their first rated match.
#[utoipa::path(
    get, path = "/v1/ladder/{ruleset}", tag = "ladder",
    params(("ruleset" = String, Path, description = "`statki`, `classic` or `battaglia`"), LadderQuery),
    responses(
        (status = 200, body = LadderPage),
        (status = 400, description = "`invalid_cursor`, `invalid_query`", body = Problem, content_type = "application/problem+json"),
        (status = 404, description = "`unknown_ruleset`", body = Problem, content_type = "application/problem+json"),
    )
)]
async fn get_ladder(
    State(state): State<AppState>,
    ApiPath(ruleset): ApiPath<String>,
    ApiQuery(query): ApiQuery<LadderQuery>,
) -> Result<Json<LadderPage>, ApiError> {
    let id = RuleSetId::parse(&ruleset).ok_or_else(|| {
        ApiError::new(
            StatusCode::NOT_FOUND,
            "unknown_ruleset",
            format!("unknown rule set `{ruleset}`: use statki, classic or battaglia"),
        )
    })?;
    let limit = query.limit.unwrap_or(50);
    if !(1..=ladder::PAGE_MAX).contains(&limit) {
        return Err(ApiError::new(
            StatusCode::BAD_REQUEST,
            "invalid_query",
            format!("limit must be between 1 and {}", ladder::PAGE_MAX),
        ));
    }
    let after = match query.after.as_deref() {
        None => None,
        Some(text) => Some(ladder::parse_cursor(text).ok_or_else(|| {
            ApiError::new(
                StatusCode::BAD_REQUEST,
                "invalid_cursor",
                "`after` must be the `next` cursor of a previous page",
            )
        })?),
    };
    Ok(Json(state.app.ladder_page(id, after, limit).await?))
}
