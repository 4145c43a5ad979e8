//! Where the outcome of one submitted request goes: a caller blocked on a channel, or a
//! function the I/O thread runs (a background producer's batch, whose thread must not
//! block on any one answer while others are in flight).

use std::fmt;
use std::sync::mpsc;

use iggy_route_core::Reply;
use iggy_route_core::client::ClientError;

/// A request's answer, as the I/O thread hands it on.
pub(crate) type Outcome = Result<Reply, ClientError>;

/// Runs on the I/O thread with a request's outcome: it must return quickly and never wait
/// for another request (every socket of the client waits while it runs).
pub(crate) type Callback = Box<dyn FnOnce(Outcome) + Send>;

/// Where one request's outcome goes. Every request is answered exactly once: a responder
/// dropped unanswered (the I/O thread gone, or the client shut down before the router
/// took the request) answers `ClientError::Closed`.
pub(crate) enum Responder {
    /// A caller waiting on the other end of the channel (a dropped sender reads as
    /// `Closed` there).
    Caller(mpsc::SyncSender<Outcome>),
    /// A function to run with the outcome; `None` once it has run.
    Callback(Option<Callback>),
}

impl Responder {
    /// A responder that runs `callback` with the outcome.
    pub(crate) fn callback(callback: impl FnOnce(Outcome) + Send + 'static) -> Self {
        Self::Callback(Some(Box::new(callback)))
    }

    /// Hands the outcome on. A caller that stopped waiting is not an error.
    pub(crate) fn respond(mut self, outcome: Outcome) {
        match &mut self {
            Self::Caller(sender) => {
                let _ = sender.send(outcome);
            }
            Self::Callback(callback) => {
                if let Some(callback) = callback.take() {
                    callback(outcome);
                }
            }
        }
    }
}

impl Drop for Responder {
    fn drop(&mut self) {
        if let Self::Callback(callback) = self
            && let Some(callback) = callback.take()
        {
            callback(Err(ClientError::Closed));
        }
    }
}

// By hand: a boxed function has no `Debug`.
impl fmt::Debug for Responder {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::Caller(_) => f.write_str("Responder::Caller"),
            Self::Callback(_) => f.write_str("Responder::Callback"),
        }
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use std::sync::{Arc, Mutex};

    use super::*;

    fn recording() -> (Responder, Arc<Mutex<Vec<String>>>) {
        let seen = Arc::new(Mutex::new(Vec::new()));
        let record = Arc::clone(&seen);
        let responder = Responder::callback(move |outcome: Outcome| {
            record
                .lock()
                .unwrap()
                .push(format!("{:?}", outcome.map(|_| ())));
        });
        (responder, seen)
    }

    #[test]
    fn a_callback_runs_once_with_the_outcome() {
        let (responder, seen) = recording();
        responder.respond(Ok(Reply::OffsetStored));
        assert_eq!(*seen.lock().unwrap(), ["Ok(())"]);
    }

    #[test]
    fn a_callback_dropped_unanswered_hears_closed() {
        let (responder, seen) = recording();
        drop(responder);
        assert_eq!(*seen.lock().unwrap(), ["Err(Closed)"]);
    }

    #[test]
    fn a_caller_that_stopped_waiting_is_no_error() {
        let (sender, receiver) = mpsc::sync_channel(1);
        drop(receiver);
        Responder::Caller(sender).respond(Err(ClientError::Closed));
    }
}
