//! The credentials every link signs in with follow the signed-in user's own committed
//! changes. Sessions already signed in survive a new password or a new name, but every
//! later sign-in (a reconnect, a data link to another node, a failover) would otherwise
//! offer what the server no longer knows and be refused with `InvalidCredentials`, for
//! good: the router retries sign-ins with the same credentials. The SDK does the same for
//! its remembered sign-in.
//!
//! A run-time login as another user ([`Router::sign_in_as`]) replaces the credentials
//! outright. Every link signed in with the old ones is retired: one with nothing in
//! flight closes at once, a busy one once its exchange is answered (so nothing written
//! under the old user is cut off), and none takes anything new. Requests from then on go
//! out on links signed in as the new user, the session's included.
//!
//! Only a change the server committed counts: a refused one changes nothing, and one
//! whose outcome is unknown changes nothing either (the old credentials are kept; if the
//! change did commit, later sign-ins are refused and the caller, who was told the outcome
//! is unknown, knows why).

use std::time::{Duration, Instant};

use super::link::LinkState;
use super::{Output, Router};
use crate::config::Credentials;
use crate::event::Event;
use crate::ids::{LinkId, RequestId};
use crate::request::Request;
use crate::wire::{AccountChange, ErrorCode, Identifier};

/// How long after a change of the credentials a node other than the metadata leader may
/// still refuse them for not having applied the change: a follower applies a commit when
/// the leader's next message tells it, within a heartbeat on a healthy cluster.
const CREDENTIALS_SETTLE: Duration = Duration::from_secs(3);

impl Router {
    /// `request` was committed: if it changed the signed-in user's password or name, links
    /// sign in with the new one from now on.
    pub(super) fn follow_own_account_change(&mut self, request: RequestId) {
        let Some(entry) = self.requests.get(&request) else {
            return;
        };
        let Request::Command(command) = &entry.request else {
            return;
        };
        let Some(change) = AccountChange::read(command.code, &command.body) else {
            return;
        };
        // A token is not derived from the password or the name: it signs in as before.
        let Credentials::UserPassword { username, password } = &mut self.config.credentials else {
            return;
        };
        let own = match &change.user {
            Identifier::Named(name) => name.as_str() == username.as_str(),
            Identifier::Numeric(id) => self.coordinator.user_id == Some(*id),
        };
        if !own {
            return;
        }
        if let Some(new_password) = change.password {
            *password = new_password;
        }
        if let Some(new_name) = change.username {
            *username = new_name.as_str().to_owned();
        }
        self.coordinator.credentials_changed_at = Some(self.last_now);
        self.outputs
            .push_back(Output::Event(Event::CredentialsChanged));
    }

    /// The credentials links sign in with now: the configured ones, after any committed
    /// change of the signed-in user's own password or name.
    pub fn credentials(&self) -> &Credentials {
        &self.config.credentials
    }

    /// Signs in as `credentials` from now on, as a login as another user does: the links
    /// signed in with the old credentials are retired (see the module documentation), and
    /// the session and every data link sign in again with these as they are needed. A
    /// refusal of the new credentials is reported as any sign-in's is
    /// ([`Event::SignInRefused`], and the requests waiting for a session fail with
    /// `RequestError::SignIn`); the router keeps trying them, with backoff, until it is
    /// given others.
    pub fn sign_in_as(&mut self, now: Instant, credentials: Credentials) {
        let now = self.clock(now);
        self.config.credentials = credentials;
        self.coordinator.credentials_changed_at = Some(now);
        // The new session signs in on the metadata leader, which has applied every
        // committed user change: it answers at once for a user just made or changed, and
        // its refusal is final, where a lagging follower's would be waited out (the SDK's
        // login lands its session there too). Not a move for an unreachable node.
        if let Some(leader) = self.routing.leader() {
            self.coordinator.node = leader;
        }
        let links: Vec<LinkId> = self.links.keys().copied().collect();
        for id in links {
            let Some(link) = self.links.get_mut(&id) else {
                continue;
            };
            // A link still connecting signs in with what is configured when it connects.
            if link.state != LinkState::Connecting {
                link.retiring = true;
                self.links_retiring = true;
            }
        }
        self.settle(now);
    }

    /// Whether a refusal of the credentials by the node of `link_id` may only mean that
    /// the node has not applied their change yet: within [`CREDENTIALS_SETTLE`] of the
    /// change, from a node other than the metadata leader (which committed it, and whose
    /// refusal is final). The real cluster refuses a new password on a follower for a
    /// while after the leader committed it. Such a sign-in is tried again after a backoff,
    /// as one answered "not now" is.
    pub(super) fn credentials_settling(
        &self,
        now: Instant,
        link_id: LinkId,
        code: ErrorCode,
    ) -> bool {
        let refused = matches!(
            code,
            ErrorCode::InvalidCredentials | ErrorCode::InvalidPersonalAccessToken
        );
        let recent = self
            .coordinator
            .credentials_changed_at
            .is_some_and(|at| now.saturating_duration_since(at) < CREDENTIALS_SETTLE);
        let node = self.links.get(&link_id).map(|link| link.node);
        refused && recent && node.is_some() && node != self.routing.leader()
    }

    /// The session's sign-in with changed credentials was refused by a node that may lag:
    /// the next one goes to the metadata leader, whose answer is final, when it is known
    /// (it may have been learned only since the credentials changed).
    pub(super) fn session_to_the_leader(&mut self, link_id: LinkId) {
        if self.coordinator.link != Some(link_id) {
            return;
        }
        if let Some(leader) = self.routing.leader() {
            self.coordinator.node = leader;
        }
    }

    /// A retiring link's sign-in was refused: it goes, and that is all. Neither its node
    /// nor the session is to blame (a failure would back the node off or move the
    /// session), and what waits for a link signs in with the current credentials next.
    pub(super) fn drop_retired_sign_in(&mut self, link_id: LinkId) {
        let Some(link) = self.links.remove(&link_id) else {
            return;
        };
        self.outputs.push_back(Output::Close { link: link_id });
        if self.coordinator.link == Some(link.id) {
            self.coordinator.link = None;
            self.coordinator.identity = None;
        }
    }

    /// Closes every retiring link with nothing in flight.
    pub(super) fn close_retired_links(&mut self, now: Instant) {
        if !self.links_retiring {
            return;
        }
        let done: Vec<LinkId> = self
            .links
            .values()
            .filter(|link| link.retiring && link.in_flight.is_none())
            .map(|link| link.id)
            .collect();
        for id in done {
            self.close_by_choice(now, id);
        }
        self.links_retiring = self.links.values().any(|link| link.retiring);
    }
}
