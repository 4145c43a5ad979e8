//! What the router knows of one node: its address, its backoff after failures, and how
//! many links it was asked to sign in lately.

use std::collections::VecDeque;
use std::time::{Duration, Instant};

/// The window over which sign-ins to one node are counted.
const SIGN_IN_WINDOW: Duration = Duration::from_secs(1);

/// What is known of one node.
#[derive(Debug)]
pub(super) struct Node {
    pub(super) addr: String,
    /// Consecutive failed connection attempts.
    pub(super) failures: u32,
    /// No connection attempt before this instant (the backoff after failures).
    pub(super) retry_at: Option<Instant>,
    /// A link to this node was lost (or failed) since the last one was opened: the next
    /// link opened to it is a reconnect.
    pub(super) lost_link: bool,
    /// When the links opened to it within the last [`SIGN_IN_WINDOW`] were opened, oldest
    /// first: each one signs in. A request the node answers by ending the session, a node
    /// that drops every signed-in link, a cluster that evicts every session: whatever
    /// the cause, no node is asked for more sign-ins than this window holds.
    opened: VecDeque<Instant>,
}

impl Node {
    pub(super) fn new(addr: &str) -> Self {
        Self {
            addr: addr.to_owned(),
            failures: 0,
            retry_at: None,
            lost_link: false,
            opened: VecDeque::new(),
        }
    }

    /// Records a link opened to this node at `now`, forgetting openings that left the
    /// window.
    pub(super) fn record_open(&mut self, now: Instant, limit: usize) {
        self.forget_before(now);
        if self.opened.len() >= limit {
            // Only the newest `limit` matter for when the next one may go.
            self.opened.pop_front();
        }
        self.opened.push_back(now);
    }

    /// When the next link may be opened as far as the sign-in budget goes: `None` while
    /// the window has room.
    pub(super) fn sign_in_budget_at(&self, now: Instant, limit: usize) -> Option<Instant> {
        let recent = self
            .opened
            .iter()
            .filter(|at| now.saturating_duration_since(**at) < SIGN_IN_WINDOW)
            .count();
        if recent < limit.max(1) {
            return None;
        }
        // Full: a place frees when the oldest of the last `limit` leaves the window.
        let oldest = self.opened.len().checked_sub(limit.max(1))?;
        self.opened.get(oldest).map(|at| *at + SIGN_IN_WINDOW)
    }

    /// When a link may next be opened to this node: past its failure backoff and with
    /// room in its sign-in budget. `None`: now.
    pub(super) fn ready_at(&self, now: Instant, limit: usize) -> Option<Instant> {
        let backoff = self.retry_at.filter(|at| *at > now);
        let budget = self.sign_in_budget_at(now, limit);
        backoff.max(budget)
    }

    /// Whether the node is in its failure backoff (as opposed to only out of sign-ins).
    pub(super) fn backing_off(&self, now: Instant) -> bool {
        self.retry_at.is_some_and(|at| at > now)
    }

    fn forget_before(&mut self, now: Instant) {
        while self
            .opened
            .front()
            .is_some_and(|at| now.saturating_duration_since(*at) >= SIGN_IN_WINDOW)
        {
            self.opened.pop_front();
        }
    }
}
