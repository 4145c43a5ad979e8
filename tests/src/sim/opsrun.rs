//! The simulation's side of the requests other than sends: submitting them against the
//! model's current logs, handing their completions to [`OpsBook`](super::opsbook::OpsBook)
//! with the model's view, and the per-step checks (the topic's partition count, the poll
//! consumers' stored offsets).

use iggy_route_core::{Outcome, RequestId, SubmitError};

use super::engine::Simulation;
use super::nodes::{SimNodes, SimTopic};
use crate::cluster::{Lookup, OffsetOwner, StoredMessage};

/// The log of `partition` of `topic`.
pub(super) fn log_in(nodes: &SimNodes, topic: SimTopic, partition: u32) -> &[StoredMessage] {
    nodes
        .state
        .catalog
        .partition(Lookup::Id(topic.stream), Lookup::Id(topic.topic), partition)
        .map_or(&[][..], |found| {
            // The simulation's cluster holds every payload (`SimNodes::new`).
            found
                .log
                .complete()
                .unwrap_or_else(|| panic!("the simulation's cluster dropped a payload"))
        })
}

/// The stored offset of numeric consumer `consumer` on `partition` of `topic`.
fn stored_in(nodes: &SimNodes, topic: SimTopic, partition: u32, consumer: u32) -> Option<u64> {
    nodes
        .state
        .catalog
        .partition(Lookup::Id(topic.stream), Lookup::Id(topic.topic), partition)
        .ok()?
        .offsets
        .get(&OffsetOwner::ConsumerId(consumer))
        .copied()
}

impl Simulation {
    /// Submit the next planned request other than a send.
    pub(super) fn submit_op(&mut self) {
        let Some(mut op) = self.ops.pop_due(self.now) else {
            return;
        };
        if let super::ops::OpKind::GroupPoll {
            partition, pick, ..
        } = &mut op.kind
        {
            // A member polls what its last sync assigned it, as a group consumer does.
            *partition = self.opsbook.group_partition(op.router, *partition, *pick);
        }
        let log_len = op.partition().map_or(0, |partition| {
            log_in(&self.nodes, self.topic, partition).len() as u64
        });
        let Some((request, value)) = op.request(self.topic, log_len) else {
            self.trace.line(
                self.now,
                format_args!("r{} skips {:?} (empty log)", op.router, op.kind),
            );
            return;
        };
        let now = self.instant();
        let router = op.router;
        let result = self.routers[router].submit(now, request);
        self.trace.line(
            self.now,
            format_args!("r{router} submit {:?} ({value}) -> {result:?}", op.kind),
        );
        match result {
            Ok(id) => {
                if let Err(message) = self.opsbook.submitted(id, op, value) {
                    self.fail(format_args!("{message}"));
                }
            }
            Err(SubmitError::QueueFull { .. }) => {}
            Err(other) => self.fail(format_args!(
                "router {router} refused a valid {:?}: {other}",
                op.kind
            )),
        }
        self.drain(router, false);
    }

    /// Router `router` completed `id`, one of the requests other than sends.
    pub(super) fn op_completed(
        &mut self,
        router: usize,
        id: RequestId,
        outcome: &Outcome,
    ) -> Result<(), String> {
        let (nodes, topic) = (&self.nodes, self.topic);
        let logs: Vec<&[StoredMessage]> = (0..topic.partitions)
            .map(|partition| log_in(nodes, topic, partition))
            .collect();
        let offsets = |partition: u32, consumer: u32| stored_in(nodes, topic, partition, consumer);
        self.opsbook
            .completed(router, id, outcome, self.now, &logs, &offsets)
    }

    /// The per-step checks: the topic's partition count, the poll consumers' offsets.
    pub(super) fn check_ops(&mut self) {
        let topic = self.topic;
        let count = self
            .nodes
            .state
            .catalog
            .topic(Lookup::Id(topic.stream), Lookup::Id(topic.topic))
            .map_or(topic.partitions, |found| found.partitions.len() as u32);
        if count != topic.partitions {
            if count < topic.partitions {
                self.fail(format_args!(
                    "the topic lost partitions: {} to {count}",
                    topic.partitions
                ));
            }
            self.trace
                .line(self.now, format_args!("topic grows to {count} partitions"));
            self.topic.partitions = count;
            self.ledger.grow(count);
            if let Err(message) = self.keyed.changed(count, self.now) {
                self.fail(format_args!("{message}"));
            }
            self.opsbook.topic_grew(count);
        }
        // A router is at most one member of the group: a join it answered or gave up on
        // never leaves a second identity in the group.
        let members = self
            .nodes
            .group_members(self.topic, super::ops::GROUP, &|id| {
                self.pauses.is_closing(id)
            });
        for router in 0..self.routers.len() {
            let held = members.iter().filter(|m| **m == Some(router)).count();
            if held > 1 {
                self.fail(format_args!(
                    "router {router} is {held} members of the group: {members:?}"
                ));
            }
        }
        let routers = self.routers.len();
        let (nodes, topic) = (&self.nodes, self.topic);
        let offsets = |partition: u32, consumer: u32| stored_in(nodes, topic, partition, consumer);
        let result = self.opsbook.check_stored(routers, &offsets);
        if let Err(message) = result {
            self.fail(format_args!("{message}"));
        }
    }
}
