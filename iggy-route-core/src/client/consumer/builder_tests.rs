#![allow(clippy::unwrap_used)]

use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

use super::{ConsumerBuilder, StartConsumer};
use crate::client::consumer::{AutoCommit, ConsumerIdentity, ConsumerState, GroupClaims};
use crate::client::{Checked, ClientError};
use crate::wire::{Identifier, PollingStrategy};

/// A client as the builder sees it: claims, and a consumer that is just its state.
#[derive(Debug, Clone)]
struct Host {
    claims: GroupClaims,
    started: Arc<AtomicUsize>,
}

impl Host {
    fn new() -> Self {
        Self {
            claims: GroupClaims::new(|| {}),
            started: Arc::default(),
        }
    }
}

/// The consumer the tests build: the state, once the host counted it.
impl StartConsumer for Host {
    type Consumer = ConsumerState;

    fn claims(&self) -> &GroupClaims {
        &self.claims
    }

    fn start_consumer(self, state: Checked<ConsumerState>) -> ConsumerState {
        self.started.fetch_add(1, Ordering::Relaxed);
        state.into_inner()
    }
}

type Builder = ConsumerBuilder<Host>;

fn new(
    host: &Host,
    stream: impl TryInto<Identifier, Error: Into<ClientError>>,
    topic: impl TryInto<Identifier, Error: Into<ClientError>>,
) -> Result<Builder, ClientError> {
    Builder::new(host.clone(), stream, topic)
}

fn builder(host: &Host) -> Builder {
    new(host, "orders", 7).unwrap()
}

#[test]
fn the_defaults_are_the_sdks_single_consumer_zero_of_every_partition() {
    let host = Host::new();
    let built = builder(&host);
    let config = built.config();
    assert_eq!(config.stream, Identifier::try_from("orders").unwrap());
    assert_eq!(config.topic, Identifier::Numeric(7));
    assert_eq!(
        config.identity,
        ConsumerIdentity::Consumer(Identifier::Numeric(0))
    );
    assert_eq!(config.partition, None);
    assert_eq!(config.strategy, PollingStrategy::Next);
    assert_eq!(config.batch_length, 100);
    assert_eq!(config.poll_interval, Duration::from_millis(100));
    assert_eq!(config.auto_commit, AutoCommit::AfterPoll);
    assert!(config.create_group);
}

#[test]
fn every_setting_is_held_and_a_zero_batch_is_one_message() {
    let host = Host::new();
    let built = builder(&host)
        .group("billing")
        .unwrap()
        .create_group(false)
        .partition(3)
        .polling_strategy(PollingStrategy::First)
        .batch_length(0)
        .poll_interval(Duration::ZERO)
        .auto_commit(AutoCommit::Interval(Duration::from_secs(5)));
    let config = built.config();
    assert_eq!(
        config.identity,
        ConsumerIdentity::Group(Identifier::try_from("billing").unwrap())
    );
    assert!(!config.create_group);
    assert_eq!(config.partition, Some(3));
    assert_eq!(config.strategy, PollingStrategy::First);
    assert_eq!(config.batch_length, 1);
    assert_eq!(config.poll_interval, Duration::ZERO);
    assert_eq!(
        config.auto_commit,
        AutoCommit::Interval(Duration::from_secs(5))
    );
    assert_eq!(
        builder(&host).batch_length(u32::MAX).config().batch_length,
        u32::MAX
    );
    // The identity set last wins.
    let back = builder(&host)
        .group("billing")
        .unwrap()
        .consumer_id(9)
        .unwrap();
    assert_eq!(
        back.config().identity,
        ConsumerIdentity::Consumer(Identifier::Numeric(9))
    );
}

#[test]
fn names_the_wire_cannot_carry_are_typed_errors_before_anything_is_built() {
    let host = Host::new();
    let too_long = "x".repeat(256);
    for name in ["", too_long.as_str()] {
        assert!(new(&host, name, 1).is_err());
        assert!(new(&host, 1, name).is_err());
        assert!(builder(&host).group(name).is_err());
        assert!(builder(&host).consumer_id(name).is_err());
    }
    assert_eq!(host.started.load(Ordering::Relaxed), 0);
}

#[test]
fn a_second_member_of_one_group_on_one_client_is_refused_and_single_consumers_never_are() {
    let host = Host::new();
    let first = builder(&host).group("billing").unwrap().build().unwrap();
    let second = builder(&host).group("billing").unwrap().build();
    assert!(matches!(
        second,
        Err(ClientError::GroupConsumerExists { group }) if group == Identifier::try_from("billing").unwrap()
    ));
    // Another group, or single consumers with one id, are not members: no clash.
    let _other = builder(&host).group("audit").unwrap().build().unwrap();
    let _one = builder(&host).build().unwrap();
    let _two = builder(&host).build().unwrap();
    assert_eq!(host.started.load(Ordering::Relaxed), 4);
    // The group is free again once its consumer is gone.
    drop(first);
    assert!(builder(&host).group("billing").unwrap().build().is_ok());
}
