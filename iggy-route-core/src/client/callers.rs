//! The requests a driver handed to its router and the callers waiting for their outcome:
//! one table for both adapters. The caller `C` is the adapter's (a channel's sending half,
//! a callback); what a call does when the router has no room for it, and how an outcome
//! reaches the caller as the client reports it, are decided here.

use std::collections::BTreeMap;
use std::time::{Duration, Instant};

use super::ClientError;
use crate::ids::RequestId;
use crate::request::{Reply, Request, RequestError};
use crate::router::Router;

/// What a call does when the router has no room for it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Admission {
    /// Waits in the router's line, behind every call already waiting, until room frees
    /// up, at most until `deadline`; then fails with `QueueFull`.
    WaitForRoom {
        /// When the call stops waiting for room.
        deadline: Instant,
    },
    /// Fails with `QueueFull` at once, also while other calls wait (a try never jumps
    /// the line).
    AtOnce,
}

impl Admission {
    /// A call made at `now` that may wait for room for `wait` (the client's
    /// `request_timeout`). `Config::validate` bounds it to a day; were the sum ever to
    /// overflow, the call would still be tried once.
    pub fn wait_for_room(now: Instant, wait: Duration) -> Self {
        Self::WaitForRoom {
            deadline: now.checked_add(wait).unwrap_or(now),
        }
    }
}

/// The caller of every request the router took (also of those waiting for room in it),
/// by request id.
#[derive(Debug)]
pub struct Callers<C> {
    waiting: BTreeMap<RequestId, C>,
}

impl<C> Default for Callers<C> {
    fn default() -> Self {
        Self {
            waiting: BTreeMap::new(),
        }
    }
}

impl<C> Callers<C> {
    /// Hands `request` to `router` as `admission` says, and keeps `caller` for its outcome.
    /// A request the router refuses hands the caller back with the error.
    pub fn submit(
        &mut self,
        router: &mut Router,
        now: Instant,
        request: Request,
        admission: Admission,
        caller: C,
    ) -> Result<(), (C, ClientError)> {
        let submitted = match admission {
            Admission::WaitForRoom { deadline } => router.submit_waiting(now, request, deadline),
            Admission::AtOnce => router.submit(now, request),
        };
        match submitted {
            Ok(id) => {
                self.waiting.insert(id, caller);
                Ok(())
            }
            Err(error) => Err((caller, error.into())),
        }
    }

    /// The caller of the request the router completed (`Output::Completed`), with the
    /// outcome as the client reports it; `None` when nobody waits for it.
    pub fn completed(
        &mut self,
        id: RequestId,
        outcome: Result<Reply, RequestError>,
    ) -> Option<(C, Result<Reply, ClientError>)> {
        let caller = self.waiting.remove(&id)?;
        Some((caller, outcome.map_err(ClientError::from)))
    }

    /// Whether no caller waits.
    pub fn is_empty(&self) -> bool {
        self.waiting.is_empty()
    }

    /// The requests whose caller `gone` says no longer waits, in id order (so that what
    /// the router does with them never follows a map's order).
    pub fn abandoned(&self, gone: impl Fn(&C) -> bool) -> Vec<RequestId> {
        self.waiting
            .iter()
            .filter(|(_, caller)| gone(caller))
            .map(|(id, _)| *id)
            .collect()
    }

    /// Drops every caller (the client stops): each hears its channel close.
    pub fn clear(&mut self) {
        self.waiting.clear();
    }
}
