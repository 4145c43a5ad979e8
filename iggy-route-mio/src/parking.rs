//! Requests waiting for room in the router (issue #13's backpressure).
//!
//! The router refuses a request at once when `max_pending_requests` (or a partition's
//! `max_pending_per_lane`) is reached. A call that may wait is parked here instead and
//! submitted again, in arrival order, when requests complete. Order matters: a parked
//! request is never overtaken by a later one, even one the router would take now (else
//! one caller's sends to a partition could be reordered). Each parked request waits until
//! its own deadline at most; the lot holds a bounded number of them.

use std::collections::{BTreeMap, BTreeSet};
use std::time::Instant;

use iggy_route_core::Request;

use crate::responder::Responder;

/// One parked request.
#[derive(Debug)]
pub(crate) struct Parked {
    pub(crate) request: Request,
    pub(crate) responder: Responder,
    /// The bound the caller is told of if the wait ends without room: the one the router
    /// last named for this request.
    pub(crate) limit: usize,
    place: Place,
}

/// When a parked request stops waiting, and where it stands in arrival order.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Place {
    /// When the caller stops waiting for room and gets `QueueFull`.
    deadline: Instant,
    /// Given by [`ParkedRequests::park`].
    arrival: u64,
}

impl Parked {
    /// A request that has not been parked yet.
    pub(crate) fn new(
        request: Request,
        responder: Responder,
        deadline: Instant,
        limit: usize,
    ) -> Self {
        let place = Place {
            deadline,
            arrival: 0,
        };
        Self {
            request,
            responder,
            limit,
            place,
        }
    }

    /// Takes the request out to submit it; [`Parked::resume`] makes a copy of it parked
    /// again in the same place, should the router refuse it.
    pub(crate) fn into_parts(self) -> (Request, Responder, Place) {
        (self.request, self.responder, self.place)
    }

    /// A request refused for want of room (`limit`), back in its `place`.
    pub(crate) fn resume(
        request: Request,
        responder: Responder,
        place: Place,
        limit: usize,
    ) -> Self {
        Self {
            request,
            responder,
            limit,
            place,
        }
    }
}

/// The parked requests, in arrival order, with their deadlines indexed.
#[derive(Debug)]
pub(crate) struct ParkedRequests {
    by_arrival: BTreeMap<u64, Parked>,
    deadlines: BTreeSet<(Instant, u64)>,
    next_arrival: u64,
    capacity: usize,
}

impl ParkedRequests {
    /// A lot that holds at most `capacity` requests.
    pub(crate) fn new(capacity: usize) -> Self {
        Self {
            by_arrival: BTreeMap::new(),
            deadlines: BTreeSet::new(),
            next_arrival: 0,
            capacity,
        }
    }

    pub(crate) fn is_empty(&self) -> bool {
        self.by_arrival.is_empty()
    }

    #[cfg(test)]
    pub(crate) fn len(&self) -> usize {
        self.by_arrival.len()
    }

    /// Parks a request behind every other; hands it back when the lot is full.
    pub(crate) fn park(&mut self, mut parked: Parked) -> Option<Parked> {
        if self.by_arrival.len() >= self.capacity {
            return Some(parked);
        }
        parked.place.arrival = self.next_arrival;
        self.next_arrival += 1;
        self.insert(parked);
        None
    }

    /// Takes the longest-waiting request out, to submit it.
    pub(crate) fn pop_front(&mut self) -> Option<Parked> {
        let (_, parked) = self.by_arrival.pop_first()?;
        self.deadlines
            .remove(&(parked.place.deadline, parked.place.arrival));
        Some(parked)
    }

    /// Puts back a request taken by [`Self::pop_front`] that found no room: it keeps its
    /// place ahead of every later arrival (and may exceed the capacity by itself, as it
    /// was counted in it when taken out).
    pub(crate) fn restore(&mut self, parked: Parked) {
        self.insert(parked);
    }

    /// The earliest deadline of a parked request.
    pub(crate) fn next_deadline(&self) -> Option<Instant> {
        self.deadlines.first().map(|(at, _)| *at)
    }

    /// Takes out every request whose deadline is `now` or earlier, in deadline order.
    pub(crate) fn take_expired(&mut self, now: Instant) -> Vec<Parked> {
        let mut expired = Vec::new();
        while let Some(&(at, arrival)) = self.deadlines.first() {
            if at > now {
                break;
            }
            self.deadlines.pop_first();
            if let Some(parked) = self.by_arrival.remove(&arrival) {
                expired.push(parked);
            }
        }
        expired
    }

    /// Takes out every request, in arrival order.
    pub(crate) fn take_all(&mut self) -> Vec<Parked> {
        self.deadlines.clear();
        std::mem::take(&mut self.by_arrival).into_values().collect()
    }

    fn insert(&mut self, parked: Parked) {
        let Place { deadline, arrival } = parked.place;
        self.deadlines.insert((deadline, arrival));
        self.by_arrival.insert(arrival, parked);
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use std::sync::mpsc;
    use std::time::Duration;

    use iggy_route_core::AdminRequest;
    use iggy_route_core::wire::Identifier;

    use super::*;

    /// A parked request told apart by its stream id.
    fn parked(stream: u32, deadline: Instant) -> Parked {
        let (sender, _) = mpsc::sync_channel(1);
        let request = Request::Admin(AdminRequest::GetStream {
            stream: Identifier::Numeric(stream),
        });
        Parked::new(request, Responder::Caller(sender), deadline, 4)
    }

    fn stream_of(parked: &Parked) -> u32 {
        let Request::Admin(AdminRequest::GetStream {
            stream: Identifier::Numeric(stream),
        }) = &parked.request
        else {
            panic!("not a test request: {:?}", parked.request);
        };
        *stream
    }

    #[test]
    fn requests_leave_in_arrival_order_and_a_restored_one_keeps_its_place() {
        let now = Instant::now();
        let mut lot = ParkedRequests::new(8);
        for stream in 1..=3 {
            assert!(
                lot.park(parked(stream, now + Duration::from_secs(1)))
                    .is_none()
            );
        }
        let first = lot.pop_front().unwrap();
        assert_eq!(stream_of(&first), 1);
        assert!(lot.park(parked(4, now + Duration::from_secs(1))).is_none());
        // As `IoLoop::submit_if_room` does: the request goes to the router, a copy comes back.
        let (request, responder, place) = first.into_parts();
        lot.restore(Parked::resume(request, responder, place, 4));
        let order: Vec<u32> = std::iter::from_fn(|| lot.pop_front())
            .map(|p| stream_of(&p))
            .collect();
        assert_eq!(order, [1, 2, 3, 4]);
        assert!(lot.is_empty());
    }

    #[test]
    fn a_full_lot_hands_the_request_back() {
        let now = Instant::now();
        let mut lot = ParkedRequests::new(2);
        assert!(lot.park(parked(1, now)).is_none());
        assert!(lot.park(parked(2, now)).is_none());
        let refused = lot.park(parked(3, now)).unwrap();
        assert_eq!(stream_of(&refused), 3);
        assert_eq!(lot.len(), 2);
    }

    #[test]
    fn only_requests_past_their_deadline_expire_whatever_their_place() {
        let now = Instant::now();
        let mut lot = ParkedRequests::new(8);
        // Deadlines need not follow arrival order (two callers racing to the channel).
        assert!(lot.park(parked(1, now + Duration::from_secs(5))).is_none());
        assert!(lot.park(parked(2, now + Duration::from_secs(1))).is_none());
        assert!(lot.park(parked(3, now + Duration::from_secs(2))).is_none());
        assert_eq!(lot.next_deadline(), Some(now + Duration::from_secs(1)));
        assert!(lot.take_expired(now).is_empty());
        let expired: Vec<u32> = lot
            .take_expired(now + Duration::from_secs(2))
            .iter()
            .map(stream_of)
            .collect();
        assert_eq!(expired, [2, 3]);
        assert_eq!(lot.next_deadline(), Some(now + Duration::from_secs(5)));
        assert_eq!(stream_of(&lot.pop_front().unwrap()), 1);
        assert_eq!(lot.next_deadline(), None);
    }

    #[test]
    fn take_all_empties_the_lot_in_arrival_order() {
        let now = Instant::now();
        let mut lot = ParkedRequests::new(8);
        assert!(lot.park(parked(1, now + Duration::from_secs(3))).is_none());
        assert!(lot.park(parked(2, now + Duration::from_secs(1))).is_none());
        let all: Vec<u32> = lot.take_all().iter().map(stream_of).collect();
        assert_eq!(all, [1, 2]);
        assert!(lot.is_empty());
        assert_eq!(lot.next_deadline(), None);
    }
}
