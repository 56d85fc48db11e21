//! Rate limits: per client address and per player, with `governor`'s keyed GCRA limiters.
//!
//! Every request but the probes (`/healthz`, `/readyz`, `/metrics`) counts against its
//! client address; registration and log-in also against their own tight per-address
//! limits; every request with a valid bearer token also against its player. A request over
//! a limit is answered `429 rate_limited` with `Retry-After` and the draft IETF
//! `RateLimit-Policy` / `RateLimit` headers, and changes nothing. Every other limited
//! answer carries the same two headers for the limit with the least room left, so a client
//! can slow down before it is refused.
//!
//! The client address is the TCP peer's, unless a trusted proxy header is configured and
//! the peer is one of the configured proxy addresses (by default loopback only): then it
//! is the last address that header carries (the one the balancer itself added), so a
//! client cannot choose its own bucket by sending the header, even to a replica it reaches
//! directly. IPv6 addresses are keyed by their /64, the block one subscriber is given;
//! registration and log-in also charge the /48 around it (a site's block) with
//! [`NETWORK_FACTOR`] times their budget, so rotating through a /48's 65,536 /64s gains at
//! most that factor.
//!
//! A token is charged to its player only once the revocation cache has admitted it: a
//! revoked token, or one of a deleted player, counts against its address alone, so it
//! cannot be used to exhaust its player's budget.
//!
//! These limits are per replica (see docs/security.md); the per-account log-in back-off
//! (`accounts::attempts`) is kept in the database and holds across replicas.

use std::net::{IpAddr, SocketAddr};
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

use axum::extract::{ConnectInfo, Request, State};
use axum::http::{HeaderMap, HeaderName, HeaderValue, Method, StatusCode, header};
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};
use governor::RateLimiter;
use governor::clock::{Clock, DefaultClock};
use governor::middleware::{StateInformationMiddleware, StateSnapshot};
use governor::state::keyed::DefaultKeyedStateStore;
use ipnet::IpNet;
use uuid::Uuid;

use super::AppState;
use super::budget::ByteBudget;
use super::error::{ApiError, ErrorCode};
pub use super::rate::Rate;

/// The limits an operator sets (see docs/security.md for the defaults' reasoning).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct RateLimitSettings {
    /// `POST /v1/players`, per client address.
    pub register: Rate,
    /// `POST /v1/sessions`, per client address.
    pub login: Rate,
    /// Every request with a valid token, per player.
    pub player: Rate,
    /// Every request, per client address.
    pub address: Rate,
    /// A header set by a trusted balancer that carries the client address
    /// (`x-forwarded-for`, `x-real-ip`, …). Unset: the TCP peer address.
    pub trusted_proxy_header: Option<HeaderName>,
    /// The peers whose `trusted_proxy_header` is believed; empty: loopback only.
    pub trusted_proxies: Vec<IpNet>,
    /// Bytes of exports per caller (`per_period` bytes a second, `burst` at once).
    pub export_caller: Rate,
    /// Bytes of exports per exported match or player.
    pub export_target: Rate,
}

/// Parses a proxy address or network (`10.0.0.5`, `10.0.0.0/8`, `::1`).
pub fn parse_proxy(text: &str) -> Result<IpNet, String> {
    let text = text.trim();
    text.parse::<IpNet>()
        .or_else(|_| text.parse::<IpAddr>().map(IpNet::from))
        .map_err(|_| format!("`{text}` is neither an IP address nor a network"))
}

/// The key a client address is limited by: IPv6 addresses by their /64.
pub fn address_key(address: IpAddr) -> IpAddr {
    match address {
        IpAddr::V4(_) => address,
        IpAddr::V6(v6) => match v6.to_ipv4_mapped() {
            Some(v4) => IpAddr::V4(v4),
            None => IpAddr::V6(std::net::Ipv6Addr::from(
                v6.to_bits() & !((1u128 << 64) - 1),
            )),
        },
    }
}

impl Default for RateLimitSettings {
    fn default() -> Self {
        Self {
            register: Rate::per_minute(10, 5),
            login: Rate::per_minute(10, 10),
            player: Rate::per_second(50, 100),
            address: Rate::per_second(500, 1000),
            trusted_proxy_header: None,
            trusted_proxies: Vec::new(),
            export_caller: Rate::per_second(EXPORT_CALLER_BYTES, EXPORT_CALLER_BYTES * 4),
            export_target: Rate::per_second(EXPORT_TARGET_BYTES, EXPORT_TARGET_BYTES * 4),
        }
    }
}

/// Export bytes one caller may take a second by default (2 MiB; four seconds' worth at once).
pub const EXPORT_CALLER_BYTES: u32 = 2 * 1024 * 1024;
/// Export bytes of one match or player anyone may take a second by default (4 MiB).
pub const EXPORT_TARGET_BYTES: u32 = 4 * 1024 * 1024;

/// A keyed limiter that reports, on every allowed request, how much room is left.
type Keyed<K> = RateLimiter<K, DefaultKeyedStateStore<K>, DefaultClock, StateInformationMiddleware>;

fn keyed<K: std::hash::Hash + Eq + Clone>(rate: Rate) -> Keyed<K> {
    RateLimiter::keyed(rate.quota()).with_middleware::<StateInformationMiddleware>()
}

struct Limiter {
    name: &'static str,
    rate: Rate,
}

impl Limiter {
    /// `RateLimit-Policy`: the limit's name, its quota (the burst) and the window in
    /// seconds over which a spent burst comes back.
    fn policy(&self) -> String {
        format!(
            "\"{}\";q={};w={}",
            self.name,
            self.rate.burst,
            self.refill_seconds(self.rate.burst)
        )
    }

    /// Whole seconds until `spent` requests of the burst are back.
    fn refill_seconds(&self, spent: u32) -> u64 {
        (self.rate.period.as_secs_f64() * f64::from(spent) / f64::from(self.rate.per_period.max(1)))
            .ceil() as u64
    }

    /// `RateLimit`: the requests left (`r`) and the seconds until the burst is whole again
    /// (`t`).
    fn standing(&self, remaining: u32) -> String {
        let spent = self.rate.burst.saturating_sub(remaining);
        format!(
            "\"{}\";r={remaining};t={}",
            self.name,
            self.refill_seconds(spent)
        )
    }
}

/// The limit that has the least room left after this request, of those it was charged to.
struct Tightest(Option<(Limiter, u32)>);

impl Tightest {
    fn offer(&mut self, limiter: Limiter, snapshot: &StateSnapshot) {
        let remaining = snapshot.remaining_burst_capacity();
        let share = |(limiter, left): &(Limiter, u32)| {
            f64::from(*left) / f64::from(limiter.rate.burst.max(1))
        };
        let candidate = (limiter, remaining);
        if self
            .0
            .as_ref()
            .is_none_or(|held| share(&candidate) < share(held))
        {
            self.0 = Some(candidate);
        }
    }

    fn write(self, headers: &mut HeaderMap) {
        let Some((limiter, remaining)) = self.0 else {
            return;
        };
        if let Ok(value) = HeaderValue::from_str(&limiter.policy()) {
            headers.insert(HeaderName::from_static("ratelimit-policy"), value);
        }
        if let Ok(value) = HeaderValue::from_str(&limiter.standing(remaining)) {
            headers.insert(HeaderName::from_static("ratelimit"), value);
        }
    }
}

/// How many /64s' worth of registration and log-in budget one IPv6 /48 has together.
pub const NETWORK_FACTOR: u32 = 8;

/// The /48 an IPv6 client address lies in; none for IPv4 (keyed by the address alone).
fn network_key(address: IpAddr) -> Option<IpAddr> {
    match address {
        IpAddr::V4(_) => None,
        IpAddr::V6(v6) => Some(IpAddr::V6(std::net::Ipv6Addr::from(
            v6.to_bits() & !((1u128 << 80) - 1),
        ))),
    }
}

/// The live limiters of one replica.
pub struct RateLimits {
    settings: RateLimitSettings,
    register: Keyed<IpAddr>,
    login: Keyed<IpAddr>,
    /// Registration and log-in per IPv6 /48 ([`NETWORK_FACTOR`] times the budget).
    register_network: Keyed<IpAddr>,
    login_network: Keyed<IpAddr>,
    player: Keyed<Uuid>,
    address: Keyed<IpAddr>,
    /// Export bytes per caller and per exported match or player.
    pub(super) export_caller: ByteBudget,
    pub(super) export_target: ByteBudget,
    checks: AtomicU64,
}

impl std::fmt::Debug for RateLimits {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("RateLimits")
            .field("settings", &self.settings)
            .finish_non_exhaustive()
    }
}

/// Keys not seen for a while are dropped every this many checks, so the memory the
/// limiters hold stays proportional to the recently active clients.
const HOUSEKEEPING_EVERY: u64 = 4096;

impl RateLimits {
    pub fn new(settings: RateLimitSettings) -> Arc<Self> {
        Arc::new(Self {
            register: keyed(settings.register),
            login: keyed(settings.login),
            register_network: keyed(settings.register.times(NETWORK_FACTOR)),
            login_network: keyed(settings.login.times(NETWORK_FACTOR)),
            player: keyed(settings.player),
            address: keyed(settings.address),
            export_caller: ByteBudget::new(settings.export_caller),
            export_target: ByteBudget::new(settings.export_target),
            settings,
            checks: AtomicU64::new(0),
        })
    }

    /// Whether `peer` is a proxy whose header is believed.
    fn trusted_peer(&self, peer: IpAddr) -> bool {
        let peer = peer.to_canonical();
        if self.settings.trusted_proxies.is_empty() {
            return peer.is_loopback();
        }
        self.settings
            .trusted_proxies
            .iter()
            .any(|net| net.contains(&peer))
    }

    /// The key of a request's client address: the trusted header's last entry when the
    /// peer is a trusted proxy, else the peer; IPv6 by its /64.
    pub fn client_address(&self, headers: &HeaderMap, peer: Option<IpAddr>) -> Option<IpAddr> {
        let from_header = self
            .settings
            .trusted_proxy_header
            .as_ref()
            .filter(|_| peer.is_some_and(|peer| self.trusted_peer(peer)))
            .and_then(|name| headers.get_all(name).iter().next_back())
            .and_then(|value| value.to_str().ok())
            .and_then(|value| value.rsplit(',').next())
            .and_then(|last| last.trim().parse::<IpAddr>().ok());
        from_header.or(peer).map(address_key)
    }

    fn housekeeping(&self) {
        if self
            .checks
            .fetch_add(1, Ordering::Relaxed)
            .is_multiple_of(HOUSEKEEPING_EVERY)
        {
            for limiter in [
                &self.register,
                &self.login,
                &self.register_network,
                &self.login_network,
                &self.address,
            ] {
                limiter.retain_recent();
                limiter.shrink_to_fit();
            }
            self.player.retain_recent();
            self.player.shrink_to_fit();
        }
    }
}

/// Charges `key` to `limiter`: the room left when allowed, else how long the caller must
/// wait.
fn check<K: std::hash::Hash + Eq + Clone>(
    limiter: &Keyed<K>,
    key: &K,
) -> Result<StateSnapshot, Duration> {
    limiter
        .check_key(key)
        .map_err(|not_until| not_until.wait_time_from(DefaultClock::default().now()))
}

/// The answer to an export whose caller's or target's byte budget is in debt: `429`
/// naming the budget (`export` or `export_target`), with `Retry-After`.
pub(super) fn export_refused(limits: &RateLimits, target: bool, wait: Duration) -> Response {
    let (name, rate) = if target {
        ("export_target", limits.export_target.rate())
    } else {
        ("export", limits.export_caller.rate())
    };
    refused(Limiter { name, rate }, wait, false)
}

impl RateLimits {
    /// How long an export by `caller` of `target` must wait for both byte budgets, and
    /// whether the target's is the one in debt; `None` when it may go ahead.
    pub(super) fn export_wait(&self, caller: Uuid, target: Uuid) -> Option<(Duration, bool)> {
        match (
            self.export_caller.wait(caller),
            self.export_target.wait(target),
        ) {
            (None, None) => None,
            (Some(mine), Some(theirs)) if theirs > mine => Some((theirs, true)),
            (Some(mine), _) => Some((mine, false)),
            (None, Some(theirs)) => Some((theirs, true)),
        }
    }

    /// Charges `bytes` of an export to its caller and its target.
    pub(super) fn export_spent(&self, caller: Uuid, target: Uuid, bytes: usize) {
        self.export_caller.spend(caller, bytes);
        self.export_target.spend(target, bytes);
    }
}

fn refused(limiter: Limiter, wait: Duration, close: bool) -> Response {
    metrics::counter!("statki_rate_limited_total", "limit" => limiter.name).increment(1);
    let seconds = wait.as_secs() + u64::from(wait.subsec_nanos() > 0);
    let seconds = seconds.clamp(1, super::error::RETRY_AFTER_MAX_SECONDS);
    let mut response = ApiError::new(
        StatusCode::TOO_MANY_REQUESTS,
        ErrorCode::RateLimited,
        format!(
            "too many requests ({} limit); retry in {seconds} s",
            limiter.name
        ),
    )
    .into_response();
    let headers = response.headers_mut();
    headers.insert(header::RETRY_AFTER, HeaderValue::from(seconds));
    if let Ok(value) = HeaderValue::from_str(&limiter.policy()) {
        headers.insert(HeaderName::from_static("ratelimit-policy"), value);
    }
    if let Ok(value) = HeaderValue::from_str(&format!("\"{}\";r=0;t={seconds}", limiter.name)) {
        headers.insert(HeaderName::from_static("ratelimit"), value);
    }
    if close {
        // The body was never read, so the connection cannot carry another request: say so.
        headers.insert(header::CONNECTION, HeaderValue::from_static("close"));
    }
    response
}

/// Probes are never limited: a balancer polling them must not lock clients out.
pub(crate) fn exempt(path: &str) -> bool {
    matches!(path, "/healthz" | "/readyz" | "/metrics")
}

/// The player a request's bearer token names, if it is valid, unrevoked and theirs (the
/// revocation cache answers without the database for players it knows).
async fn bearer_player(state: &AppState, headers: &HeaderMap) -> Option<Uuid> {
    let value = headers.get(header::AUTHORIZATION)?.to_str().ok()?;
    let (scheme, token) = value.split_once(' ')?;
    if !scheme.eq_ignore_ascii_case("bearer") {
        return None;
    }
    let verified = state.app.tokens().verify_claims(token.trim()).ok()?;
    state.live.revocations().admit(verified).await.ok()?;
    Some(verified.player)
}

/// Whether the request carries a body hyper would have to read before the next request.
fn has_body(request: &Request) -> bool {
    let headers = request.headers();
    headers.contains_key(header::TRANSFER_ENCODING)
        || headers
            .get(header::CONTENT_LENGTH)
            .and_then(|value| value.to_str().ok())
            .is_some_and(|length| length.trim() != "0")
}

/// Whether a registration carries an `Idempotency-Key` whose registration was answered
/// already: a retry, which registers no one and so is not charged to the registration limit
/// (the address limit still counts it). One indexed read, only for keyed registrations.
async fn registration_retry(state: &AppState, headers: &HeaderMap) -> bool {
    let Some(key) = headers
        .get("idempotency-key")
        .and_then(|value| value.to_str().ok())
        .filter(|key| super::extract::is_idempotency_key(key))
    else {
        return false;
    };
    match state.app.registration_answered(key).await {
        Ok(answered) => answered,
        Err(error) => {
            tracing::warn!(%error, "looking up a registration key failed; charged as new");
            false
        }
    }
}

/// The middleware: checks the address, the route's own limit and the player.
pub async fn enforce(State(state): State<AppState>, request: Request, next: Next) -> Response {
    if exempt(request.uri().path()) {
        // Not limited, so not kept: the connection closes after the answer, and a client
        // cannot hold connections open for free with probes.
        let mut response = next.run(request).await;
        response
            .headers_mut()
            .insert(header::CONNECTION, HeaderValue::from_static("close"));
        return response;
    }
    let Some(limits) = state.limits.as_deref() else {
        return next.run(request).await;
    };
    let path = request.uri().path();
    let close = has_body(&request) && request.version() <= axum::http::Version::HTTP_11;
    limits.housekeeping();
    let settings = &limits.settings;
    let peer = request
        .extensions()
        .get::<ConnectInfo<SocketAddr>>()
        .map(|info| info.0.ip());
    let address = limits.client_address(request.headers(), peer);
    let mut tightest = Tightest(None);
    if let Some(address) = address {
        let route_limit = match (request.method(), path) {
            (&Method::POST, "/v1/players")
                if !registration_retry(&state, request.headers()).await =>
            {
                Some((
                    &limits.register,
                    Limiter {
                        name: "register",
                        rate: settings.register,
                    },
                    &limits.register_network,
                    Limiter {
                        name: "register_network",
                        rate: settings.register.times(NETWORK_FACTOR),
                    },
                ))
            }
            (&Method::POST, "/v1/sessions") => Some((
                &limits.login,
                Limiter {
                    name: "login",
                    rate: settings.login,
                },
                &limits.login_network,
                Limiter {
                    name: "login_network",
                    rate: settings.login.times(NETWORK_FACTOR),
                },
            )),
            _ => None,
        };
        let address_limit = Limiter {
            name: "address",
            rate: settings.address,
        };
        match check(&limits.address, &address) {
            Ok(room) => tightest.offer(address_limit, &room),
            Err(wait) => return refused(address_limit, wait, close),
        }
        if let Some((limiter, which, network_limiter, network)) = route_limit {
            match check(limiter, &address) {
                Ok(room) => tightest.offer(which, &room),
                Err(wait) => return refused(which, wait, close),
            }
            if let Some(block) = network_key(address) {
                match check(network_limiter, &block) {
                    Ok(room) => tightest.offer(network, &room),
                    Err(wait) => return refused(network, wait, close),
                }
            }
        }
    }
    if let Some(player) = bearer_player(&state, request.headers()).await {
        let which = Limiter {
            name: "player",
            rate: settings.player,
        };
        match check(&limits.player, &player) {
            Ok(room) => tightest.offer(which, &room),
            Err(wait) => return refused(which, wait, close),
        }
    }
    let mut response = next.run(request).await;
    // An answer refused by a limit of its own (an export's byte budget) names that one.
    if !response.headers().contains_key("ratelimit-policy") {
        tightest.write(response.headers_mut());
    }
    response
}

#[cfg(test)]
mod tests {
    use super::*;

    fn limits(header: Option<&'static str>) -> Arc<RateLimits> {
        RateLimits::new(RateLimitSettings {
            trusted_proxy_header: header.map(HeaderName::from_static),
            ..RateLimitSettings::default()
        })
    }

    #[test]
    fn without_a_trusted_header_the_peer_is_the_client() {
        let mut headers = HeaderMap::new();
        headers.insert("x-forwarded-for", HeaderValue::from_static("203.0.113.9"));
        let peer: IpAddr = "198.51.100.1".parse().expect("ip");
        assert_eq!(
            limits(None).client_address(&headers, Some(peer)),
            Some(peer)
        );
    }

    #[test]
    fn a_trusted_header_gives_its_last_entry() {
        let mut headers = HeaderMap::new();
        headers.insert(
            "x-forwarded-for",
            HeaderValue::from_static("10.9.9.9, 203.0.113.9"),
        );
        let peer: IpAddr = "127.0.0.1".parse().expect("ip");
        assert_eq!(
            limits(Some("x-forwarded-for")).client_address(&headers, Some(peer)),
            Some("203.0.113.9".parse().expect("ip"))
        );
    }

    #[test]
    fn the_header_is_believed_only_from_a_trusted_proxy() {
        let mut headers = HeaderMap::new();
        headers.insert("x-forwarded-for", HeaderValue::from_static("203.0.113.9"));
        let limits = RateLimits::new(RateLimitSettings {
            trusted_proxy_header: Some(HeaderName::from_static("x-forwarded-for")),
            trusted_proxies: vec![parse_proxy("10.1.0.0/16").expect("net")],
            ..RateLimitSettings::default()
        });
        let proxy: IpAddr = "10.1.2.3".parse().expect("ip");
        let direct: IpAddr = "198.51.100.7".parse().expect("ip");
        assert_eq!(
            limits.client_address(&headers, Some(proxy)),
            Some("203.0.113.9".parse().expect("ip"))
        );
        assert_eq!(limits.client_address(&headers, Some(direct)), Some(direct));
    }

    #[test]
    fn ipv6_addresses_share_their_64() {
        let a: IpAddr = "2001:db8:1:2:aaaa::1".parse().expect("ip");
        let b: IpAddr = "2001:db8:1:2:ffff::9".parse().expect("ip");
        let c: IpAddr = "2001:db8:1:3::1".parse().expect("ip");
        assert_eq!(address_key(a), address_key(b));
        assert_ne!(address_key(a), address_key(c));
        let v4: IpAddr = "192.0.2.1".parse().expect("ip");
        assert_eq!(address_key(v4), v4);
    }

    #[test]
    fn the_burst_is_allowed_then_refused() {
        let limiter: Keyed<u8> = keyed(Rate::per_minute(10, 3));
        for left in (0..3).rev() {
            let room = limiter.check_key(&1).expect("within the burst");
            assert_eq!(room.remaining_burst_capacity(), left);
        }
        assert!(limiter.check_key(&1).is_err());
        assert!(limiter.check_key(&2).is_ok(), "keys are independent");
    }

    #[test]
    fn the_headers_say_the_room_left_and_when_it_is_whole_again() {
        let limiter = Limiter {
            name: "player",
            rate: Rate::per_second(50, 100),
        };
        assert_eq!(limiter.policy(), "\"player\";q=100;w=2");
        assert_eq!(limiter.standing(100), "\"player\";r=100;t=0");
        assert_eq!(limiter.standing(40), "\"player\";r=40;t=2");
    }
}
