//! Which consumer groups a client's consumers are members of.
//!
//! The server counts a client (its member link) as one member of a group, however many
//! consumers the program builds on it: two consumers of one group on one client would
//! share one membership and each read every partition of it. So a client lets one live
//! consumer per group claim it, and refuses a second with
//! [`ClientError::GroupConsumerExists`]; a consumer of the group on another client is a
//! member of its own.
//!
//! A consumer dropped while it may be a member (without `shutdown`) hands its claim back
//! as *leaving*: the adapter's I/O side takes it ([`GroupClaims::take_leaving`]) and has
//! the router end the membership, so that the group's other members get its partitions
//! within a sync interval. A new consumer of the group that claims it before that takes
//! the membership over instead.

use std::fmt;
use std::sync::{Arc, Mutex, PoisonError};

use crate::client::ClientError;
use crate::wire::ConsumerGroupRef;

/// The claims of one client's consumers; cloned, the clones share them.
#[derive(Clone, Default)]
pub struct GroupClaims {
    book: Arc<Mutex<Book>>,
    /// Tells the I/O side that a membership is to end (set once by the adapter).
    wake: Option<Arc<dyn Fn() + Send + Sync>>,
}

#[derive(Debug, Default)]
struct Book {
    /// Groups a live consumer claims.
    held: Vec<ConsumerGroupRef>,
    /// Groups whose consumer was dropped while it may have been a member.
    leaving: Vec<ConsumerGroupRef>,
}

impl GroupClaims {
    /// No claims; `wake` is called whenever a membership is to end.
    pub fn new(wake: impl Fn() + Send + Sync + 'static) -> Self {
        Self {
            book: Arc::default(),
            wake: Some(Arc::new(wake)),
        }
    }

    /// Claims `group` for one consumer: refused while another consumer of this client
    /// holds it.
    pub fn claim(&self, group: ConsumerGroupRef) -> Result<GroupClaim, ClientError> {
        let mut book = self.book.lock().unwrap_or_else(PoisonError::into_inner);
        if book.held.contains(&group) {
            return Err(ClientError::GroupConsumerExists {
                group: group.group.clone(),
            });
        }
        // A dropped consumer's membership not ended yet: this consumer takes it over.
        book.leaving.retain(|leaving| *leaving != group);
        book.held.push(group.clone());
        Ok(GroupClaim {
            claims: self.clone(),
            group: Some(group),
        })
    }

    /// The groups whose membership is to end now (their consumer was dropped), in the
    /// order they were dropped.
    pub fn take_leaving(&self) -> Vec<ConsumerGroupRef> {
        let mut book = self.book.lock().unwrap_or_else(PoisonError::into_inner);
        std::mem::take(&mut book.leaving)
    }

    fn release(&self, group: &ConsumerGroupRef, leaving: bool) {
        {
            let mut book = self.book.lock().unwrap_or_else(PoisonError::into_inner);
            book.held.retain(|held| held != group);
            if !leaving {
                return;
            }
            book.leaving.push(group.clone());
        }
        if let Some(wake) = &self.wake {
            wake();
        }
    }
}

impl fmt::Debug for GroupClaims {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let book = self.book.lock().unwrap_or_else(PoisonError::into_inner);
        f.debug_struct("GroupClaims").field("book", &*book).finish()
    }
}

/// One consumer's claim of its group; released when dropped.
#[derive(Debug)]
pub struct GroupClaim {
    claims: GroupClaims,
    group: Option<ConsumerGroupRef>,
}

impl GroupClaim {
    /// Gives the claim back; `member` says the membership is to end (the consumer may be
    /// a member and did not leave).
    pub(super) fn release(mut self, member: bool) {
        if let Some(group) = self.group.take() {
            self.claims.release(&group, member);
        }
    }
}

impl Drop for GroupClaim {
    fn drop(&mut self) {
        if let Some(group) = self.group.take() {
            self.claims.release(&group, false);
        }
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use std::sync::atomic::{AtomicUsize, Ordering};

    use super::*;
    use crate::wire::Identifier;

    fn group(name: &str) -> ConsumerGroupRef {
        ConsumerGroupRef {
            stream: Identifier::Numeric(1),
            topic: Identifier::Numeric(1),
            group: Identifier::try_from(name).unwrap(),
        }
    }

    #[test]
    fn a_second_claim_of_a_group_is_refused_until_the_first_is_released() {
        let claims = GroupClaims::new(|| {});
        let first = claims.claim(group("a")).unwrap();
        assert!(matches!(
            claims.claim(group("a")),
            Err(ClientError::GroupConsumerExists { .. })
        ));
        let other = claims.claim(group("b")).unwrap();
        drop(first);
        let again = claims.claim(group("a")).unwrap();
        drop((other, again));
        assert!(claims.take_leaving().is_empty(), "nothing was a member");
    }

    #[test]
    fn a_member_released_without_leaving_is_taken_once_and_wakes_the_io_side() {
        let woken = Arc::new(AtomicUsize::new(0));
        let counter = Arc::clone(&woken);
        let claims = GroupClaims::new(move || {
            counter.fetch_add(1, Ordering::SeqCst);
        });
        claims.claim(group("a")).unwrap().release(true);
        assert_eq!(woken.load(Ordering::SeqCst), 1);
        assert_eq!(claims.take_leaving(), vec![group("a")]);
        assert!(claims.take_leaving().is_empty());
    }

    #[test]
    fn a_new_claim_takes_over_a_membership_not_ended_yet() {
        let claims = GroupClaims::new(|| {});
        claims.claim(group("a")).unwrap().release(true);
        let taken_over = claims.claim(group("a")).unwrap();
        assert!(claims.take_leaving().is_empty());
        drop(taken_over);
    }
}
