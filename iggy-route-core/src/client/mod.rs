//! What the adapters' clients share and that does no I/O: the [`ClientError`] they return,
//! each operation as a `Call` (request and reply kind), and the small conversions both
//! transports need. The adapters keep their transports, the clock and the process id: the
//! functions here take time and entropy as arguments.
//!
//! The operations both clients expose are one list,
//! `for_each_operation!`, that each adapter turns into methods
//! (async on tokio, blocking on mio). To add an operation, add one entry to the list (and
//! its `Call` constructor); both clients gain the method. `builder_methods!` writes their
//! `producer` and `consumer`.

mod call;
mod callers;
mod calls_admin;
mod calls_groups;
mod calls_session;
mod calls_system;
mod calls_users;
mod connect_wait;
pub mod consumer;
mod error;
mod operations;
mod probe;
pub mod producer;

#[cfg(test)]
mod tests;

use std::io;

pub use error::ClientError;

// The adapters' kit: public for them, not for users.
#[doc(hidden)]
pub use call::{Call, ExpectedReply};
#[doc(hidden)]
pub use callers::{Admission, Callers};
#[doc(hidden)]
pub use connect_wait::{ConnectWait, SessionWatch};
#[doc(hidden)]
pub use probe::{PROBE_LEN, ProbeVerdict, probe_delay, probe_request, probe_verdict};

use crate::ConnectError;
use crate::event::{Event, LinkRole};
use crate::request::RequestError;
use crate::wire::{Identifier, Message};

/// What one of the core's builders checked and made, handed to the adapter to start: only
/// the builders make one, so an adapter's producer or consumer never runs on settings that
/// skipped their checks (or a consumer on claims that are not its client's).
///
/// ```compile_fail
/// // Outside the core, nothing can make one.
/// let forged = iggy_route_core::client::Checked::new(());
/// ```
#[doc(hidden)]
#[derive(Debug)]
pub struct Checked<T>(T);

impl<T> Checked<T> {
    /// For the builders.
    pub(crate) fn new(value: T) -> Self {
        Self(value)
    }

    /// What was checked, for the adapter to start.
    pub fn into_inner(self) -> T {
        self.0
    }
}

/// Converts a stream or topic argument (`u32`, `&str` or [`Identifier`]) to an identifier.
#[doc(hidden)]
pub fn identifier(
    value: impl TryInto<Identifier, Error: Into<ClientError>>,
) -> Result<Identifier, ClientError> {
    value.try_into().map_err(Into::into)
}

/// Gives every message without a producer timestamp `now_micros` (µs since the Unix epoch),
/// as the SDK does; timestamps the caller set are kept.
#[doc(hidden)]
pub fn stamp_origin_timestamps(messages: &mut [Message], now_micros: u64) {
    for message in messages.iter_mut().filter(|m| m.origin_timestamp == 0) {
        message.origin_timestamp = now_micros;
    }
}

/// How a failed TCP connect is reported to the router: the kinds that mean "nobody
/// answered there" are `Unreachable`, and any other error is `Other` with its message.
#[doc(hidden)]
pub fn connect_error(error: &io::Error) -> ConnectError {
    let unreachable = matches!(
        error.kind(),
        io::ErrorKind::ConnectionRefused
            | io::ErrorKind::TimedOut
            | io::ErrorKind::HostUnreachable
            | io::ErrorKind::NetworkUnreachable
            | io::ErrorKind::AddrNotAvailable
    );
    if unreachable {
        ConnectError::Unreachable
    } else {
        ConnectError::Other(error.to_string())
    }
}

/// What an event says about the session a client's `connect` waits for (read by
/// [`ConnectWait`]): `Some(Ok(()))`
/// once the coordinator link has signed in, `Some(Err(..))` when the credentials were
/// refused for good, `None` for any other event (a refusal that may pass, such as a node
/// that is not ready, leaves the router trying the next node).
pub(crate) fn session_signal(event: &Event) -> Option<Result<(), ClientError>> {
    match event {
        Event::LinkUp {
            role: LinkRole::Coordinator,
            ..
        } => Some(Ok(())),
        Event::SignInRefused {
            code, fatal: true, ..
        } => Some(Err(ClientError::Request(RequestError::SignIn {
            code: *code,
        }))),
        Event::LinkUp { .. }
        | Event::LinkDown { .. }
        | Event::RouteLearned { .. }
        | Event::Refused { .. }
        | Event::DiscoveryByRefusal
        | Event::SignInRefused { .. }
        | Event::CredentialsChanged
        | Event::SessionMoved { .. }
        | Event::ProtocolViolation { .. }
        | Event::ReplaysExhausted { .. }
        | Event::PartitionsChanged { .. } => None,
    }
}
