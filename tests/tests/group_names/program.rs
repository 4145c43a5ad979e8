//! A consumer group named by name in one call and by number in the next, as an SDK
//! program may name it: the server resolves the group first, so both name one
//! membership and one stored offset, and a group created again under an old name is a
//! new group with no offset. Shared by the loopback run (`sdk_group_names.rs`) and the
//! real-cluster suite.

use bytes::Bytes;
use iggy::prelude::*;

/// What the program sees, on any client and any server that resolves groups.
pub(crate) const EXPECTED: [&str; 10] = [
    "poll by name: Ok([1])",
    "poll by number: Ok([2])",
    "offset by number: Ok(Some(1))",
    "offset by name: Ok(Some(1))",
    "leave by number: Ok(())",
    "poll after the leave: Err(5006)",
    "leave again by name: Err(5006)",
    "created again, joined: Ok(())",
    "created again, offset: Ok(None)",
    "created again, poll: Ok([1])",
];

fn named(name: &str) -> Identifier {
    Identifier::named(name).unwrap()
}

fn numeric(id: u32) -> Identifier {
    Identifier::numeric(id).unwrap()
}

fn ids(polled: Result<PolledMessages, IggyError>) -> Result<Vec<u128>, u32> {
    polled
        .map(|polled| polled.messages.iter().map(|m| m.header.id).collect())
        .map_err(|error| error.as_code())
}

async fn poll(
    client: &dyn Client,
    (s, t): (&Identifier, &Identifier),
    group: &Identifier,
) -> Result<Vec<u128>, u32> {
    let consumer = Consumer::group(group.clone());
    let strategy = PollingStrategy::next();
    ids(client
        .poll_messages(s, t, None, &consumer, &strategy, 1, true)
        .await)
}

/// The first poll after a join. Right after it, the partition's primary may not know the
/// membership yet: the poll is answered "re-sync" and may come back empty, as the SDK's
/// does, and the caller polls again (seen on the real cluster, with the primary on another
/// node than the one that took the join). Up to 20 more polls, 100 ms apart.
async fn poll_after_join(
    client: &dyn Client,
    stream_and_topic: (&Identifier, &Identifier),
    group: &Identifier,
) -> Result<Vec<u128>, u32> {
    let mut polled = poll(client, stream_and_topic, group).await;
    for _ in 0..20 {
        if !polled.as_ref().is_ok_and(Vec::is_empty) {
            break;
        }
        tokio::time::sleep(std::time::Duration::from_millis(100)).await;
        polled = poll(client, stream_and_topic, group).await;
    }
    polled
}

async fn offset(
    client: &dyn Client,
    (s, t): (&Identifier, &Identifier),
    group: &Identifier,
) -> Result<Option<u64>, u32> {
    let consumer = Consumer::group(group.clone());
    client
        .get_consumer_offset(&consumer, s, t, Some(0))
        .await
        .map(|found| found.map(|info| info.stored_offset))
        .map_err(|error| error.as_code())
}

/// Sends messages 1 to 4 to partition 0.
async fn send_four(client: &dyn Client, (s, t): (&Identifier, &Identifier)) {
    let mut batch: Vec<IggyMessage> = (1..=4)
        .map(|id| {
            IggyMessage::builder()
                .id(id)
                .payload(Bytes::from_static(b"m"))
                .build()
                .unwrap()
        })
        .collect();
    client
        .send_messages(s, t, &Partitioning::partition_id(0), &mut batch)
        .await
        .unwrap();
}

/// Runs the program on `client` against `stream`'s one-partition topic `topic`, which holds
/// nothing yet and has no groups. Returns one line per step, as in [`EXPECTED`].
pub(crate) async fn group_names_program(
    client: &dyn Client,
    stream: &str,
    topic: &str,
) -> Vec<String> {
    let (s, t) = (named(stream), named(topic));
    send_four(client, (&s, &t)).await;
    let group = client.create_consumer_group(&s, &t, "g").await.unwrap();
    let (by_name, by_number) = (named("g"), numeric(group.id));
    client.join_consumer_group(&s, &t, &by_name).await.unwrap();
    let code = |result: Result<(), IggyError>| result.map_err(|error| error.as_code());
    let mut lines = vec![
        format!("poll by name: {:?}", poll(client, (&s, &t), &by_name).await),
        format!(
            "poll by number: {:?}",
            poll(client, (&s, &t), &by_number).await
        ),
        format!(
            "offset by number: {:?}",
            offset(client, (&s, &t), &by_number).await
        ),
        format!(
            "offset by name: {:?}",
            offset(client, (&s, &t), &by_name).await
        ),
    ];
    let left = client.leave_consumer_group(&s, &t, &by_number).await;
    lines.push(format!("leave by number: {:?}", code(left)));
    lines.push(format!(
        "poll after the leave: {:?}",
        poll(client, (&s, &t), &by_name).await
    ));
    let left = client.leave_consumer_group(&s, &t, &by_name).await;
    lines.push(format!("leave again by name: {:?}", code(left)));
    client
        .delete_consumer_group(&s, &t, &by_number)
        .await
        .unwrap();
    client.create_consumer_group(&s, &t, "g").await.unwrap();
    let joined = client.join_consumer_group(&s, &t, &by_name).await;
    lines.push(format!("created again, joined: {:?}", code(joined)));
    lines.push(format!(
        "created again, offset: {:?}",
        offset(client, (&s, &t), &by_name).await
    ));
    lines.push(format!(
        "created again, poll: {:?}",
        poll_after_join(client, (&s, &t), &by_name).await
    ));
    lines
}

/// What [`recreated_by_another_program`] sees, on any client and any server that
/// resolves groups.
pub(crate) const RECREATED: [&str; 9] = [
    "joined by numbers, poll by name: Ok([1])",
    "recreated by another client, poll by name: Err(5006)",
    "offset by the old number: Ok(None)",
    "leave by name: Err(5006)",
    "leave by the old number: Err(5000)",
    "join by name: Ok(())",
    "poll by name: Ok([1])",
    "leave by the new number: Ok(())",
    "members: 0",
];

/// A group this client joined by its numbers, deleted and created again under its name by
/// `other`: the name now names a group this client is not a member of, and the old number
/// names nothing. Runs on `stream`'s one-partition topic `topic`, which holds nothing yet
/// and has no groups.
pub(crate) async fn recreated_by_another_program(
    client: &dyn Client,
    other: &dyn Client,
    stream: &str,
    topic: &str,
) -> Vec<String> {
    let (s, t, g) = (named(stream), named(topic), named("g"));
    send_four(client, (&s, &t)).await;
    let stream_id = client.get_stream(&s).await.unwrap().unwrap().id;
    let topic_id = client.get_topic(&s, &t).await.unwrap().unwrap().id;
    let (ns, nt) = (numeric(stream_id), numeric(topic_id));
    let old = client.create_consumer_group(&s, &t, "g").await.unwrap().id;
    client
        .join_consumer_group(&ns, &nt, &numeric(old))
        .await
        .unwrap();
    let code = |result: Result<(), IggyError>| result.map_err(|error| error.as_code());
    let mut lines = vec![format!(
        "joined by numbers, poll by name: {:?}",
        poll(client, (&s, &t), &g).await
    )];
    other.delete_consumer_group(&s, &t, &g).await.unwrap();
    let new = other.create_consumer_group(&s, &t, "g").await.unwrap().id;
    lines.push(format!(
        "recreated by another client, poll by name: {:?}",
        poll(client, (&s, &t), &g).await
    ));
    // The old group's offset went with it: the server finds no group by the old number.
    lines.push(format!(
        "offset by the old number: {:?}",
        offset(client, (&s, &t), &numeric(old)).await
    ));
    let left = client.leave_consumer_group(&s, &t, &g).await;
    lines.push(format!("leave by name: {:?}", code(left)));
    let left = client.leave_consumer_group(&ns, &nt, &numeric(old)).await;
    lines.push(format!("leave by the old number: {:?}", code(left)));
    let joined = client.join_consumer_group(&s, &t, &g).await;
    lines.push(format!("join by name: {:?}", code(joined)));
    let polled = poll_after_join(client, (&s, &t), &g).await;
    lines.push(format!("poll by name: {polled:?}"));
    let left = client.leave_consumer_group(&ns, &nt, &numeric(new)).await;
    lines.push(format!("leave by the new number: {:?}", code(left)));
    let members = other
        .get_consumer_group(&s, &t, &g)
        .await
        .unwrap()
        .map_or(0, |group| group.members_count);
    lines.push(format!("members: {members}"));
    lines
}
