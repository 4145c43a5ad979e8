//! Submitting: at once or refused (`submit`), or waiting in line for room
//! (`submit_waiting`, see [`super::waiting`]), and letting the line in as room frees up.

use std::time::Instant;

use tracing::debug;

use super::{Output, Router};
use crate::ids::RequestId;
use crate::request::{Request, RequestError, SubmitError};

impl Router {
    /// Accepts a request, or refuses it at once: `QueueFull` when the router has no room
    /// for it, or while calls wait for room (a try never jumps the line). An accepted
    /// request completes exactly once, through `Output::Completed`.
    pub fn submit(&mut self, now: Instant, request: Request) -> Result<RequestId, SubmitError> {
        let now = self.clock(now);
        let request = self.check_request(request)?;
        if let Some(limit) = self.waiting.blocking_limit() {
            return Err(SubmitError::QueueFull { limit });
        }
        let id = self
            .admit_checked(now, request)
            .map_err(|(error, _)| error)?;
        self.settle(now);
        Ok(id)
    }

    /// Accepts a request, waiting for room until `deadline` when the router has none (all
    /// of `Config::max_pending_requests`, or its partition's `max_pending_per_lane`, are
    /// taken) or when other calls wait: it then waits behind every call waiting already,
    /// first in first out, and is let in as room frees up. A request that waits past
    /// `deadline` completes with `RequestError::QueueFull` naming the bound it waited on;
    /// one still waiting at `shutdown` completes with `RequestError::Closed`; `withdraw`
    /// takes it out of line. Refused at once with `QueueFull` when the line already holds
    /// `max_pending_requests` calls, or when there is no room and `deadline` is not later
    /// than `now`. The id returned is the one its `Output::Completed` carries, whether it
    /// was let in at once or waited.
    ///
    /// Once let in, it has the full `request_timeout`. Should routing, after accepting it,
    /// find its partition's queue full (it waited for the topic's partition count), it
    /// goes back to the front of the line until `deadline`.
    pub fn submit_waiting(
        &mut self,
        now: Instant,
        request: Request,
        deadline: Instant,
    ) -> Result<RequestId, SubmitError> {
        let now = self.clock(now);
        let request = self.check_request(request)?;
        let id = self.enter_line(now, request, deadline)?;
        self.settle(now);
        Ok(id)
    }

    fn enter_line(
        &mut self,
        now: Instant,
        request: Request,
        deadline: Instant,
    ) -> Result<RequestId, SubmitError> {
        // While anything waits, a new request waits behind it even if routing would take
        // it now: otherwise one caller's sends to one partition could be reordered.
        let (request, limit) = match self.waiting.blocking_limit() {
            Some(limit) => (request, limit),
            None => match self.admit_checked(now, request) {
                Ok(id) => {
                    self.waiting.admitted(id, id, deadline);
                    return Ok(id);
                }
                Err((SubmitError::QueueFull { limit }, request)) => (*request, limit),
                Err((error, _)) => return Err(error),
            },
        };
        if deadline <= now {
            return Err(SubmitError::QueueFull { limit });
        }
        let caller = self.waiting.ticket();
        let capacity = self.waiting.capacity();
        self.waiting
            .push_back(caller, request, deadline, limit)
            .map_err(|_| SubmitError::QueueFull { limit: capacity })?;
        debug!(request = %caller, limit, "waiting for room");
        Ok(caller)
    }

    /// Ends the waits that are over, then lets the line in, first come first, while
    /// routing has room. Every input ends here: room frees up when a request completes,
    /// and also when the attempt of one that timed out on the wire ends, which completes
    /// nothing.
    pub(super) fn serve_waiting(&mut self, now: Instant) {
        for (caller, limit) in self.waiting.take_expired(now) {
            debug!(request = %caller, limit, "waited for room past its deadline");
            self.outputs.push_back(Output::Completed {
                id: caller,
                outcome: Err(RequestError::QueueFull { limit }),
            });
        }
        // Each round lets at least one request in, so the line's length bounds the rounds.
        loop {
            let mut let_in = false;
            while let Some((caller, request, spot)) = self.waiting.pop_front() {
                match self.admit_checked(now, request) {
                    Ok(id) => {
                        self.waiting.admitted(id, caller, spot.deadline);
                        let_in = true;
                    }
                    Err((SubmitError::QueueFull { limit }, request)) => {
                        self.waiting.restore(caller, *request, spot, limit);
                        break;
                    }
                    Err((_, _)) => {
                        // Shape and closing were checked when it joined the line, and a
                        // closing router empties the line first: not expected.
                        self.outputs.push_back(Output::Completed {
                            id: caller,
                            outcome: Err(RequestError::Closed),
                        });
                    }
                }
            }
            if !let_in {
                return;
            }
            // What was let in is placed now; requests it completed at once free room.
            self.run_turns(now);
            self.refile_links();
            if self.waiting.is_empty() {
                return;
            }
        }
    }

    /// Routing refused the accepted request `id` for room (`limit`) after all (it waited
    /// for its topic's partition count, then found its partition's queue full). A call
    /// that may still wait waits again, first in line: it was accepted before every
    /// request waiting now. Whether it did.
    pub(super) fn wait_again(&mut self, id: RequestId, limit: usize) -> bool {
        if self.closed {
            return false;
        }
        let unsent = self
            .requests
            .get(&id)
            .is_some_and(|entry| entry.commit_for.is_none() && !entry.committing);
        if !unsent {
            return false;
        }
        let Some((caller, wait_until)) = self.waiting.may_wait_again(id, self.last_now) else {
            return false;
        };
        let Some(entry) = self.requests.remove(&id) else {
            return false;
        };
        let mut request = entry.request;
        if let (true, Request::Poll(poll)) = (entry.group_auto_commit, &mut request) {
            poll.auto_commit = true;
        }
        debug!(request = %caller, limit, "refused for room after it was accepted; waits again");
        self.waiting.push_front(caller, request, wait_until, limit);
        true
    }

    /// Takes a waiting request out of line, completing it as withdrawn; whether it waited.
    pub(super) fn withdraw_waiting(&mut self, now: Instant, caller: RequestId) -> bool {
        if !self.waiting.remove(caller) {
            return false;
        }
        debug!(request = %caller, "withdrawn by its caller while it waited for room");
        self.outputs.push_back(Output::Completed {
            id: caller,
            outcome: Err(RequestError::Withdrawn),
        });
        // It may have been first in line, holding the others back.
        self.settle(now);
        true
    }

    /// Ends every wait for room: the router is shutting down.
    pub(super) fn close_line(&mut self) {
        for caller in self.waiting.take_all() {
            self.outputs.push_back(Output::Completed {
                id: caller,
                outcome: Err(RequestError::Closed),
            });
        }
    }
}
