//! The cluster's roster, the one the router and routing both read: its entries in roster
//! order, which is the replicas' order (a reply header's `replica` is an index into it, and
//! a refusal's `view` names replica `view % len` as the partition group's primary), and the
//! distinct nodes they map to, which discovery tries in that order.

use crate::ids::NodeId;

/// The roster as last read.
#[derive(Debug, Default, Clone, PartialEq, Eq)]
pub(crate) struct Roster {
    /// Each entry's node (`None` where an entry has no usable address, or the node table
    /// was full).
    replica_order: Vec<Option<NodeId>>,
    /// The distinct nodes of the entries, in roster order.
    nodes: Vec<NodeId>,
}

impl Roster {
    /// The roster of these entries, in roster order.
    pub(crate) fn from_replica_order(replica_order: Vec<Option<NodeId>>) -> Self {
        let mut nodes = Vec::with_capacity(replica_order.len());
        for node in replica_order.iter().flatten() {
            if !nodes.contains(node) {
                nodes.push(*node);
            }
        }
        Self {
            replica_order,
            nodes,
        }
    }

    /// The distinct nodes, in roster order.
    pub(crate) fn nodes(&self) -> &[NodeId] {
        &self.nodes
    }

    /// The server's replica id of `node` (its first place in the roster).
    pub(crate) fn replica_of(&self, node: NodeId) -> Option<u32> {
        self.replica_order
            .iter()
            .position(|entry| *entry == Some(node))
            .and_then(|at| u32::try_from(at).ok())
    }

    /// The node a refusal from `node`, stamped with `view` and `replica`, names as the
    /// group's primary, if it names another. The real server stamps a partition replica's
    /// refusal with its group's `view` and its own `replica` index; a refusal stamped
    /// otherwise (a `replica` that is not `node`'s place in the roster: the server echoes
    /// the request's fields where it holds no group) names nothing.
    pub(crate) fn named_by_refusal(&self, node: NodeId, view: u32, replica: u8) -> Option<NodeId> {
        let replicas = self.replica_order.len();
        let stamped_by_node = self
            .replica_order
            .get(usize::from(replica))
            .copied()
            .flatten()
            == Some(node);
        if replicas == 0 || !stamped_by_node {
            return None;
        }
        let primary = usize::try_from(view).unwrap_or(usize::MAX) % replicas;
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

    fn roster(order: &[Option<u32>]) -> Roster {
        Roster::from_replica_order(order.iter().map(|entry| entry.map(NodeId)).collect())
    }

    #[test]
    fn a_refusal_names_the_primary_of_its_view() {
        let roster = roster(&[Some(0), Some(1), Some(2)]);
        // Node 1 (replica 1) refuses under view 5: replica 5 % 3 = 2 leads.
        assert_eq!(roster.named_by_refusal(NodeId(1), 5, 1), Some(NodeId(2)));
        // A view that wraps past u32 still maps into the roster.
        assert_eq!(
            roster.named_by_refusal(NodeId(1), u32::MAX, 1),
            Some(NodeId(0))
        );
    }

    #[test]
    fn a_refusal_names_nothing_it_cannot_vouch_for() {
        let roster = roster(&[Some(0), None, Some(2)]);
        // Stamped with another replica's index: an echo, not the node's own stamp.
        assert_eq!(roster.named_by_refusal(NodeId(0), 2, 2), None);
        // A replica index past the roster.
        assert_eq!(roster.named_by_refusal(NodeId(0), 2, 200), None);
        // Naming itself, or an entry without an address.
        assert_eq!(roster.named_by_refusal(NodeId(0), 3, 0), None);
        assert_eq!(roster.named_by_refusal(NodeId(0), 1, 0), None);
        // No roster read yet.
        assert_eq!(Roster::default().named_by_refusal(NodeId(0), 1, 0), None);
    }

    #[test]
    fn nodes_are_the_distinct_usable_entries_in_order() {
        let roster = roster(&[None, Some(4), Some(2), Some(4), None, Some(0)]);
        assert_eq!(roster.nodes(), [NodeId(4), NodeId(2), NodeId(0)]);
        assert!(Roster::default().nodes().is_empty());
        assert!(
            super::Roster::from_replica_order(vec![None, None])
                .nodes()
                .is_empty()
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
