//! The requests the router holds: each caller's request with its payload, from `submit`
//! until its `Completed`, and the reply of its last served attempt. The routing layer sees
//! only their facts.

use std::time::Instant;

use tracing::warn;

use super::{Output, Router};
use crate::ids::{LinkId, RequestId};
use crate::request::{Reply, Request, RequestError, SubmitError};

/// One accepted request.
#[derive(Debug)]
pub(super) struct Entry {
    pub(super) request: Request,
    /// When it is over whatever happens (what the routing layer completes it at).
    pub(super) deadline: Instant,
    /// The partition routing chose for it, as of its latest write.
    pub(super) partition: Option<u32>,
    /// The decoded answer of its latest served attempt, handed to the caller when routing
    /// completes the request with `Ok`.
    pub(super) reply: Option<Reply>,
    /// The link of its latest write: a 57 replay waiting there ends with the request.
    pub(super) link: Option<LinkId>,
    /// The sends routing merged into this one's next frame (see `Decision::Write`).
    pub(super) riders: Vec<RequestId>,
}

impl Router {
    /// Checks a request's shape, stamps its message ids and hands its facts to routing.
    pub(super) fn accept(
        &mut self,
        now: Instant,
        request: Request,
    ) -> Result<RequestId, SubmitError> {
        // Ids are stamped first, also for a request refused below, so that the seeded id
        // sequence does not depend on which requests were accepted.
        let request = self.stamp_message_ids(request);
        if self.closed {
            return Err(SubmitError::Closed);
        }
        request.validate(self.config.max_frame_size)?;
        let id = self.routing.admit(now, request.facts())?;
        let entry = Entry {
            request,
            deadline: now + self.config.request_timeout,
            partition: None,
            reply: None,
            link: None,
            riders: Vec::new(),
        };
        self.requests.insert(id, entry);
        Ok(id)
    }

    /// A request is over: the caller gets the reply kept for it, or the error.
    pub(super) fn finish_request(&mut self, id: RequestId, outcome: Result<(), RequestError>) {
        let entry = self.requests.remove(&id);
        if let Some(link) = entry.as_ref().and_then(|entry| entry.link)
            && self
                .links
                .get(&link)
                .and_then(|link| link.in_flight.as_ref())
                .is_some_and(|in_flight| in_flight.replay_at.is_some())
        {
            // A replay waiting on that link was bounded by this request's deadline.
            self.links.touch(link);
        }
        let reply = entry.and_then(|entry| entry.reply);
        let outcome = match (outcome, reply) {
            (Ok(()), Some(reply)) => Ok(reply),
            (Ok(()), None) => {
                // Routing completes with `Ok` only after a served attempt, whose reply is
                // kept; were that ever not so, the caller must not be told of a success.
                warn!(request = %id, "completed without a reply; reported as unknown");
                Err(RequestError::OutcomeUnknown { node: None })
            }
            (Err(error), _) => Err(error),
        };
        self.outputs.push_back(Output::Completed { id, outcome });
    }
}
