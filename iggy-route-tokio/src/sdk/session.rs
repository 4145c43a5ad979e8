//! What the SDK's `Client` trait keeps beside the native client: the session's state as the
//! SDK sees it, the diagnostic events, the credentials a run-time login is checked against;
//! and the trait itself (`connect`, `disconnect`, `shutdown`, `subscribe_events`).

use std::fmt;
use std::sync::atomic::{AtomicU8, Ordering};
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};
use std::time::Duration;

use async_broadcast::{InactiveReceiver, Receiver, Sender};
use async_trait::async_trait;
use iggy_common::{DiagnosticEvent, IggyError, NonZeroIggyDuration};
use iggy_route_core::{Config, Credentials, Event, LinkRole};

use super::group_names::JoinedGroups;
use super::groups::Assignments;
use super::impl_messages::TopicIds;
use crate::Client;

/// Events kept for a subscriber that has not read them yet; past that the oldest go (the
/// subscriber's next `recv` says how many it missed), so the driver never waits on one.
/// The SDK's channel holds as many.
const EVENTS_CAPACITY: usize = 1000;

/// The session as the SDK's traits see it. iggy-route's router signs its links in and out
/// by itself; this is the state the trait's own calls (`logout_user`, `disconnect`, ...)
/// put the client in, and what its other methods check first, as the SDK checks its state.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[repr(u8)]
pub(super) enum Session {
    SignedIn = 0,
    /// After `logout_user`, until a `login_*` with the client's own credentials.
    SignedOut = 1,
    /// After `disconnect`, until the next call or `connect`.
    Disconnected = 2,
    ShutDown = 3,
}

impl Session {
    fn from_u8(value: u8) -> Self {
        match value {
            0 => Self::SignedIn,
            1 => Self::SignedOut,
            2 => Self::Disconnected,
            _ => Self::ShutDown,
        }
    }
}

/// What a trait method needs of the session before it sends anything.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Needs {
    /// A connection: `ping` and the logins, which the SDK sends signed out too.
    Connection,
    /// The server's answer to a request it authenticates itself (`get_stats`,
    /// `get_cluster_metadata`): the SDK sends these without checking its session first.
    Server,
    /// A signed-in session, which the SDK checks before it sends: every other method.
    SignedIn,
}

/// The SDK trait's state, shared by every clone of a [`Client`].
pub(crate) struct SdkState {
    heartbeat_interval: Duration,
    session: AtomicU8,
    diagnostics: Diagnostics,
    /// Keeps the events channel open while nobody subscribes; subscribers are made from it.
    subscriptions: InactiveReceiver<DiagnosticEvent>,
    pub(super) groups: Assignments,
    pub(super) joined_groups: JoinedGroups,
    pub(super) topic_ids: TopicIds,
}

impl SdkState {
    pub(crate) fn new(config: &Config) -> Self {
        let (mut sender, receiver) = async_broadcast::broadcast(EVENTS_CAPACITY);
        sender.set_overflow(true);
        Self {
            heartbeat_interval: config.heartbeat_interval,
            session: AtomicU8::new(Session::SignedIn as u8),
            diagnostics: Diagnostics {
                sender,
                credentials: Arc::new(Mutex::new(config.credentials.clone())),
            },
            subscriptions: receiver.deactivate(),
            groups: Assignments::default(),
            joined_groups: JoinedGroups::default(),
            topic_ids: TopicIds::default(),
        }
    }

    /// What the driver reports the session link's events to.
    pub(crate) fn diagnostics(&self) -> Diagnostics {
        self.diagnostics.clone()
    }

    pub(super) fn publish(&self, event: DiagnosticEvent) {
        self.diagnostics.publish(event);
    }

    pub(super) fn session(&self) -> Session {
        Session::from_u8(self.session.load(Ordering::Acquire))
    }

    pub(super) fn set_session(&self, session: Session) {
        self.session.store(session as u8, Ordering::Release);
    }

    /// Moves the session from `from` to `to`; false when it was elsewhere.
    pub(super) fn move_session(&self, from: Session, to: Session) -> bool {
        self.session
            .compare_exchange(from as u8, to as u8, Ordering::AcqRel, Ordering::Acquire)
            .is_ok()
    }

    /// What the client signs in with now.
    pub(super) fn credentials(&self) -> Credentials {
        self.diagnostics.credentials().clone()
    }

    /// Whether `username` and `password` are what this client signs in with.
    pub(super) fn is_own_user(&self, username: &str, password: &str) -> bool {
        match &*self.diagnostics.credentials() {
            Credentials::UserPassword {
                username: own_name,
                password: own_password,
            } => own_name == username && own_password.expose() == password,
            Credentials::PersonalAccessToken(_) => false,
        }
    }

    /// Whether `token` is the personal access token this client signs in with.
    pub(super) fn is_own_token(&self, token: &str) -> bool {
        match &*self.diagnostics.credentials() {
            Credentials::PersonalAccessToken(own) => own.expose() == token,
            Credentials::UserPassword { .. } => false,
        }
    }

    pub(super) fn heartbeat_interval(&self) -> NonZeroIggyDuration {
        // `Config::validate` refuses a zero interval, so the fallback is never taken.
        NonZeroIggyDuration::new(self.heartbeat_interval).unwrap_or(NonZeroIggyDuration::ONE_SECOND)
    }
}

// By hand: the credentials' secret must not reach logs (`Credentials`' own `Debug` shows
// `***` for it; only the kind is shown here).
impl fmt::Debug for SdkState {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let credentials = match *self.diagnostics.credentials() {
            Credentials::UserPassword { .. } => "user and password",
            Credentials::PersonalAccessToken(_) => "personal access token",
        };
        f.debug_struct("SdkState")
            .field("credentials", &credentials)
            .field("session", &self.session())
            .finish_non_exhaustive()
    }
}

/// Where the SDK's diagnostic events are published. The driver reports what the router
/// says of the session's link; the trait's own calls report theirs.
#[derive(Debug, Clone)]
pub(crate) struct Diagnostics {
    sender: Sender<DiagnosticEvent>,
    /// What the router signs in with: a run-time login is checked against it. The
    /// router's own copy decides; this one follows it on `CredentialsChanged`.
    credentials: Arc<Mutex<Credentials>>,
}

impl Diagnostics {
    /// The router's event, as the SDK's: the session's (coordinator) link signed in is
    /// `Connected` then `SignedIn`, that link gone is `Disconnected` (the router brings it
    /// back, on the same node or another). Data links, routes and refusals are iggy-route's
    /// own business and have no SDK event.
    pub(crate) fn router_event(&self, event: &Event) {
        if let Event::LinkUp {
            role: LinkRole::Coordinator,
            ..
        } = event
        {
            self.publish(DiagnosticEvent::Connected);
            self.publish(DiagnosticEvent::SignedIn);
        } else if let Event::LinkDown {
            role: LinkRole::Coordinator,
            ..
        } = event
        {
            self.publish(DiagnosticEvent::Disconnected);
        }
    }

    /// The router changed the credentials it signs in with (the signed-in user's own
    /// password or name changed): a run-time login is checked against these from now on.
    pub(crate) fn credentials_changed(&self, credentials: &Credentials) {
        *self.credentials() = credentials.clone();
    }

    fn credentials(&self) -> MutexGuard<'_, Credentials> {
        self.credentials
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
    }

    /// The driver stopped: every subscriber hears `Shutdown`.
    pub(crate) fn shut_down(&self) {
        self.publish(DiagnosticEvent::Shutdown);
    }

    fn publish(&self, event: DiagnosticEvent) {
        // Never waits: the channel overflows instead of filling up, and an event nobody
        // subscribed to is dropped (`Inactive`), as is one after the channel closed.
        let _ = self.sender.try_broadcast(event);
    }
}

impl Client {
    /// The SDK's check before a call, with the SDK's answers: a client shut down is
    /// `ClientShutdown`. One disconnected connects again and signs in with the client's
    /// credentials, as the SDK's next call does (iggy-route's links never closed). One
    /// signed out is `Unauthenticated` where the SDK checks its session before sending;
    /// a call the SDK sends anyway (`get_stats`, `get_cluster_metadata`) is refused by the
    /// server, after which the SDK signs in again and sends it once more: here the session
    /// signs in again and the call goes on.
    pub(super) async fn admit(&self, needs: Needs) -> Result<(), IggyError> {
        if self.is_shut_down() {
            return Err(IggyError::ClientShutdown);
        }
        let state = self.sdk_state();
        match (state.session(), needs) {
            (Session::ShutDown, _) => Err(IggyError::ClientShutdown),
            (Session::Disconnected, _) => {
                if state.move_session(Session::Disconnected, Session::SignedIn) {
                    state.publish(DiagnosticEvent::Connected);
                    state.publish(DiagnosticEvent::SignedIn);
                }
                Ok(())
            }
            (Session::SignedOut, Needs::SignedIn) => Err(IggyError::Unauthenticated),
            (Session::SignedOut, Needs::Server) => self.login_as_self().await.map(|_| ()),
            (Session::SignedIn, _) | (Session::SignedOut, Needs::Connection) => Ok(()),
        }
    }
}

#[async_trait]
impl iggy_common::Client for Client {
    /// Already connected: the client connected when it was built. After `disconnect` it
    /// takes the session up again (`Connected`, `SignedIn`), signed in with the client's
    /// credentials as the SDK's auto-login would; after a shutdown it is `ClientShutdown`.
    async fn connect(&self) -> Result<(), IggyError> {
        let state = self.sdk_state();
        if self.is_shut_down() || state.session() == Session::ShutDown {
            return Err(IggyError::ClientShutdown);
        }
        if state.move_session(Session::Disconnected, Session::SignedIn) {
            state.publish(DiagnosticEvent::Connected);
            state.publish(DiagnosticEvent::SignedIn);
        }
        Ok(())
    }

    /// Ends the SDK session (`Disconnected`): the next trait method (or `connect`) takes it
    /// up again, as the SDK's does. iggy-route's links stay open: they are the router's,
    /// shared with the native methods and every clone; `shutdown` closes them.
    async fn disconnect(&self) -> Result<(), IggyError> {
        let state = self.sdk_state();
        let disconnected = state.move_session(Session::SignedIn, Session::Disconnected)
            || state.move_session(Session::SignedOut, Session::Disconnected);
        if disconnected {
            state.publish(DiagnosticEvent::Disconnected);
        }
        Ok(())
    }

    /// The native [`Client::shutdown`]: every pending request fails, every link closes,
    /// subscribers hear `Shutdown`. Shutting down twice is fine.
    async fn shutdown(&self) -> Result<(), IggyError> {
        self.sdk_state().set_session(Session::ShutDown);
        Client::shutdown(self).await;
        Ok(())
    }

    /// A receiver of the events published from now on (see the events table in the crate
    /// documentation).
    async fn subscribe_events(&self) -> Receiver<DiagnosticEvent> {
        self.sdk_state().subscriptions.activate_cloned()
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use iggy_route_core::{LinkId, NodeId};

    use super::*;

    fn state() -> SdkState {
        let credentials = Credentials::user("iggy", "secret-pw").unwrap();
        SdkState::new(&Config::new(vec!["127.0.0.1:1".into()], credentials))
    }

    #[test]
    fn the_session_links_events_reach_subscribers_and_others_do_not() {
        let state = state();
        let mut events = state.subscriptions.activate_cloned();
        let diagnostics = state.diagnostics();
        let (link, node) = (LinkId(1), NodeId(0));
        diagnostics.router_event(&Event::LinkUp {
            link,
            node,
            role: LinkRole::Data,
        });
        diagnostics.router_event(&Event::LinkUp {
            link,
            node,
            role: LinkRole::Coordinator,
        });
        diagnostics.router_event(&Event::LinkDown {
            link,
            node,
            role: LinkRole::Coordinator,
        });
        diagnostics.shut_down();
        let mut seen = Vec::new();
        while let Ok(event) = events.try_recv() {
            seen.push(event);
        }
        assert_eq!(
            seen,
            [
                DiagnosticEvent::Connected,
                DiagnosticEvent::SignedIn,
                DiagnosticEvent::Disconnected,
                DiagnosticEvent::Shutdown
            ]
        );
    }

    #[test]
    fn only_the_clients_own_credentials_match_and_debug_hides_them() {
        let state = state();
        assert!(state.is_own_user("iggy", "secret-pw"));
        assert!(!state.is_own_user("iggy", "other-pw"));
        assert!(!state.is_own_token("secret-pw"));
        let shown = format!("{state:?}");
        assert!(!shown.contains("secret-pw"), "{shown}");
        assert_eq!(
            state.heartbeat_interval().get_duration(),
            Duration::from_secs(5)
        );
    }
}
