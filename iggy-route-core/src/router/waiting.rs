//! Requests that wait for room: the line of calls that found the router full (all its
//! `max_pending_requests`, or its partition's `max_pending_per_lane`) and may wait, each
//! until its own deadline, for a place.
//!
//! The line is first in, first out: while anything waits, a later call waits behind it
//! even if the router would take it now, so one caller's sends to one partition are never
//! reordered. It holds at most `max_pending_requests` requests. A waiting request has a
//! caller's id of its own (a ticket, from a range routing never reaches); once admitted,
//! the id routing gives it is mapped back to the caller's in every completion, so the
//! caller sees one id from `submit_waiting` to `Output::Completed`.

use std::collections::{BTreeMap, BTreeSet};
use std::time::Instant;

use crate::ids::RequestId;
use crate::request::Request;

/// Tickets start here: routing numbers its requests from 1 up and never gets this far.
const FIRST_TICKET: u64 = 1 << 63;

/// Places in line: a request put back at the front goes below every place given so far,
/// a new one above.
const MIDDLE_PLACE: u64 = 1 << 62;

/// One request in line.
#[derive(Debug)]
struct Waiter<T> {
    request: Request,
    spot: Spot<T>,
    /// The bound that kept it out last, named in its `QueueFull`.
    limit: usize,
}

/// Where a request taken out of line stood, to put it back there.
#[derive(Debug, Clone, Copy)]
pub(super) struct Spot<T = Instant> {
    /// Past this instant the caller gets `QueueFull` instead of waiting longer.
    pub(super) deadline: T,
    place: u64,
}

/// An admitted request whose call may wait: the caller's id, and until when the call may
/// still wait should routing refuse the request for room after it accepted it.
#[derive(Debug, Clone, Copy)]
struct Admitted<T> {
    caller: RequestId,
    wait_until: T,
}

/// The line of waiting requests, with their deadlines indexed, and the callers' ids of
/// the admitted requests whose calls may wait.
///
/// Generic over its instants only so that its own tests can use plain numbers for them:
/// the line compares instants and never reads a clock; the router's line uses `Instant`.
#[derive(Debug)]
pub(super) struct WaitingLine<T = Instant> {
    waiters: BTreeMap<RequestId, Waiter<T>>,
    order: BTreeMap<u64, RequestId>,
    due: BTreeSet<(T, RequestId)>,
    /// By routing's id.
    admitted: BTreeMap<RequestId, Admitted<T>>,
    /// Routing's id of each admitted caller's id, for a withdrawal by the caller's id.
    routing_ids: BTreeMap<RequestId, RequestId>,
    next_ticket: u64,
    front: u64,
    back: u64,
    capacity: usize,
}

impl<T: Copy + Ord> WaitingLine<T> {
    /// A line that holds at most `capacity` requests.
    pub(super) fn new(capacity: usize) -> Self {
        Self {
            waiters: BTreeMap::new(),
            order: BTreeMap::new(),
            due: BTreeSet::new(),
            admitted: BTreeMap::new(),
            routing_ids: BTreeMap::new(),
            next_ticket: FIRST_TICKET,
            front: MIDDLE_PLACE,
            back: MIDDLE_PLACE,
            capacity,
        }
    }

    pub(super) fn is_empty(&self) -> bool {
        self.order.is_empty()
    }

    pub(super) fn capacity(&self) -> usize {
        self.capacity
    }

    /// The bound the first request in line waits on, `None` when nothing waits: a call
    /// that sees `Some` must wait behind it (or be refused with it, for a try).
    pub(super) fn blocking_limit(&self) -> Option<usize> {
        let (_, id) = self.order.first_key_value()?;
        self.waiters.get(id).map(|waiter| waiter.limit)
    }

    /// A caller's id for a request that starts waiting.
    pub(super) fn ticket(&mut self) -> RequestId {
        let id = RequestId(self.next_ticket);
        self.next_ticket += 1;
        id
    }

    /// Puts a request at the back of the line; hands it back when the line is full.
    pub(super) fn push_back(
        &mut self,
        caller: RequestId,
        request: Request,
        deadline: T,
        limit: usize,
    ) -> Result<(), Request> {
        if self.order.len() >= self.capacity {
            return Err(request);
        }
        self.back += 1;
        let place = self.back;
        self.insert(caller, request, deadline, limit, place);
        Ok(())
    }

    /// Puts a request first in line: it was admitted (or taken out to be) before every
    /// request waiting now. Never refused for capacity: it had its place before.
    pub(super) fn push_front(
        &mut self,
        caller: RequestId,
        request: Request,
        deadline: T,
        limit: usize,
    ) {
        self.front -= 1;
        let place = self.front;
        self.insert(caller, request, deadline, limit, place);
    }

    fn insert(
        &mut self,
        caller: RequestId,
        request: Request,
        deadline: T,
        limit: usize,
        place: u64,
    ) {
        self.order.insert(place, caller);
        self.due.insert((deadline, caller));
        let spot = Spot { deadline, place };
        let waiter = Waiter {
            request,
            spot,
            limit,
        };
        self.waiters.insert(caller, waiter);
    }

    /// Takes the first request in line out, to offer it to routing.
    pub(super) fn pop_front(&mut self) -> Option<(RequestId, Request, Spot<T>)> {
        let (_, caller) = self.order.pop_first()?;
        let waiter = self.waiters.remove(&caller)?;
        self.due.remove(&(waiter.spot.deadline, caller));
        Some((caller, waiter.request, waiter.spot))
    }

    /// Puts back a request taken by [`Self::pop_front`] that found no room, in its spot,
    /// with the bound that kept it out.
    pub(super) fn restore(
        &mut self,
        caller: RequestId,
        request: Request,
        spot: Spot<T>,
        limit: usize,
    ) {
        self.insert(caller, request, spot.deadline, limit, spot.place);
    }

    /// Takes a request out of the line wherever it stands (its caller withdrew it);
    /// whether it was there.
    pub(super) fn remove(&mut self, caller: RequestId) -> bool {
        self.take(caller).is_some()
    }

    fn take(&mut self, caller: RequestId) -> Option<Waiter<T>> {
        let waiter = self.waiters.remove(&caller)?;
        self.order.remove(&waiter.spot.place);
        self.due.remove(&(waiter.spot.deadline, caller));
        Some(waiter)
    }

    /// The earliest deadline of a waiting request.
    pub(super) fn next_deadline(&self) -> Option<T> {
        self.due.first().map(|(at, _)| *at)
    }

    /// Takes out every request whose deadline is `now` or earlier, in deadline order, with
    /// the bound each waited on.
    pub(super) fn take_expired(&mut self, now: T) -> Vec<(RequestId, usize)> {
        let mut expired = Vec::new();
        while self.due.first().is_some_and(|(at, _)| *at <= now) {
            let Some((_, caller)) = self.due.pop_first() else {
                break;
            };
            if let Some(waiter) = self.waiters.remove(&caller) {
                self.order.remove(&waiter.spot.place);
                expired.push((caller, waiter.limit));
            }
        }
        expired
    }

    /// Takes every waiting request out, in line order (shutdown).
    pub(super) fn take_all(&mut self) -> Vec<RequestId> {
        let callers: Vec<RequestId> = self.order.values().copied().collect();
        self.order.clear();
        self.waiters.clear();
        self.due.clear();
        callers
    }

    /// Notes that routing admitted a waiting call's request as `routing_id`.
    pub(super) fn admitted(&mut self, routing_id: RequestId, caller: RequestId, wait_until: T) {
        let entry = Admitted { caller, wait_until };
        self.admitted.insert(routing_id, entry);
        if caller != routing_id {
            self.routing_ids.insert(caller, routing_id);
        }
    }

    /// Routing's id of a caller's admitted request (the caller's id itself when it was
    /// never mapped).
    pub(super) fn routing_id(&self, caller: RequestId) -> RequestId {
        self.routing_ids.get(&caller).copied().unwrap_or(caller)
    }

    /// The request routing completes as `routing_id` is over: its caller's id.
    pub(super) fn completed(&mut self, routing_id: RequestId) -> RequestId {
        let Some(admitted) = self.admitted.remove(&routing_id) else {
            return routing_id;
        };
        self.routing_ids.remove(&admitted.caller);
        admitted.caller
    }

    /// Whether the admitted request `routing_id`, refused for room after routing accepted
    /// it, belongs to a call that may still wait at `now`; if so it is the caller's id, and
    /// the request is no longer counted as admitted.
    pub(super) fn may_wait_again(
        &mut self,
        routing_id: RequestId,
        now: T,
    ) -> Option<(RequestId, T)> {
        let admitted = self.admitted.get(&routing_id)?;
        if admitted.wait_until <= now {
            return None;
        }
        let admitted = *admitted;
        self.completed(routing_id);
        Some((admitted.caller, admitted.wait_until))
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]

    use super::*;
    use crate::request::AdminRequest;
    use crate::wire::Identifier;

    fn request() -> Request {
        Request::Admin(AdminRequest::GetTopic {
            stream: Identifier::Numeric(1),
            topic: Identifier::Numeric(1),
        })
    }

    fn order(line: &mut WaitingLine<u64>) -> Vec<RequestId> {
        std::iter::from_fn(|| line.pop_front().map(|(id, _, _)| id)).collect()
    }

    #[test]
    fn a_request_put_back_first_goes_ahead_of_every_waiter_and_tickets_never_repeat() {
        // Instants as milliseconds: the line only compares them.
        let now: u64 = 1_000;
        let mut line = WaitingLine::new(2);
        let (a, b) = (line.ticket(), line.ticket());
        assert_ne!(a, b);
        assert!(a.0 >= FIRST_TICKET);
        line.push_back(a, request(), now + 1_000, 3).unwrap();
        line.push_back(b, request(), now + 1_000, 3).unwrap();
        // Full for newcomers, but not for a request that had its place before.
        let late = line.ticket();
        assert!(line.push_back(late, request(), now, 3).is_err());
        line.push_front(RequestId(7), request(), now + 1_000, 5);
        assert_eq!(line.blocking_limit(), Some(5));
        assert_eq!(order(&mut line), [RequestId(7), a, b]);
        assert!(line.is_empty());
    }

    #[test]
    fn a_deadline_equal_to_now_is_over_and_a_restored_request_keeps_its_place() {
        // Instants as milliseconds: the line only compares them.
        let now: u64 = 1_000;
        let mut line = WaitingLine::new(8);
        let (a, b, c) = (line.ticket(), line.ticket(), line.ticket());
        line.push_back(a, request(), now + 2_000, 1).unwrap();
        line.push_back(b, request(), now, 2).unwrap();
        line.push_back(c, request(), now + 1_000, 1).unwrap();
        assert_eq!(line.next_deadline(), Some(now));
        assert_eq!(line.take_expired(now), [(b, 2)]);
        let (first, taken, spot) = line.pop_front().unwrap();
        assert_eq!(first, a);
        line.restore(first, taken, spot, 4);
        assert_eq!(line.blocking_limit(), Some(4));
        assert_eq!(line.next_deadline(), Some(now + 1_000));
        assert!(line.remove(c));
        assert!(!line.remove(c), "removed once");
        assert_eq!(line.take_all(), [a]);
        assert_eq!(line.next_deadline(), None);
    }

    #[test]
    fn an_admitted_call_maps_back_to_its_callers_id_once_and_waits_again_only_in_time() {
        // Instants as milliseconds: the line only compares them.
        let now: u64 = 1_000;
        let mut line = WaitingLine::new(8);
        let caller = line.ticket();
        line.admitted(RequestId(3), caller, now + 1_000);
        assert_eq!(line.routing_id(caller), RequestId(3));
        // Its wait ends at `now + 1s`: refused for room then, it may not wait again.
        let later = now + 1_000;
        assert_eq!(line.may_wait_again(RequestId(3), later), None);
        assert_eq!(
            line.may_wait_again(RequestId(3), now),
            Some((caller, now + 1_000))
        );
        // Waiting again, it is no longer admitted: routing's id means nothing more.
        assert_eq!(line.completed(RequestId(3)), RequestId(3));
        assert_eq!(line.routing_id(caller), caller);
        // A request admitted at once keeps its own id.
        line.admitted(RequestId(4), RequestId(4), later);
        assert_eq!(line.completed(RequestId(4)), RequestId(4));
        assert_eq!(line.completed(RequestId(9)), RequestId(9));
    }
}
