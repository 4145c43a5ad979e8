//! Requests that met a full router and wait, in call order, for room (backpressure).
//!
//! The router refuses a request with `QueueFull` when it holds `max_pending_requests`
//! requests, or `max_pending_per_lane` for the request's partition. Instead of handing that
//! to the caller, the driver parks the request here and offers it again after every input
//! (room frees up when a request completes). The queue is strictly first in, first out: while anything waits here, a new
//! request joins the back even if the router would take it now, so one caller's sends to
//! one partition are never reordered.
//!
//! Every wait is bounded twice: by the number of parked requests (the queue's capacity,
//! beyond which a caller gets `QueueFull` at once) and by each request's deadline (its
//! call's start plus the request timeout, past which it gets `QueueFull`).

use std::collections::VecDeque;
use std::time::Instant;

use iggy_route_core::Request;
use iggy_route_core::client::ClientError;

use crate::driver::ReplySender;

/// One parked request.
#[derive(Debug)]
pub(crate) struct Parked {
    pub(crate) request: Request,
    pub(crate) reply: ReplySender,
    /// Past this instant the caller gets `QueueFull` instead of waiting longer.
    pub(crate) deadline: Instant,
    /// The bound that was hit, for the caller's `QueueFull`.
    pub(crate) limit: usize,
}

impl Parked {
    /// The caller waited as long as it may: the queue it waited behind was full.
    pub(crate) fn give_up(self) {
        // The caller may have stopped waiting; then nobody listens.
        let _ = self
            .reply
            .send(Err(ClientError::QueueFull { limit: self.limit }));
    }

    /// The client shut down while the request waited.
    pub(crate) fn close(self) {
        let _ = self.reply.send(Err(ClientError::Closed));
    }
}

/// The FIFO of parked requests. See the module documentation.
#[derive(Debug)]
pub(crate) struct WaitingRequests {
    queue: VecDeque<Parked>,
    capacity: usize,
}

impl WaitingRequests {
    /// A queue holding at most `capacity` requests (`Config::max_pending_requests`).
    pub(crate) fn new(capacity: usize) -> Self {
        Self {
            queue: VecDeque::new(),
            capacity,
        }
    }

    /// The bound the oldest parked request is waiting on, or `None` when nothing waits. A
    /// new request that sees `Some` must wait behind it (or fail at once, for a `try_`).
    pub(crate) fn blocking_limit(&self) -> Option<usize> {
        self.queue.front().map(|parked| parked.limit)
    }

    /// Parks a request at the back. When the queue is full the caller is told
    /// `QueueFull` at once (the bound is the queue's capacity) and `false` is returned.
    pub(crate) fn park_back(&mut self, mut parked: Parked) -> bool {
        if self.queue.len() >= self.capacity {
            parked.limit = self.capacity;
            parked.give_up();
            return false;
        }
        self.queue.push_back(parked);
        true
    }

    /// Puts back at the front a request taken from it (or one accepted before every parked
    /// request and then refused for room): it keeps its place. Never refused for capacity,
    /// since it had a place before.
    pub(crate) fn park_front(&mut self, parked: Parked) {
        self.queue.push_front(parked);
    }

    /// Takes the oldest parked request.
    pub(crate) fn pop_front(&mut self) -> Option<Parked> {
        self.queue.pop_front()
    }

    /// When the driver must wake to expire a parked request. Deadlines are their calls'
    /// starts plus one timeout, and calls reach the driver in about the order they were
    /// made, so the front's deadline stands for the earliest; [`Self::expire`] then takes
    /// every request that is due, wherever it is.
    pub(crate) fn next_deadline(&self) -> Option<Instant> {
        self.queue.front().map(|parked| parked.deadline)
    }

    /// Removes every request whose deadline is at or before `now`, oldest first.
    pub(crate) fn expire(&mut self, now: Instant) -> Vec<Parked> {
        if self.queue.iter().all(|parked| parked.deadline > now) {
            return Vec::new();
        }
        let (expired, kept) = std::mem::take(&mut self.queue)
            .into_iter()
            .partition(|parked| parked.deadline <= now);
        self.queue = kept;
        expired.into()
    }

    /// Takes every parked request (shutdown).
    /// Drops the requests whose callers are gone: nothing of them was sent.
    pub(crate) fn forget_abandoned(&mut self) {
        self.queue.retain(|parked| !parked.reply.is_closed());
    }

    pub(crate) fn take_all(&mut self) -> VecDeque<Parked> {
        std::mem::take(&mut self.queue)
    }

    #[cfg(test)]
    pub(crate) fn len(&self) -> usize {
        self.queue.len()
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]

    use std::time::Duration;

    use iggy_route_core::partitioning::Partitioning;
    use iggy_route_core::wire::{Identifier, Message};
    use iggy_route_core::{Request, SendRequest};
    use tokio::sync::oneshot;

    use super::*;

    fn parked(tag: u32, deadline: Instant) -> (Parked, oneshot::Receiver<ReplyOutcome>) {
        let (reply, answer) = oneshot::channel();
        let request = Request::Send(SendRequest {
            stream: Identifier::Numeric(tag),
            topic: Identifier::Numeric(0),
            partitioning: Partitioning::PartitionId(0),
            messages: vec![Message::default()],
        });
        let parked = Parked {
            request,
            reply,
            deadline,
            limit: 4,
        };
        (parked, answer)
    }

    type ReplyOutcome = Result<iggy_route_core::Reply, ClientError>;

    fn stream_of(parked: &Parked) -> Option<u32> {
        if let Request::Send(SendRequest {
            stream: Identifier::Numeric(id),
            ..
        }) = &parked.request
        {
            return Some(*id);
        }
        None
    }

    #[test]
    fn requests_leave_in_the_order_they_were_parked_and_a_put_back_one_keeps_its_place() {
        let later = Instant::now() + Duration::from_secs(60);
        let mut waiting = WaitingRequests::new(8);
        for tag in 0..3 {
            assert!(waiting.park_back(parked(tag, later).0));
        }
        let first = waiting.pop_front().unwrap();
        assert_eq!(stream_of(&first), Some(0));
        waiting.park_front(first);
        let order: Vec<_> = std::iter::from_fn(|| waiting.pop_front())
            .map(|p| stream_of(&p))
            .collect();
        assert_eq!(order, [Some(0), Some(1), Some(2)]);
    }

    #[test]
    fn a_full_queue_refuses_at_once_naming_its_capacity() {
        let later = Instant::now() + Duration::from_secs(60);
        let mut waiting = WaitingRequests::new(2);
        assert!(waiting.park_back(parked(0, later).0));
        assert!(waiting.park_back(parked(1, later).0));
        let (third, mut answer) = parked(2, later);
        assert!(!waiting.park_back(third));
        assert!(matches!(
            answer.try_recv(),
            Ok(Err(ClientError::QueueFull { limit: 2 }))
        ));
        assert_eq!(waiting.len(), 2);
        assert_eq!(waiting.blocking_limit(), Some(4));
    }

    #[test]
    fn expiry_takes_every_due_request_wherever_it_waits_and_tells_its_caller() {
        let now = Instant::now();
        let mut waiting = WaitingRequests::new(8);
        let (due_late, mut due_answer) = parked(1, now);
        assert!(waiting.park_back(parked(0, now + Duration::from_secs(1)).0));
        assert!(waiting.park_back(due_late));
        assert!(waiting.park_back(parked(2, now + Duration::from_secs(2)).0));
        assert_eq!(waiting.next_deadline(), Some(now + Duration::from_secs(1)));
        let expired = waiting.expire(now);
        assert_eq!(expired.len(), 1);
        for parked in expired {
            parked.give_up();
        }
        assert!(matches!(
            due_answer.try_recv(),
            Ok(Err(ClientError::QueueFull { limit: 4 }))
        ));
        let left: Vec<_> = waiting.take_all().iter().map(stream_of).collect();
        assert_eq!(left, [Some(0), Some(2)]);
    }

    #[test]
    fn closing_a_parked_request_tells_its_caller_closed() {
        let (parked, mut answer) = parked(0, Instant::now());
        parked.close();
        assert!(matches!(answer.try_recv(), Ok(Err(ClientError::Closed))));
    }
}
