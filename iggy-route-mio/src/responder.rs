//! Where the outcome of one submitted request goes: a caller blocked on a channel.

use std::sync::mpsc;

use iggy_route_core::Reply;
use iggy_route_core::client::ClientError;

/// A request's answer, as the I/O thread hands it on.
pub(crate) type Outcome = Result<Reply, ClientError>;

/// Where one request's outcome goes. Every request is answered exactly once: a responder
/// dropped unanswered (the I/O thread gone, or the client shut down before the router
/// took the request) reads as `ClientError::Closed` on the other end.
#[derive(Debug)]
pub(crate) enum Responder {
    /// A caller waiting on the other end of the channel.
    Caller(mpsc::SyncSender<Outcome>),
}

impl Responder {
    /// Hands the outcome on. A caller that stopped waiting is not an error.
    pub(crate) fn respond(self, outcome: Outcome) {
        match self {
            Self::Caller(sender) => {
                let _ = sender.send(outcome);
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_caller_that_stopped_waiting_is_no_error() {
        let (sender, receiver) = mpsc::sync_channel(1);
        drop(receiver);
        Responder::Caller(sender).respond(Err(ClientError::Closed));
    }
}
