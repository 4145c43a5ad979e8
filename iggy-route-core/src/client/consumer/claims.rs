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
//!
//! One group can be named several ways (the stream, the topic and the group each by id or
//! by name). Before it joins, a consumer resolves its names to ids and names
//! ([`GroupClaim::resolve`]): a group another consumer of the client claims under other
//! names is refused then, and `claim` refuses any naming of a group already resolved.

use std::fmt;
use std::sync::{Arc, Mutex, PoisonError};

use crate::client::ClientError;
use crate::wire::{ConsumerGroupRef, Identifier, Name};

/// What a group reference names: the stream's, the topic's and the group's id and name.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ResolvedGroup {
    /// The stream's id and name.
    pub stream: (u32, Name),
    /// The topic's id and name.
    pub topic: (u32, Name),
    /// The group's id and name.
    pub group: (u32, Name),
}

impl ResolvedGroup {
    /// Whether `reference` names this group, however it names each level.
    fn is_named_by(&self, reference: &ConsumerGroupRef) -> bool {
        let names = |identifier: &Identifier, (id, name): &(u32, Name)| match identifier {
            Identifier::Numeric(numeric) => numeric == id,
            Identifier::Named(named) => named == name,
        };
        names(&reference.stream, &self.stream)
            && names(&reference.topic, &self.topic)
            && names(&reference.group, &self.group)
    }

    fn ids(&self) -> (u32, u32, u32) {
        (self.stream.0, self.topic.0, self.group.0)
    }
}

/// A group a live consumer claims, as it named it, and what that resolved to once known.
#[derive(Debug)]
struct Held {
    group: ConsumerGroupRef,
    resolved: Option<ResolvedGroup>,
}

impl Held {
    /// Whether this claim may be of the group `group` names: named alike, or resolved to
    /// what `group` names.
    fn clashes(&self, group: &ConsumerGroupRef) -> bool {
        self.group == *group
            || self
                .resolved
                .as_ref()
                .is_some_and(|mine| mine.is_named_by(group))
    }
}

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
    held: Vec<Held>,
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
        if book.held.iter().any(|held| held.clashes(&group)) {
            return Err(ClientError::GroupConsumerExists {
                group: group.group.clone(),
            });
        }
        // A dropped consumer's membership not ended yet: this consumer takes it over, and
        // ends it when released, even if it never joins itself.
        let before = book.leaving.len();
        book.leaving.retain(|leaving| *leaving != group);
        let inherited = book.leaving.len() != before;
        book.held.push(Held {
            group: group.clone(),
            resolved: None,
        });
        Ok(GroupClaim {
            claims: self.clone(),
            group: Some(group),
            inherited,
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
            book.held.retain(|held| held.group != *group);
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
    /// The claim took over the membership of a dropped consumer that was not ended yet.
    inherited: bool,
}

impl GroupClaim {
    /// Records what the claimed group resolved to: refused with
    /// [`ClientError::GroupConsumerExists`] when another consumer of the client claims
    /// the same group under other names.
    pub fn resolve(&self, resolved: ResolvedGroup) -> Result<(), ClientError> {
        let Some(group) = &self.group else {
            return Ok(());
        };
        let mut book = self
            .claims
            .book
            .lock()
            .unwrap_or_else(PoisonError::into_inner);
        // Only against claims resolved already: of two consumers naming one group two
        // ways, the one that resolves second is refused.
        let clash = book.held.iter().any(|held| {
            held.group != *group
                && held
                    .resolved
                    .as_ref()
                    .is_some_and(|theirs| theirs.ids() == resolved.ids())
        });
        if clash {
            return Err(ClientError::GroupConsumerExists {
                group: group.group.clone(),
            });
        }
        if let Some(mine) = book.held.iter_mut().find(|held| held.group == *group) {
            mine.resolved = Some(resolved);
        }
        Ok(())
    }

    /// Gives the claim back; `member` says the membership is to end (the consumer may be
    /// a member and did not leave).
    pub(super) fn release(mut self, member: bool) {
        if let Some(group) = self.group.take() {
            self.claims.release(&group, member || self.inherited);
        }
    }
}

impl Drop for GroupClaim {
    fn drop(&mut self) {
        if let Some(group) = self.group.take() {
            self.claims.release(&group, self.inherited);
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

    fn resolved(stream: u32, topic: u32, group: u32, name: &str) -> ResolvedGroup {
        ResolvedGroup {
            stream: (stream, Name::new("orders").unwrap()),
            topic: (topic, Name::new("events").unwrap()),
            group: (group, Name::new(name).unwrap()),
        }
    }

    #[test]
    fn a_group_named_another_way_is_refused_once_resolved() {
        let claims = GroupClaims::new(|| {});
        let by_name = claims.claim(group("a")).unwrap();
        by_name.resolve(resolved(1, 1, 7, "a")).unwrap();
        let by_id = ConsumerGroupRef {
            stream: Identifier::try_from("orders").unwrap(),
            topic: Identifier::Numeric(1),
            group: Identifier::Numeric(7),
        };
        assert!(matches!(
            claims.claim(by_id.clone()),
            Err(ClientError::GroupConsumerExists { .. })
        ));
        // Claimed before the first resolved: refused when it resolves itself.
        drop(by_name);
        let first = claims.claim(group("a")).unwrap();
        let second = claims.claim(by_id).unwrap();
        first.resolve(resolved(1, 1, 7, "a")).unwrap();
        assert!(matches!(
            second.resolve(resolved(1, 1, 7, "a")),
            Err(ClientError::GroupConsumerExists { .. })
        ));
        // Another group of the same name elsewhere is another group.
        let elsewhere = claims
            .claim(ConsumerGroupRef {
                stream: Identifier::Numeric(1),
                topic: Identifier::Numeric(2),
                group: Identifier::try_from("a").unwrap(),
            })
            .unwrap();
        elsewhere.resolve(resolved(1, 2, 0, "a")).unwrap();
    }

    #[test]
    fn a_new_claim_takes_over_a_membership_not_ended_yet() {
        let claims = GroupClaims::new(|| {});
        claims.claim(group("a")).unwrap().release(true);
        let taken_over = claims.claim(group("a")).unwrap();
        assert!(claims.take_leaving().is_empty());
        drop(taken_over);
    }

    #[test]
    fn a_claim_that_took_over_a_membership_ends_it_though_it_never_joined() {
        let claims = GroupClaims::new(|| {});
        claims.claim(group("a")).unwrap().release(true);
        claims.claim(group("a")).unwrap().release(false);
        assert_eq!(claims.take_leaving(), vec![group("a")]);
        let dropped_unused = {
            claims.claim(group("b")).unwrap().release(true);
            claims.claim(group("b")).unwrap()
        };
        drop(dropped_unused);
        assert_eq!(claims.take_leaving(), vec![group("b")]);
    }
}
