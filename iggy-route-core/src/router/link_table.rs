//! The router's links, with each link's next deadline filed in one ordered index, so that
//! the next wake-up is read from the index's head instead of from a scan of every link.
//!
//! Every change to a link goes through [`LinkTable::get_mut`] (or insert/remove), which
//! notes the link as changed; [`LinkTable::refile`] then recomputes the deadlines of the
//! changed links only. The router refiles at the end of every input, so between inputs
//! the index is exact.

use std::collections::{BTreeMap, BTreeSet};
use std::time::Instant;

use super::link::Link;
use super::timer::TimerKind;
use crate::ids::LinkId;

#[derive(Debug, Default)]
pub(super) struct LinkTable {
    links: BTreeMap<LinkId, Link>,
    /// Each link's next deadline as last filed (also kept in `Link::filed`), earliest
    /// first.
    due: BTreeSet<(Instant, LinkId)>,
    /// Links changed since the last refile (may repeat, or name links gone since).
    changed: Vec<LinkId>,
}

impl LinkTable {
    pub(super) fn get(&self, id: &LinkId) -> Option<&Link> {
        self.links.get(id)
    }

    /// The link, to change: its deadline is filed again at the next refile.
    pub(super) fn get_mut(&mut self, id: &LinkId) -> Option<&mut Link> {
        let link = self.links.get_mut(id)?;
        if self.changed.last() != Some(id) {
            self.changed.push(*id);
        }
        Some(link)
    }

    /// Notes that something a link's deadline depends on, outside the link, changed (its
    /// request ended).
    pub(super) fn touch(&mut self, id: LinkId) {
        self.changed.push(id);
    }

    pub(super) fn insert(&mut self, id: LinkId, mut link: Link) {
        // Not in the index (a link put back after removal is filed anew).
        link.filed = None;
        self.changed.push(id);
        self.links.insert(id, link);
    }

    pub(super) fn remove(&mut self, id: &LinkId) -> Option<Link> {
        let link = self.links.remove(id)?;
        if let Some((at, _)) = link.filed {
            self.due.remove(&(at, *id));
        }
        Some(link)
    }

    pub(super) fn contains_key(&self, id: &LinkId) -> bool {
        self.links.contains_key(id)
    }

    pub(super) fn values(&self) -> impl Iterator<Item = &Link> {
        self.links.values()
    }

    pub(super) fn keys(&self) -> impl Iterator<Item = &LinkId> {
        self.links.keys()
    }

    #[cfg(feature = "internals")]
    pub(super) fn len(&self) -> usize {
        self.links.len()
    }

    /// Files again the deadline of every link changed since the last refile.
    pub(super) fn refile(&mut self, deadline: impl Fn(&Link) -> Option<(Instant, TimerKind)>) {
        for id in self.changed.drain(..) {
            let Some(link) = self.links.get_mut(&id) else {
                continue;
            };
            let next = deadline(link);
            let before = link.filed;
            if before == next {
                continue;
            }
            link.filed = next;
            if let Some((at, _)) = before {
                self.due.remove(&(at, id));
            }
            if let Some((at, _)) = next {
                self.due.insert((at, id));
            }
        }
    }

    /// Whether every change has been filed (the index is exact).
    pub(super) fn is_filed(&self) -> bool {
        self.changed.is_empty()
    }

    /// The earliest filed deadline, with its link and reason.
    pub(super) fn next(&self) -> Option<(Instant, TimerKind)> {
        let (_, id) = self.due.first()?;
        self.links.get(id).and_then(|link| link.filed)
    }

    /// The links whose filed deadline is at or before `now`, in link id order.
    pub(super) fn due_by(&self, now: Instant) -> Vec<LinkId> {
        let mut ids: Vec<LinkId> = self
            .due
            .iter()
            .take_while(|(at, _)| *at <= now)
            .map(|(_, id)| *id)
            .collect();
        ids.sort_unstable();
        ids
    }
}
