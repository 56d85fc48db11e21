//! `/v1/rulesets`: the presets and the clocks this service runs them with.

use axum::extract::State;
use serde::Serialize;
use utoipa::ToSchema;
use utoipa_axum::{router::OpenApiRouter, routes};

use super::AppState;
use crate::engine::{Clock, RuleSet, RuleSetId};

pub fn router() -> OpenApiRouter<AppState> {
    OpenApiRouter::new().routes(routes!(list_rulesets))
}

#[derive(Serialize, ToSchema)]
pub struct RuleSetInfo {
    #[serde(flatten)]
    pub rules: RuleSet,
    /// Cells the fleet covers: sinking them all wins.
    pub fleet_cells: u32,
    /// The standard clock of ranked matches here.
    pub clock: Clock,
    pub default: bool,
}

/// An inclusive range of seconds.
#[derive(Serialize, ToSchema)]
pub struct SecondsBounds {
    pub min: u32,
    pub max: u32,
}

impl From<(u32, u32)> for SecondsBounds {
    fn from((min, max): (u32, u32)) -> Self {
        SecondsBounds { min, max }
    }
}

#[derive(Serialize, ToSchema)]
pub struct RuleSets {
    pub rulesets: Vec<RuleSetInfo>,
    /// Bounds for an unranked match's own clock, in seconds (inclusive).
    pub placement_seconds_bounds: SecondsBounds,
    pub shot_seconds_bounds: SecondsBounds,
    /// Seconds an unjoined match waits before it is cancelled.
    pub join_seconds: u32,
}

/// The presets: fleets, touching, extra shots, what a sink reveals, clocks.
#[utoipa::path(get, path = "/v1/rulesets", tag = "rulesets", responses(
    (status = 200, description = "The presets and clocks", body = RuleSets, headers(("ETag" = String, description = "A digest of the answer; send it as `If-None-Match`"))),
    (status = 304, description = "Not modified: `If-None-Match` names the current answer", headers(("ETag" = String))),
))]
async fn list_rulesets(
    State(state): State<AppState>,
    headers: axum::http::HeaderMap,
) -> axum::response::Response {
    let settings = state.app.settings();
    let rulesets = RuleSets {
        rulesets: RuleSetId::ALL
            .into_iter()
            .map(|id| RuleSetInfo {
                rules: *id.rules(),
                fleet_cells: id.rules().fleet_cells(),
                clock: settings.standard_clock,
                default: id == RuleSetId::Statki,
            })
            .collect(),
        placement_seconds_bounds: Clock::PLACEMENT_BOUNDS.into(),
        shot_seconds_bounds: Clock::SHOT_BOUNDS.into(),
        join_seconds: settings.join_seconds,
    };
    let body = serde_json::to_vec(&rulesets).unwrap_or_default();
    super::conditional::public(&headers, "application/json", body)
}
