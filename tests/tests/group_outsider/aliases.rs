//! The same group named another way; the same name on another topic (section 10).

use std::time::Duration;

use iggy_route_tokio::ClientError;

use crate::support::{Adapter, Env, Mio, STREAM, Spec, TOPIC, Tokio, Watch, finish};

// ---- 10. the same group named another way -------------------------------------------------

/// How the second consumer in [`same_group_other_names`] names the group.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Alias {
    /// The group by its numeric id (stream and topic by id, as the first).
    GroupId,
    /// Stream and topic by name (the group by name, as the first).
    StreamTopicNames,
}

/// One client builds a consumer of group "aliased" (stream 0, topic 0, group by name) and
/// joins; then one of the same group of the same topic named another way (`alias`). It
/// is the same group, so `build()` must refuse it with `GroupConsumerExists`. If it is
/// built anyway, both read, to show what it costs (printed).
fn same_group_other_names<A: Adapter>(alias: Alias) {
    const GROUP: &str = "aliased";
    const LEN: u64 = 20;
    let env = Env::start(1, 2, 0);
    env.fill(2, LEN);
    let admin = env.admin();
    env.block_on(admin.create_consumer_group(STREAM, TOPIC, GROUP))
        .unwrap();
    let group_id = env.group_id(GROUP).unwrap();
    let client = A::connect(&env, env.config());
    let spec = Spec {
        batch: 5,
        ..Spec::new(GROUP)
    };
    let mut by_name = A::member(&client, spec);
    A::join(&env, &mut by_name).unwrap();
    let second = match alias {
        Alias::GroupId => build_by_id::<A>(&client, group_id),
        Alias::StreamTopicNames => build_by_names::<A>(&client, GROUP),
    };
    let refused = matches!(second, Err(ClientError::GroupConsumerExists { .. }));
    let mut shown = format!("{:?}", second.as_ref().err());
    if let Ok(mut other) = second {
        let watch = Watch::new(GROUP, 2, 5);
        for _ in 0..30 {
            let _ = watch.next::<A>(&env, "first", &mut by_name, Duration::from_millis(50));
            let _ = watch.next::<A>(&env, "second", &mut other, Duration::from_millis(50));
        }
        shown = format!(
            "built; both read: {} handed out, {} twice; the group's members {:?}",
            watch.total(),
            watch.duplicates().len(),
            env.members(GROUP)
        );
        drop(other);
    }
    println!("[{}] {alias:?}: {shown}", A::NAME);
    assert!(
        refused,
        "{}: a second consumer of the same group ({alias:?}) on one client: {shown}",
        A::NAME
    );
    drop(by_name);
    env.block_on(admin.shutdown());
    A::close(&env, client);
    finish::<A>(&env);
}

fn build_by_id<A: Adapter>(client: &A::Client, group_id: u32) -> Result<A::Consumer, ClientError> {
    A::build_with(client, STREAM.into(), TOPIC.into(), group_id.into())
}

fn build_by_names<A: Adapter>(client: &A::Client, group: &str) -> Result<A::Consumer, ClientError> {
    A::build_with(
        client,
        "orders".try_into().unwrap(),
        "events".try_into().unwrap(),
        group.try_into().unwrap(),
    )
}

#[test]
fn same_group_named_by_its_id_is_refused_tokio() {
    same_group_other_names::<Tokio>(Alias::GroupId);
}

#[test]
fn same_group_named_by_its_id_is_refused_mio() {
    same_group_other_names::<Mio>(Alias::GroupId);
}

#[test]
fn same_group_with_stream_and_topic_by_name_is_refused_tokio() {
    same_group_other_names::<Tokio>(Alias::StreamTopicNames);
}

#[test]
fn same_group_with_stream_and_topic_by_name_is_refused_mio() {
    same_group_other_names::<Mio>(Alias::StreamTopicNames);
}

/// The same group name on another topic is another group: it must be built.
fn same_name_other_topic<A: Adapter>() {
    let env = Env::start(1, 2, 0);
    let admin = env.admin();
    env.block_on(admin.create_topic(STREAM, "other", 2))
        .unwrap();
    let client = A::connect(&env, env.config());
    let first = A::member(&client, Spec::new("shared-name"));
    let other = A::build_with(
        &client,
        STREAM.into(),
        "other".try_into().unwrap(),
        "shared-name".try_into().unwrap(),
    );
    println!(
        "[{}] another topic's group of the same name: {:?}",
        A::NAME,
        other.as_ref().err()
    );
    assert!(other.is_ok(), "{}: refused: {:?}", A::NAME, other.err());
    drop(other);
    drop(first);
    env.block_on(admin.shutdown());
    A::close(&env, client);
    finish::<A>(&env);
}

#[test]
fn same_group_name_on_another_topic_is_another_group_tokio() {
    same_name_other_topic::<Tokio>();
}

#[test]
fn same_group_name_on_another_topic_is_another_group_mio() {
    same_name_other_topic::<Mio>();
}
