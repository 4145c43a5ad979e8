//! A consumer group joined by name and then polled, read and left by number, through
//! iggy-route's SDK traits on the real server (the shared program, `group_names_program`),
//! and the server's own keying read natively, with nothing resolved on the client. The
//! SDK's `IggyClient` runs the program on the loopback cluster only: on this cluster it
//! cannot commit a group's offset (see `sdk_drop_in`).

use std::sync::Arc;

use iggy::prelude::Client as SdkClient;
use iggy_route_core::client::Call;
use iggy_route_core::wire::{Consumer, ConsumerKind, Identifier};
use iggy_route_tests::real_cluster::{
    RealCluster, admin, create_stream, create_topic, unique_name,
};
use iggy_route_tests::scripted::clients::Adapter;

use super::group_names_program::{
    EXPECTED, RECREATED, group_names_program, recreated_by_another_program,
};
use super::{DAY_RUNTIME, call, serial};

#[test]
fn a_group_named_by_name_or_number_is_one_group_on_the_real_cluster() {
    let Some(cluster) = RealCluster::from_env("group_names") else {
        return;
    };
    let _serial = serial();
    let stream = unique_name("group-names");
    let native = cluster.client(Adapter::Tokio, 0);
    admin(&native, create_stream(&stream));
    admin(&native, create_topic(&stream, "orders", 1));
    let route: Arc<dyn SdkClient> = Arc::new(
        DAY_RUNTIME
            .block_on(iggy_route_tokio::Client::connect(
                cluster.config(cluster.nodes.len() - 1),
            ))
            .unwrap(),
    );
    let lines = DAY_RUNTIME.block_on(group_names_program(&*route, &stream, "orders"));
    let _ = DAY_RUNTIME.block_on(route.shutdown());
    assert_eq!(lines, EXPECTED);
    // The group created again was polled once through its name, committing offset 0: read
    // by its number, unresolved by any client, the server answers the same offset.
    let group = call(
        &native,
        Call::get_consumer_group(stream.as_str(), "orders", "g").unwrap(),
    )
    .unwrap()
    .expect("the group created again");
    let by_number = Consumer {
        kind: ConsumerKind::ConsumerGroup,
        id: Identifier::Numeric(group.info.id),
    };
    let stored = call(
        &native,
        Call::get_consumer_offset(by_number, stream.as_str(), "orders", Some(0)).unwrap(),
    )
    .unwrap();
    native.shutdown();
    assert_eq!(stored.map(|info| info.stored_offset), Some(0));
}

/// A group this client joined by its numbers, deleted and created again under its name by
/// another client: on the real server, as on the loopback cluster with the SDK's client.
#[test]
fn a_group_created_again_by_another_client_is_a_new_group_on_the_real_cluster() {
    let Some(cluster) = RealCluster::from_env("group_names") else {
        return;
    };
    let _serial = serial();
    let stream = unique_name("group-recreated");
    let native = cluster.client(Adapter::Tokio, 0);
    admin(&native, create_stream(&stream));
    admin(&native, create_topic(&stream, "orders", 1));
    native.shutdown();
    let connect = |seed: usize| -> Arc<dyn SdkClient> {
        Arc::new(
            DAY_RUNTIME
                .block_on(iggy_route_tokio::Client::connect(cluster.config(seed)))
                .unwrap(),
        )
    };
    let (client, other) = (connect(cluster.nodes.len() - 1), connect(0));
    let lines = DAY_RUNTIME.block_on(recreated_by_another_program(
        &*client, &*other, &stream, "orders",
    ));
    let _ = DAY_RUNTIME.block_on(client.shutdown());
    let _ = DAY_RUNTIME.block_on(other.shutdown());
    assert_eq!(lines, RECREATED);
}
