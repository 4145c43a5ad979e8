//! The cluster's roster as the server numbers it: its nodes in roster order, which is the
//! replicas' order. A reply header's `replica` is an index into it, and a refusal's `view`
//! names replica `view % len` as the partition group's primary.

use crate::ids::NodeId;
use crate::wire::ReplyHeader;

/// The roster's entries in order, each the node it maps to (`None` where an entry has no
/// usable address, or the node table was full).
#[derive(Debug, Default)]
pub(super) struct Roster {
    replica_order: Vec<Option<NodeId>>,
}

impl Roster {
    /// The roster just read replaces the one before.
    pub(super) fn replace(&mut self, replica_order: Vec<Option<NodeId>>) {
        self.replica_order = replica_order;
    }

    /// The server's replica id of `node` (its first place in the roster).
    pub(super) fn replica_of(&self, node: NodeId) -> Option<u32> {
        self.replica_order
            .iter()
            .position(|entry| *entry == Some(node))
            .and_then(|at| u32::try_from(at).ok())
    }

    /// The node a refusal from `node` names as the group's primary, if it names another.
    /// The real server stamps a partition replica's refusal with its group's `view` and
    /// its own `replica` index; a refusal stamped otherwise (a `replica` that is not
    /// `node`'s place in the roster: the server echoes the request's fields where it holds
    /// no group) names nothing.
    pub(super) fn named_by_refusal(&self, node: NodeId, header: &ReplyHeader) -> Option<NodeId> {
        let replicas = self.replica_order.len();
        let stamped_by_node = self
            .replica_order
            .get(usize::from(header.replica))
            .copied()
            .flatten()
            == Some(node);
        if replicas == 0 || !stamped_by_node {
            return None;
        }
        let primary = usize::try_from(header.view).unwrap_or(usize::MAX) % replicas;
        self.replica_order
            .get(primary)
            .copied()
            .flatten()
            .filter(|named| *named != node)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn stamped(view: u32, replica: u8) -> ReplyHeader {
        ReplyHeader {
            view,
            replica,
            ..ReplyHeader::default()
        }
    }

    fn roster(order: &[Option<u32>]) -> Roster {
        let mut roster = Roster::default();
        roster.replace(order.iter().map(|entry| entry.map(NodeId)).collect());
        roster
    }

    #[test]
    fn a_refusal_names_the_primary_of_its_view() {
        let roster = roster(&[Some(0), Some(1), Some(2)]);
        // Node 1 (replica 1) refuses under view 5: replica 5 % 3 = 2 leads.
        assert_eq!(
            roster.named_by_refusal(NodeId(1), &stamped(5, 1)),
            Some(NodeId(2))
        );
        // A view that wraps past u32 still maps into the roster.
        assert_eq!(
            roster.named_by_refusal(NodeId(1), &stamped(u32::MAX, 1)),
            Some(NodeId(0))
        );
    }

    #[test]
    fn a_refusal_names_nothing_it_cannot_vouch_for() {
        let roster = roster(&[Some(0), None, Some(2)]);
        // Stamped with another replica's index: an echo, not the node's own stamp.
        assert_eq!(roster.named_by_refusal(NodeId(0), &stamped(2, 2)), None);
        // A replica index past the roster.
        assert_eq!(roster.named_by_refusal(NodeId(0), &stamped(2, 200)), None);
        // Naming itself, or an entry without an address.
        assert_eq!(roster.named_by_refusal(NodeId(0), &stamped(3, 0)), None);
        assert_eq!(roster.named_by_refusal(NodeId(0), &stamped(1, 0)), None);
        // No roster read yet.
        assert_eq!(
            Roster::default().named_by_refusal(NodeId(0), &stamped(1, 0)),
            None
        );
    }

    #[test]
    fn a_replica_is_a_nodes_first_place_in_the_roster() {
        let roster = roster(&[None, Some(4), Some(4), Some(1)]);
        assert_eq!(roster.replica_of(NodeId(4)), Some(1));
        assert_eq!(roster.replica_of(NodeId(1)), Some(3));
        assert_eq!(roster.replica_of(NodeId(9)), None);
        assert_eq!(Roster::default().replica_of(NodeId(0)), None);
    }
}
