//! `UserClient` and `PersonalAccessTokenClient`, run-time logins included.
//!
//! iggy-route signs its links in itself, with the credentials the client was built with,
//! and signs in again (after a logout, an eviction, a move to another node) with what
//! the user is now: a committed change of the signed-in user's own password or name is
//! followed. A login with the client's own credentials signs the session in again if
//! `logout_user` signed it out. A login as another user (or with another token) makes the
//! router sign in as that user from then on, the session and every data link, as the
//! SDK's login moves its connection to that user; a refused one leaves the client on
//! the credentials it had, with its SDK session signed out, as the SDK's is.

use async_trait::async_trait;
use iggy_common::{
    DiagnosticEvent, Identifier, IdentityInfo, IggyError, Permissions, PersonalAccessTokenClient,
    PersonalAccessTokenExpiry, PersonalAccessTokenInfo, RawPersonalAccessToken, UserClient,
    UserInfo, UserInfoDetails, UserStatus, UserUpdateOptions,
};
use iggy_route_core::Credentials;
use iggy_route_core::wire::{Name, Password, validate_password, validate_username};

use super::IntoIggyError;
use super::bodies;
use super::convert_messages::route_identifier;
use super::convert_users::{
    route_permissions, route_token_expiry, route_user_status, sdk_tokens, sdk_user_details,
    sdk_users,
};
use super::session::{Needs, Session};
use crate::Client;

/// The longest token the login's length byte can carry.
const MAX_TOKEN_LENGTH: usize = 255;

impl Client {
    /// A login with the client's own credentials: reads who the session is (signing it in
    /// again if `logout_user` signed it out) and answers the user's id.
    pub(super) async fn login_as_self(&self) -> Result<IdentityInfo, IggyError> {
        let me = Client::get_me(self)
            .await
            .map_err(IntoIggyError::into_iggy_error)?;
        let state = self.sdk_state();
        state.move_session(Session::SignedOut, Session::SignedIn);
        state.publish(DiagnosticEvent::SignedIn);
        Ok(IdentityInfo {
            user_id: me.client.user_id,
            access_token: None,
        })
    }
}

impl Client {
    /// A login as another user, or with a token other than the client's: the router signs
    /// in as `credentials` from now on, and the session's user answers. Credentials the
    /// server refuses put the client back on the ones it had, its SDK session signed out
    /// (the trait's methods fail with `Unauthenticated` until a login succeeds), and the
    /// server's code is returned (`InvalidCredentials`, ...).
    async fn login_as(&self, credentials: Credentials) -> Result<IdentityInfo, IggyError> {
        let state = self.sdk_state();
        let previous = state.credentials();
        self.sign_in_as(credentials)
            .await
            .map_err(IntoIggyError::into_iggy_error)?;
        match Client::get_me(self).await {
            Ok(me) => {
                state.set_session(Session::SignedIn);
                state.publish(DiagnosticEvent::SignedIn);
                Ok(IdentityInfo {
                    user_id: me.client.user_id,
                    access_token: None,
                })
            }
            Err(error) => {
                // Back on what signed in before; the caller is told why the login failed.
                let _ = self.sign_in_as(previous).await;
                state.set_session(Session::SignedOut);
                Err(error.into_iggy_error())
            }
        }
    }
}

#[async_trait]
impl UserClient for Client {
    async fn get_user(&self, user_id: &Identifier) -> Result<Option<UserInfoDetails>, IggyError> {
        self.admit(Needs::SignedIn).await?;
        let user = Client::get_user(self, route_identifier(user_id)?)
            .await
            .map_err(IntoIggyError::into_iggy_error)?;
        Ok(user.map(sdk_user_details))
    }

    async fn get_users(&self) -> Result<Vec<UserInfo>, IggyError> {
        self.admit(Needs::SignedIn).await?;
        let users = Client::get_users(self)
            .await
            .map_err(IntoIggyError::into_iggy_error)?;
        Ok(sdk_users(users))
    }

    async fn create_user(
        &self,
        username: &str,
        password: &str,
        status: UserStatus,
        permissions: Option<Permissions>,
    ) -> Result<UserInfoDetails, IggyError> {
        self.admit(Needs::SignedIn).await?;
        validate_username(username).map_err(|_| IggyError::InvalidUsername)?;
        validate_password(password).map_err(|_| IggyError::InvalidPassword)?;
        let permissions = permissions.as_ref().map(route_permissions).transpose()?;
        let status = route_user_status(status);
        let user = Client::create_user(self, username, password, status, permissions)
            .await
            .map_err(IntoIggyError::into_iggy_error)?;
        Ok(sdk_user_details(user))
    }

    async fn delete_user(&self, user_id: &Identifier) -> Result<(), IggyError> {
        self.admit(Needs::SignedIn).await?;
        Client::delete_user(self, route_identifier(user_id)?)
            .await
            .map_err(IntoIggyError::into_iggy_error)
    }

    /// The native `update_user`; with options set, the same command carrying the SDK's
    /// options block (the 0.11.0 server refuses every user option key by name:
    /// `UnsupportedOptionKey`).
    async fn update_user(
        &self,
        user_id: &Identifier,
        username: Option<&str>,
        status: Option<UserStatus>,
        options: &UserUpdateOptions,
    ) -> Result<(), IggyError> {
        self.admit(Needs::SignedIn).await?;
        let user = route_identifier(user_id)?;
        let status = status.map(route_user_status);
        if options.raw.is_empty() {
            return Client::update_user(self, user, username, status)
                .await
                .map_err(IntoIggyError::into_iggy_error);
        }
        let block = options.to_wire()?.into_bytes();
        let username = username
            .map(Name::new)
            .transpose()
            .map_err(|_| IggyError::InvalidFormat)?;
        let call = bodies::update_user(&user, username.as_ref(), status, &block);
        self.run(call).await.map_err(IntoIggyError::into_iggy_error)
    }

    async fn update_permissions(
        &self,
        user_id: &Identifier,
        permissions: Option<Permissions>,
    ) -> Result<(), IggyError> {
        self.admit(Needs::SignedIn).await?;
        let permissions = permissions.as_ref().map(route_permissions).transpose()?;
        Client::update_permissions(self, route_identifier(user_id)?, permissions)
            .await
            .map_err(IntoIggyError::into_iggy_error)
    }

    /// The native `change_password`. A client that changes its own user's password signs
    /// in with the new one from then on (see the module documentation).
    async fn change_password(
        &self,
        user_id: &Identifier,
        current_password: &str,
        new_password: &str,
    ) -> Result<(), IggyError> {
        self.admit(Needs::SignedIn).await?;
        validate_password(current_password).map_err(|_| IggyError::InvalidPassword)?;
        validate_password(new_password).map_err(|_| IggyError::InvalidPassword)?;
        Client::change_password(
            self,
            route_identifier(user_id)?,
            current_password,
            new_password,
        )
        .await
        .map_err(IntoIggyError::into_iggy_error)
    }

    /// With the client's own username and password: the session, signed in again if it
    /// was signed out, and its user id. Other credentials: the client signs in as that
    /// user from now on (see the module documentation).
    async fn login_user(&self, username: &str, password: &str) -> Result<IdentityInfo, IggyError> {
        validate_username(username).map_err(|_| IggyError::InvalidUsername)?;
        validate_password(password).map_err(|_| IggyError::InvalidPassword)?;
        self.admit(Needs::Connection).await?;
        if self.sdk_state().is_own_user(username, password) {
            return self.login_as_self().await;
        }
        let credentials =
            Credentials::user(username, password).map_err(|_| IggyError::InvalidFormat)?;
        self.login_as(credentials).await
    }

    /// The native `logout_user` (`LOGOUT_USER` on the node holding the session); until a
    /// login, the trait's methods but `ping` and the logins fail with `Unauthenticated`.
    async fn logout_user(&self) -> Result<(), IggyError> {
        self.admit(Needs::SignedIn).await?;
        Client::logout_user(self)
            .await
            .map_err(IntoIggyError::into_iggy_error)?;
        let state = self.sdk_state();
        if state.move_session(Session::SignedIn, Session::SignedOut) {
            state.publish(DiagnosticEvent::SignedOut);
        }
        Ok(())
    }
}

#[async_trait]
impl PersonalAccessTokenClient for Client {
    async fn get_personal_access_tokens(&self) -> Result<Vec<PersonalAccessTokenInfo>, IggyError> {
        self.admit(Needs::SignedIn).await?;
        let tokens = Client::get_personal_access_tokens(self)
            .await
            .map_err(IntoIggyError::into_iggy_error)?;
        Ok(sdk_tokens(tokens))
    }

    async fn create_personal_access_token(
        &self,
        name: &str,
        expiry: PersonalAccessTokenExpiry,
    ) -> Result<RawPersonalAccessToken, IggyError> {
        self.admit(Needs::SignedIn).await?;
        let token = Client::create_personal_access_token(self, name, route_token_expiry(expiry))
            .await
            .map_err(IntoIggyError::into_iggy_error)?;
        Ok(RawPersonalAccessToken {
            token: token.expose().to_owned(),
        })
    }

    async fn delete_personal_access_token(&self, name: &str) -> Result<(), IggyError> {
        self.admit(Needs::SignedIn).await?;
        Client::delete_personal_access_token(self, name)
            .await
            .map_err(IntoIggyError::into_iggy_error)
    }

    /// With the client's own token: as `login_user` with its own credentials. Any other
    /// token: the client signs in with it from now on, as `login_user` as another user.
    async fn login_with_personal_access_token(
        &self,
        token: &str,
    ) -> Result<IdentityInfo, IggyError> {
        if token.is_empty() || token.len() > MAX_TOKEN_LENGTH {
            return Err(IggyError::InvalidFormat);
        }
        self.admit(Needs::Connection).await?;
        if self.sdk_state().is_own_token(token) {
            return self.login_as_self().await;
        }
        let token = Password::new(token).map_err(|_| IggyError::InvalidFormat)?;
        self.login_as(Credentials::PersonalAccessToken(token)).await
    }
}
