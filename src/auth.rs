//! Player identity: HS256 JSON Web Tokens, minted at registration and log-in and checked on
//! every player request. A frontend's own backend may mint tokens with the same secret.
//!
//! `iat` is a NumericDate with microseconds (RFC 7519 allows fractions), so a token issued
//! in the same second as a revocation is judged by the instant, not by the second.

use chrono::{DateTime, Utc};
use jsonwebtoken::{Algorithm, DecodingKey, EncodingKey, Header, Validation};
use serde::{Deserialize, Serialize};
use uuid::Uuid;

pub const ISSUER: &str = "statki";
pub const AUDIENCE: &str = "statki";
/// How long a token minted at registration stays valid.
pub const TOKEN_DAYS: i64 = 30;
/// Clock skew tolerated between the minting backend and this service.
const LEEWAY_SECONDS: u64 = 30;
/// Shortest accepted signing secret: HS256 wants a key at least as long as its hash.
pub const SECRET_MIN_BYTES: usize = 32;
/// Longest accepted token. Ours are about 250 bytes; a bigger one is refused before it is
/// decoded, so a client cannot make every request parse a megabyte of base64.
pub const TOKEN_MAX_BYTES: usize = 2048;

/// The claims a Statki token carries.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Claims {
    /// The player id.
    pub sub: Uuid,
    pub iss: String,
    pub aud: String,
    /// Issued at, in seconds since the epoch with up to six decimals. Optional: a token
    /// without it is valid until the player's first revocation.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub iat: Option<f64>,
    pub exp: i64,
    /// Not valid before this time; honoured when present.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub nbf: Option<i64>,
}

/// What a verified token says.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Verified {
    pub player: Uuid,
    /// `iat` in microseconds since the epoch; `None` when the token carries none.
    pub issued_micros: Option<i64>,
}

/// A microsecond instant as a NumericDate: exact after a JSON round trip, since an `f64`
/// near today's epoch seconds resolves well below half a microsecond.
pub fn numeric_date(micros: i64) -> f64 {
    micros as f64 / 1e6
}

/// The microsecond instant a NumericDate names (rounded to the nearest microsecond).
pub fn micros_of(numeric_date: f64) -> Option<i64> {
    let micros = (numeric_date * 1e6).round();
    // Outside i64 (or NaN) the claim is nonsense; the token is refused.
    (micros.is_finite() && micros.abs() < 9.0e18).then_some(micros as i64)
}

#[derive(Debug, thiserror::Error, PartialEq, Eq)]
pub enum TokenError {
    #[error("the token has expired")]
    Expired,
    #[error("the token is not valid yet")]
    NotYetValid,
    #[error("the token is longer than {TOKEN_MAX_BYTES} bytes")]
    TooLarge,
    /// Why is logged, never told: the reason would help a forger.
    #[error("the token is not valid")]
    Invalid,
    #[error(
        "the token signing secret (STATKI_JWT_SECRET) has {0} bytes; it needs at least \
         {SECRET_MIN_BYTES} (e.g. `openssl rand -hex 32`)"
    )]
    WeakSecret(usize),
    #[error(
        "the token signing secret (STATKI_JWT_SECRET) is a published placeholder or example: \
         anyone could forge tokens with it; set 32 random bytes (e.g. `openssl rand -hex 32`) \
         or leave it unset to have one generated"
    )]
    PublicSecret,
}

/// Secrets published with the project (its deploy files, documentation and examples, in this
/// and earlier versions): a service configured with one would accept tokens anyone can mint.
/// `tests/it/hardening.rs` checks that every `STATKI_JWT_SECRET=` value the repository ships is
/// refused by [`configured_secret`].
const PUBLISHED_SECRETS: &[&str] = &[
    "change-me-to-64-random-hex-digits-change-me-to-64-random-hex-digits",
    "a-test-secret-of-at-least-32-bytes",
    "another-secret-of-at-least-32-bytes",
    "another-secret-that-is-at-least-32-bytes",
    "test-secret-for-statki-tests-32-bytes-at-least",
];

/// Words only a placeholder contains (compared without case, `-`, `_` or spaces).
const PLACEHOLDER_WORDS: &[&str] = &["changeme", "replaceme", "placeholder", "yoursecret"];

/// Checks a secret an operator configured: long enough ([`Tokens::new`]) and not one the
/// project published or an obvious placeholder. Generated secrets need no such check.
pub fn configured_secret(secret: &str) -> Result<Tokens, TokenError> {
    let trimmed = secret.trim();
    let folded: String = trimmed
        .chars()
        .filter(|c| !matches!(c, '-' | '_' | ' '))
        .flat_map(char::to_lowercase)
        .collect();
    if PUBLISHED_SECRETS.contains(&trimmed)
        || PLACEHOLDER_WORDS.iter().any(|word| folded.contains(word))
    {
        return Err(TokenError::PublicSecret);
    }
    Tokens::new(secret.as_bytes())
}

/// Signs and checks tokens with one shared secret.
#[derive(Clone)]
pub struct Tokens {
    encoding: EncodingKey,
    decoding: DecodingKey,
    validation: Validation,
}

impl std::fmt::Debug for Tokens {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("Tokens { secret: <hidden> }")
    }
}

impl Tokens {
    /// Keys for `secret`; refused when the secret is shorter than [`SECRET_MIN_BYTES`].
    pub fn new(secret: &[u8]) -> Result<Self, TokenError> {
        if secret.len() < SECRET_MIN_BYTES {
            return Err(TokenError::WeakSecret(secret.len()));
        }
        let invalid = |e: jsonwebtoken::errors::Error| {
            tracing::error!(error = %e, "unusable signing secret");
            TokenError::Invalid
        };
        let mut validation = Validation::new(Algorithm::HS256);
        validation.set_issuer(&[ISSUER]);
        validation.set_audience(&[AUDIENCE]);
        validation.set_required_spec_claims(&["exp", "iss", "aud", "sub"]);
        validation.leeway = LEEWAY_SECONDS;
        validation.validate_nbf = true;
        Ok(Self {
            encoding: EncodingKey::from_secret(secret).map_err(invalid)?,
            decoding: DecodingKey::from_secret(secret).map_err(invalid)?,
            validation,
        })
    }

    /// A token for `player` issued at `now` (kept to the microsecond).
    pub fn mint(&self, player: Uuid, now: DateTime<Utc>) -> Result<String, TokenError> {
        let claims = Claims {
            sub: player,
            iss: ISSUER.to_owned(),
            aud: AUDIENCE.to_owned(),
            iat: Some(numeric_date(now.timestamp_micros())),
            exp: (now + chrono::Duration::days(TOKEN_DAYS)).timestamp(),
            nbf: None,
        };
        self.sign(&claims)
    }

    /// Signs arbitrary claims, for backends and tests that mint their own tokens.
    pub fn sign(&self, claims: &Claims) -> Result<String, TokenError> {
        jsonwebtoken::encode(&Header::new(Algorithm::HS256), claims, &self.encoding).map_err(|e| {
            tracing::error!(error = %e, "signing a token");
            TokenError::Invalid
        })
    }

    /// The player a token names, if it is signed with our secret, unexpired, and ours.
    pub fn verify(&self, token: &str) -> Result<Uuid, TokenError> {
        self.verify_claims(token).map(|verified| verified.player)
    }

    /// The player and issue instant of a token signed with our secret, unexpired, and ours.
    /// Whether the player exists and the token was revoked is for the caller to check.
    pub fn verify_claims(&self, token: &str) -> Result<Verified, TokenError> {
        if token.len() > TOKEN_MAX_BYTES {
            return Err(TokenError::TooLarge);
        }
        let claims = jsonwebtoken::decode::<Claims>(token, &self.decoding, &self.validation)
            .map(|data| data.claims)
            .map_err(|e| match e.kind() {
                jsonwebtoken::errors::ErrorKind::ExpiredSignature => TokenError::Expired,
                jsonwebtoken::errors::ErrorKind::ImmatureSignature => TokenError::NotYetValid,
                _ => {
                    tracing::debug!(error = %e, "refused a token");
                    TokenError::Invalid
                }
            })?;
        let issued_micros = match claims.iat {
            None => None,
            Some(iat) => Some(micros_of(iat).ok_or(TokenError::Invalid)?),
        };
        Ok(Verified {
            player: claims.sub,
            issued_micros,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const SECRET: &[u8] = b"a-test-secret-of-at-least-32-bytes";

    #[test]
    fn a_minted_token_verifies_and_names_the_player() {
        let tokens = Tokens::new(SECRET).expect("keys");
        let player = Uuid::new_v4();
        let token = tokens.mint(player, Utc::now()).expect("mint");
        assert_eq!(tokens.verify(&token), Ok(player));
    }

    #[test]
    fn a_token_signed_with_another_secret_is_refused() {
        let token = Tokens::new(b"another-secret-of-at-least-32-bytes")
            .expect("keys")
            .mint(Uuid::new_v4(), Utc::now())
            .expect("mint");
        assert_eq!(
            Tokens::new(SECRET).expect("keys").verify(&token),
            Err(TokenError::Invalid)
        );
    }

    #[test]
    fn an_expired_token_is_refused_beyond_the_leeway() {
        let tokens = Tokens::new(SECRET).expect("keys");
        let long_ago =
            Utc::now() - chrono::Duration::days(TOKEN_DAYS) - chrono::Duration::minutes(5);
        let token = tokens.mint(Uuid::new_v4(), long_ago).expect("mint");
        assert_eq!(tokens.verify(&token), Err(TokenError::Expired));
    }

    #[test]
    fn a_token_signed_with_another_algorithm_is_refused() {
        let tokens = Tokens::new(SECRET).expect("keys");
        let claims = Claims {
            sub: Uuid::new_v4(),
            iss: ISSUER.into(),
            aud: AUDIENCE.into(),
            iat: None,
            exp: Utc::now().timestamp() + 600,
            nbf: None,
        };
        let token = jsonwebtoken::encode(
            &Header::new(Algorithm::HS384),
            &claims,
            &EncodingKey::from_secret(SECRET).expect("key"),
        )
        .expect("mint");
        assert!(tokens.verify(&token).is_err(), "only HS256 is accepted");
    }

    #[test]
    fn the_issue_instant_survives_the_token_to_the_microsecond() {
        let tokens = Tokens::new(SECRET).expect("keys");
        let start = Utc::now().timestamp_micros();
        for step in [0, 1, 7, 999_999, 1_000_001, 123_456_789] {
            let micros = start + step;
            let at = DateTime::from_timestamp_micros(micros).expect("instant");
            let token = tokens.mint(Uuid::new_v4(), at).expect("mint");
            let verified = tokens.verify_claims(&token).expect("verify");
            assert_eq!(verified.issued_micros, Some(micros));
        }
    }

    #[test]
    fn a_token_without_iat_or_with_whole_seconds_verifies() {
        let tokens = Tokens::new(SECRET).expect("keys");
        let key = EncodingKey::from_secret(SECRET).expect("key");
        let exp = Utc::now().timestamp() + 600;
        let player = Uuid::new_v4();
        let without =
            serde_json::json!({"sub": player, "iss": "statki", "aud": "statki", "exp": exp});
        let token = jsonwebtoken::encode(&Header::default(), &without, &key).expect("mint");
        assert_eq!(
            tokens.verify_claims(&token),
            Ok(Verified {
                player,
                issued_micros: None
            })
        );
        let whole = serde_json::json!({"sub": player, "iss": "statki", "aud": "statki", "iat": 1_800_000_000, "exp": exp});
        let token = jsonwebtoken::encode(&Header::default(), &whole, &key).expect("mint");
        assert_eq!(
            tokens.verify_claims(&token).map(|v| v.issued_micros),
            Ok(Some(1_800_000_000_000_000))
        );
    }

    #[test]
    fn a_short_secret_is_refused() {
        assert_eq!(
            Tokens::new(b"only-31-bytes-long-secret-value").err(),
            Some(TokenError::WeakSecret(31))
        );
        assert!(Tokens::new(&[7u8; SECRET_MIN_BYTES]).is_ok());
    }

    #[test]
    fn a_token_not_yet_valid_is_refused() {
        let tokens = Tokens::new(SECRET).expect("keys");
        let now = Utc::now().timestamp();
        let claims = Claims {
            sub: Uuid::new_v4(),
            iss: ISSUER.into(),
            aud: AUDIENCE.into(),
            iat: Some(now as f64),
            exp: now + 3600,
            nbf: Some(now + 600),
        };
        let token = tokens.sign(&claims).expect("mint");
        assert_eq!(tokens.verify(&token), Err(TokenError::NotYetValid));
        let valid_now = tokens
            .sign(&Claims {
                nbf: Some(now - 10),
                ..claims.clone()
            })
            .expect("mint");
        assert_eq!(tokens.verify(&valid_now), Ok(claims.sub));
    }

    #[test]
    fn an_oversized_token_is_refused_before_decoding() {
        let tokens = Tokens::new(SECRET).expect("keys");
        let huge = "a".repeat(TOKEN_MAX_BYTES + 1);
        assert_eq!(tokens.verify(&huge), Err(TokenError::TooLarge));
    }
}
