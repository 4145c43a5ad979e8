//! Users and personal access tokens of the test cluster, kept and checked as a 0.11.0
//! server keeps them (`core/metadata/src/stm/user.rs`, `core/server/src/auth.rs`,
//! `core/server/src/pat.rs`, `core/server/src/users.rs` of the server source).
//!
//! What the server does and this model copies:
//! - the root user `iggy`/`iggy` is the first user created, so it has id 0; it holds every
//!   global permission, cannot be deleted (`CannotDeleteUser`, 48) and its permissions
//!   cannot change (`CannotChangePermissions`, 49);
//! - a new user takes the lowest free id, so a deleted user's id is reused;
//! - usernames are 3..=50 bytes (`InvalidUsername`, 43) and unique (`UserAlreadyExists`,
//!   46); the server does not check a new password's length (only the SDK does);
//! - a password login of an unknown, inactive or wrong-password user is one answer,
//!   `InvalidCredentials`; a token login of an inactive user is `UserInactive`;
//! - `CHANGE_PASSWORD` checks the current password even when an administrator changes
//!   another user's (`InvalidCredentials`, 42);
//! - a token belongs to the user whose session created it, names are unique per user
//!   (51), a user holds at most [`MAX_TOKENS_PER_USER`] (52), an expiry that overflows is
//!   invalid (56), and a token expired at or before "now" no longer signs in. The server
//!   keeps only a hash of each token; so does the model.
//!
//! Deleting or deactivating a user does not end its sessions on the server either: the
//! permission checks of its next requests find no permissions (deleted) or the old ones
//! (deactivated).

use std::collections::BTreeMap;

use iggy_route_core::wire::{
    ErrorCode, EvictionReason, Identifier, MAX_PASSWORD_LENGTH, MAX_USERNAME_LENGTH,
    MIN_PASSWORD_LENGTH, MIN_USERNAME_LENGTH, Password, Permissions, PersonalAccessTokenInfo,
    UserStatus,
};
use twox_hash::XxHash3_64;

use super::permissioner::Permissioner;

/// The user id of the built-in root user (`DEFAULT_ROOT_USER_ID` of `iggy_common`).
pub const ROOT_USER_ID: u32 = 0;
/// The default root username of an Iggy server.
pub const ROOT_USERNAME: &str = "iggy";
/// The default root password of an Iggy server.
pub const ROOT_PASSWORD: &str = "iggy";
/// `personal_access_token.max_tokens_per_user` of the server's default `config.toml`.
pub const MAX_TOKENS_PER_USER: usize = 100;
/// The root user's creation time: a fixed sentinel on the server, the same on every
/// replica.
const ROOT_CREATED_AT: u64 = 1;

/// A user account. Its `Debug` shows the password as `***`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct User {
    /// Numeric user id.
    pub id: u32,
    /// Login name.
    pub username: String,
    /// The password (a test cluster needs no hashing; the secret stays redacted).
    pub password: Password,
    /// Whether it may sign in.
    pub status: UserStatus,
    /// Creation time, µs.
    pub created_at: u64,
    /// Its permissions; `None` grants nothing.
    pub permissions: Option<Permissions>,
}

/// A personal access token, as the server keeps it: a hash of the token, never the token.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Token {
    /// Name, unique per user.
    pub name: String,
    /// Hash of the raw token.
    hash: u64,
    /// Expiry, µs since the epoch; `None`: never.
    pub expiry_at: Option<u64>,
}

/// Every user and token of the cluster.
#[derive(Debug, Clone)]
pub struct Users {
    accounts: BTreeMap<u32, User>,
    /// Tokens by user, then by name.
    tokens: BTreeMap<u32, BTreeMap<String, Token>>,
    /// Tokens minted so far: makes each raw token different.
    minted: u64,
}

impl Default for Users {
    fn default() -> Self {
        Self::new()
    }
}

impl Users {
    /// Only the root user, with every global permission.
    pub fn new() -> Self {
        let root = User {
            id: ROOT_USER_ID,
            username: ROOT_USERNAME.to_owned(),
            password: secret(ROOT_PASSWORD),
            status: UserStatus::Active,
            created_at: ROOT_CREATED_AT,
            permissions: Some(Permissions::all()),
        };
        Self {
            accounts: BTreeMap::from([(ROOT_USER_ID, root)]),
            tokens: BTreeMap::new(),
            minted: 0,
        }
    }

    /// The user with this id.
    pub fn get(&self, id: u32) -> Option<&User> {
        self.accounts.get(&id)
    }

    /// Every user, by id.
    pub fn all(&self) -> impl Iterator<Item = &User> {
        self.accounts.values()
    }

    /// The permission rules for user `id` (a user that does not exist may do nothing).
    pub fn permissioner(&self, id: u32) -> Permissioner<'_> {
        Permissioner::new(
            self.accounts
                .get(&id)
                .and_then(|user| user.permissions.as_ref()),
        )
    }

    /// The id a request's user identifier names, if that user exists.
    pub fn resolve(&self, identifier: &Identifier) -> Option<u32> {
        match identifier {
            Identifier::Numeric(id) => self.accounts.contains_key(id).then_some(*id),
            Identifier::Named(name) => self.by_name(name.as_str()).map(|user| user.id),
        }
    }

    fn by_name(&self, username: &str) -> Option<&User> {
        self.accounts
            .values()
            .find(|user| user.username == username)
    }

    /// Create a user: the lowest free id, `created_at` as given.
    pub fn create(
        &mut self,
        username: &str,
        password: Password,
        status: UserStatus,
        permissions: Option<Permissions>,
        created_at: u64,
    ) -> Result<&User, ErrorCode> {
        check_username(username)?;
        if self.by_name(username).is_some() {
            return Err(ErrorCode::UserAlreadyExists);
        }
        let id = (0..=u32::MAX)
            .find(|id| !self.accounts.contains_key(id))
            .ok_or(ErrorCode::Error)?;
        let user = User {
            id,
            username: username.to_owned(),
            password,
            status,
            created_at,
            permissions,
        };
        Ok(self.accounts.entry(id).or_insert(user))
    }

    /// Rename a user and/or change its status.
    pub fn update(
        &mut self,
        id: u32,
        username: Option<&str>,
        status: Option<UserStatus>,
    ) -> Result<(), ErrorCode> {
        // The server's order: the user must exist, then the new name must be valid and free.
        if !self.accounts.contains_key(&id) {
            return Err(ErrorCode::ResourceNotFound);
        }
        if let Some(username) = username {
            check_username(username)?;
            if self.by_name(username).is_some_and(|other| other.id != id) {
                return Err(ErrorCode::UserAlreadyExists);
            }
        }
        let user = self
            .accounts
            .get_mut(&id)
            .ok_or(ErrorCode::ResourceNotFound)?;
        if let Some(username) = username {
            username.clone_into(&mut user.username);
        }
        if let Some(status) = status {
            user.status = status;
        }
        Ok(())
    }

    /// Delete a user and its tokens (not the root user).
    pub fn delete(&mut self, id: u32) -> Result<(), ErrorCode> {
        if !self.accounts.contains_key(&id) {
            return Err(ErrorCode::ResourceNotFound);
        }
        if id == ROOT_USER_ID {
            return Err(ErrorCode::CannotDeleteUser);
        }
        self.accounts.remove(&id);
        self.tokens.remove(&id);
        Ok(())
    }

    /// Replace a user's permissions (not the root user's).
    pub fn set_permissions(
        &mut self,
        id: u32,
        permissions: Option<Permissions>,
    ) -> Result<(), ErrorCode> {
        let user = self
            .accounts
            .get_mut(&id)
            .ok_or(ErrorCode::ResourceNotFound)?;
        if id == ROOT_USER_ID {
            return Err(ErrorCode::CannotChangePermissions);
        }
        user.permissions = permissions;
        Ok(())
    }

    /// Change a user's password, if `current` is the one it has.
    pub fn change_password(
        &mut self,
        id: u32,
        current: &Password,
        new: Password,
    ) -> Result<(), ErrorCode> {
        let user = self
            .accounts
            .get_mut(&id)
            .ok_or(ErrorCode::ResourceNotFound)?;
        if user.password != *current {
            return Err(ErrorCode::InvalidCredentials);
        }
        user.password = new;
        Ok(())
    }

    /// The user a password login signs in, if the credentials are right and it is
    /// active (the server answers all three failures alike).
    pub fn authenticate(&self, username: &str, password: &str) -> Option<u32> {
        let bounded = (MIN_USERNAME_LENGTH..=MAX_USERNAME_LENGTH).contains(&username.len())
            && (MIN_PASSWORD_LENGTH..=MAX_PASSWORD_LENGTH).contains(&password.len());
        self.by_name(username)
            .filter(|user| {
                bounded && user.password.expose() == password && user.status == UserStatus::Active
            })
            .map(|user| user.id)
    }

    // ---- personal access tokens ------------------------------------------------------

    /// How many tokens `user` holds (the create cap counts them, expired ones included).
    pub fn token_count(&self, user: u32) -> usize {
        self.tokens.get(&user).map_or(0, BTreeMap::len)
    }

    /// Create a token for `user`, expiring `expiry` µs after `now` (0: the server default,
    /// never; `u64::MAX`: never), and return the raw token, which nothing keeps.
    pub fn create_token(
        &mut self,
        user: u32,
        name: &str,
        expiry: u64,
        now: u64,
    ) -> Result<Password, ErrorCode> {
        let tokens = self.tokens.entry(user).or_default();
        if tokens.contains_key(name) {
            return Err(ErrorCode::PersonalAccessTokenAlreadyExists);
        }
        let expiry_at = match expiry {
            0 | u64::MAX => None,
            // The server adds without a check, so an overflow wraps below "now" and is
            // refused as an expiry in the past.
            after => Some(
                now.checked_add(after)
                    .ok_or(ErrorCode::InvalidPersonalAccessTokenExpiry)?,
            ),
        };
        self.minted += 1;
        let raw = mint(self.minted, user, name, now);
        let token = Token {
            name: name.to_owned(),
            hash: XxHash3_64::oneshot(raw.expose().as_bytes()),
            expiry_at,
        };
        tokens.insert(name.to_owned(), token);
        Ok(raw)
    }

    /// Delete one of `user`'s tokens by name.
    pub fn delete_token(&mut self, user: u32, name: &str) -> Result<(), ErrorCode> {
        self.tokens
            .get_mut(&user)
            .and_then(|tokens| tokens.remove(name))
            .map(|_| ())
            .ok_or(ErrorCode::ResourceNotFound)
    }

    /// `user`'s tokens, by name, as `GET_PERSONAL_ACCESS_TOKENS` lists them (expiry 0:
    /// never). Expired tokens stay listed until deleted (the server's cleaner runs
    /// periodically; the model has none).
    pub fn tokens_of(&self, user: u32) -> Vec<(String, Option<u64>)> {
        self.tokens
            .get(&user)
            .map(|tokens| {
                tokens
                    .values()
                    .map(|token| (token.name.clone(), token.expiry_at))
                    .collect()
            })
            .unwrap_or_default()
    }

    /// The user a token login signs in at `now` (µs): `InvalidToken` for an unknown or
    /// expired token, `UserInactive` for an inactive user.
    pub fn authenticate_token(&self, token: &str, now: u64) -> Result<u32, EvictionReason> {
        let hash = XxHash3_64::oneshot(token.as_bytes());
        let (user, found) = self
            .tokens
            .iter()
            .find_map(|(user, tokens)| {
                tokens
                    .values()
                    .find(|candidate| candidate.hash == hash)
                    .map(|found| (*user, found))
            })
            .ok_or(EvictionReason::InvalidToken)?;
        if found.expiry_at.is_some_and(|expiry_at| expiry_at <= now) {
            return Err(EvictionReason::InvalidToken);
        }
        match self.accounts.get(&user) {
            None => Err(EvictionReason::InvalidToken),
            Some(account) if account.status != UserStatus::Active => {
                Err(EvictionReason::UserInactive)
            }
            Some(account) => Ok(account.id),
        }
    }
}

/// A `GET_PERSONAL_ACCESS_TOKENS` entry.
pub(super) fn token_info(name: &str, expiry_at: Option<u64>) -> Option<PersonalAccessTokenInfo> {
    Some(PersonalAccessTokenInfo {
        name: iggy_route_core::wire::Name::new(name).ok()?,
        expiry_at: expiry_at.unwrap_or(0),
    })
}

fn check_username(username: &str) -> Result<(), ErrorCode> {
    if (MIN_USERNAME_LENGTH..=MAX_USERNAME_LENGTH).contains(&username.len()) {
        Ok(())
    } else {
        Err(ErrorCode::InvalidUsername)
    }
}

fn secret(text: &str) -> Password {
    Password::new(text).expect("the root password is shorter than 256 bytes")
}

/// A new raw token: 64 hex digits, distinct per mint. The server draws 50 random bytes;
/// the model is deterministic (the simulation replays it), so it hashes the mint's
/// circumstances instead. Good enough for a test cluster, not for anything else.
fn mint(counter: u64, user: u32, name: &str, now: u64) -> Password {
    let mut input = Vec::with_capacity(20 + name.len());
    input.extend_from_slice(&counter.to_le_bytes());
    input.extend_from_slice(&user.to_le_bytes());
    input.extend_from_slice(&now.to_le_bytes());
    input.extend_from_slice(name.as_bytes());
    let digits: String = (0..4u64)
        .map(|part| format!("{:016x}", XxHash3_64::oneshot_with_seed(part, &input)))
        .collect();
    secret(&digits)
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;

    fn pw(text: &str) -> Password {
        Password::new(text).unwrap()
    }

    #[test]
    fn root_is_user_zero_and_cannot_be_deleted_or_restricted() {
        let mut users = Users::new();
        assert_eq!(users.authenticate("iggy", "iggy"), Some(0));
        assert_eq!(users.delete(0), Err(ErrorCode::CannotDeleteUser));
        assert_eq!(
            users.set_permissions(0, None),
            Err(ErrorCode::CannotChangePermissions)
        );
        assert_eq!(users.get(0).unwrap().created_at, 1);
        assert!(format!("{:?}", users.get(0).unwrap()).contains("password: ***"));
    }

    #[test]
    fn ids_are_the_lowest_free_and_names_are_checked() {
        let mut users = Users::new();
        let alice = users
            .create("alice", pw("pw1"), UserStatus::Active, None, 5)
            .unwrap()
            .id;
        let bob = users
            .create("bob", pw("pw2"), UserStatus::Active, None, 6)
            .unwrap()
            .id;
        assert_eq!((alice, bob), (1, 2));
        assert_eq!(
            users.create("al", pw("pw"), UserStatus::Active, None, 7),
            Err(ErrorCode::InvalidUsername)
        );
        assert_eq!(
            users.create("bob", pw("pw"), UserStatus::Active, None, 7),
            Err(ErrorCode::UserAlreadyExists)
        );
        users.delete(alice).unwrap();
        let carol = users
            .create("carol", pw("pw3"), UserStatus::Active, None, 8)
            .unwrap();
        assert_eq!(carol.id, 1, "a deleted user's id is reused");
        assert_eq!(
            users.update(1, Some("bob"), None),
            Err(ErrorCode::UserAlreadyExists)
        );
        assert_eq!(users.delete(9), Err(ErrorCode::ResourceNotFound));
    }

    #[test]
    fn logins_need_the_right_password_and_an_active_user() {
        let mut users = Users::new();
        users
            .create("alice", pw("secret"), UserStatus::Inactive, None, 1)
            .unwrap();
        assert_eq!(users.authenticate("alice", "secret"), None);
        users.update(1, None, Some(UserStatus::Active)).unwrap();
        assert_eq!(users.authenticate("alice", "secret"), Some(1));
        assert_eq!(
            users.change_password(1, &pw("wrong"), pw("next")),
            Err(ErrorCode::InvalidCredentials)
        );
        users.change_password(1, &pw("secret"), pw("next")).unwrap();
        assert_eq!(users.authenticate("alice", "secret"), None);
        assert_eq!(users.authenticate("alice", "next"), Some(1));
    }

    #[test]
    fn tokens_sign_in_until_deleted_or_expired() {
        let mut users = Users::new();
        let raw = users.create_token(0, "ci", 1_000, 10).unwrap();
        let forever = users.create_token(0, "forever", 0, 10).unwrap();
        assert_ne!(raw, forever);
        assert_eq!(
            users.create_token(0, "ci", 0, 10),
            Err(ErrorCode::PersonalAccessTokenAlreadyExists)
        );
        assert_eq!(
            users.create_token(0, "overflow", u64::MAX - 1, 10),
            Err(ErrorCode::InvalidPersonalAccessTokenExpiry)
        );
        assert_eq!(users.authenticate_token(raw.expose(), 500), Ok(0));
        assert_eq!(
            users.authenticate_token(raw.expose(), 1_010),
            Err(EvictionReason::InvalidToken)
        );
        assert_eq!(users.authenticate_token(forever.expose(), u64::MAX), Ok(0));
        assert_eq!(
            users.tokens_of(0),
            vec![("ci".to_owned(), Some(1_010)), ("forever".to_owned(), None)]
        );
        users.delete_token(0, "forever").unwrap();
        assert_eq!(
            users.authenticate_token(forever.expose(), 11),
            Err(EvictionReason::InvalidToken)
        );
        assert_eq!(
            users.delete_token(0, "forever"),
            Err(ErrorCode::ResourceNotFound)
        );
        assert_eq!(users.token_count(0), 1);
    }
}
