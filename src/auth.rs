//! Player identity: HS256 JSON Web Tokens, minted at registration and checked on every
//! player request. A frontend's own backend may mint tokens with the same secret.

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

/// The claims a Statki token carries.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Claims {
    /// The player id.
    pub sub: Uuid,
    pub iss: String,
    pub aud: String,
    pub iat: i64,
    pub exp: i64,
}

#[derive(Debug, thiserror::Error, PartialEq, Eq)]
pub enum TokenError {
    #[error("the token has expired")]
    Expired,
    #[error("the token is not valid: {0}")]
    Invalid(String),
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
    /// Keys for `secret`; refused when the secret is unusable (e.g. empty).
    pub fn new(secret: &[u8]) -> Result<Self, TokenError> {
        if secret.is_empty() {
            return Err(TokenError::Invalid("the signing secret is empty".into()));
        }
        let invalid = |e: jsonwebtoken::errors::Error| TokenError::Invalid(e.to_string());
        let mut validation = Validation::new(Algorithm::HS256);
        validation.set_issuer(&[ISSUER]);
        validation.set_audience(&[AUDIENCE]);
        validation.set_required_spec_claims(&["exp", "iss", "aud", "sub"]);
        validation.leeway = LEEWAY_SECONDS;
        Ok(Self {
            encoding: EncodingKey::from_secret(secret).map_err(invalid)?,
            decoding: DecodingKey::from_secret(secret).map_err(invalid)?,
            validation,
        })
    }

    pub fn mint(&self, player: Uuid, now: DateTime<Utc>) -> Result<String, TokenError> {
        let claims = Claims {
            sub: player,
            iss: ISSUER.to_owned(),
            aud: AUDIENCE.to_owned(),
            iat: now.timestamp(),
            exp: (now + chrono::Duration::days(TOKEN_DAYS)).timestamp(),
        };
        jsonwebtoken::encode(&Header::new(Algorithm::HS256), &claims, &self.encoding)
            .map_err(|e| TokenError::Invalid(e.to_string()))
    }

    /// The player a token names, if it is signed with our secret, unexpired, and ours.
    pub fn verify(&self, token: &str) -> Result<Uuid, TokenError> {
        jsonwebtoken::decode::<Claims>(token, &self.decoding, &self.validation)
            .map(|data| data.claims.sub)
            .map_err(|e| match e.kind() {
                jsonwebtoken::errors::ErrorKind::ExpiredSignature => TokenError::Expired,
                _ => TokenError::Invalid(e.to_string()),
            })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_minted_token_verifies_and_names_the_player() {
        let tokens = Tokens::new(b"secret").expect("keys");
        let player = Uuid::new_v4();
        let token = tokens.mint(player, Utc::now()).expect("mint");
        assert_eq!(tokens.verify(&token), Ok(player));
    }

    #[test]
    fn a_token_signed_with_another_secret_is_refused() {
        let token = Tokens::new(b"other")
            .expect("keys")
            .mint(Uuid::new_v4(), Utc::now())
            .expect("mint");
        assert!(matches!(
            Tokens::new(b"secret").expect("keys").verify(&token),
            Err(TokenError::Invalid(_))
        ));
    }

    #[test]
    fn an_expired_token_is_refused_beyond_the_leeway() {
        let tokens = Tokens::new(b"secret").expect("keys");
        let long_ago =
            Utc::now() - chrono::Duration::days(TOKEN_DAYS) - chrono::Duration::minutes(5);
        let token = tokens.mint(Uuid::new_v4(), long_ago).expect("mint");
        assert_eq!(tokens.verify(&token), Err(TokenError::Expired));
    }

    #[test]
    fn a_token_signed_with_another_algorithm_is_refused() {
        let tokens = Tokens::new(b"secret").expect("keys");
        let claims = Claims {
            sub: Uuid::new_v4(),
            iss: ISSUER.into(),
            aud: AUDIENCE.into(),
            iat: 0,
            exp: Utc::now().timestamp() + 600,
        };
        let token = jsonwebtoken::encode(
            &Header::new(Algorithm::HS384),
            &claims,
            &EncodingKey::from_secret(b"secret").expect("key"),
        )
        .expect("mint");
        assert!(tokens.verify(&token).is_err(), "only HS256 is accepted");
    }
}
