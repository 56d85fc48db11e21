//! Account infrastructure: password hashing ([`password`]) and each replica's cache of
//! token revocations ([`revocations`]). The use cases are in `app::accounts`.

pub mod password;
pub mod revocations;

pub use password::Password;
pub use revocations::{APPLIED_CHANNEL, Revocations, TOKENS_CHANNEL};
