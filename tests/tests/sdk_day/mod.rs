//! An SDK user's day, written once and run through each adapter's own `Client` against the
//! loopback cluster (`sdk_day.rs`) and against a real one (`real_cluster.rs`): the commands
//! of the SDK 0.11.0 a user who drops the SDK needs.
//!
//! Each step is a macro so that one text serves the async client (each call wrapped in the
//! caller's `block_on`) and the blocking one (each call as it is). Names carry a prefix that
//! is fresh per run, so a real cluster that keeps its state between runs is no obstacle.
//! Under a directory of its own so that Cargo does not take it for a test target.

#![allow(dead_code, unused_macros, unreachable_pub)]

use std::time::Duration;

use bytes::Bytes;
use iggy_route_core::client::ClientError;
use iggy_route_core::wire::{
    Consumer, ConsumerKind, ErrorCode, GlobalPermissions, Identifier, Message, Permissions,
    StreamPermissions,
};
use iggy_route_core::{Config, Credentials, RequestError};

/// Moves the primaries of a topic's partitions (stream, topic, partitions count) where the
/// cluster lets a test do so.
pub type Spread = std::sync::Arc<dyn Fn(u32, u32, u32) + Send + Sync>;

/// What a day needs of the cluster it runs against.
#[derive(Clone)]
pub struct Place {
    /// The client configuration for the root user (`iggy`/`iggy`).
    pub root: Config,
    /// A prefix no earlier run used.
    pub prefix: String,
    /// Spreads a new topic's primaries over the nodes, if the cluster can.
    pub spread: Option<Spread>,
    /// How many nodes the cluster has.
    pub nodes: usize,
}

impl Place {
    /// Spreads the primaries of a topic just created, where the cluster can.
    pub fn spread(&self, stream: u32, topic: u32, partitions: u32) {
        if let Some(spread) = &self.spread {
            spread(stream, topic, partitions);
        }
    }

    /// `root` with other credentials.
    pub fn config_as(&self, credentials: Credentials) -> Config {
        let mut config = self.root.clone();
        config.credentials = credentials;
        config
    }

    /// A name under this run's prefix.
    pub fn name(&self, what: &str) -> String {
        format!("{}-{what}", self.prefix)
    }
}

/// A plain consumer.
pub fn consumer(id: u32) -> Consumer {
    Consumer {
        kind: ConsumerKind::Consumer,
        id: Identifier::Numeric(id),
    }
}

/// Ten messages with payloads `m0`..`m9`.
pub fn ten_messages() -> Vec<Message> {
    (0..10u128)
        .map(|i| Message {
            id: i + 1,
            payload: Bytes::from(format!("m{i}")),
            ..Message::default()
        })
        .collect()
}

/// The server's status code of a failed call, or a panic saying what it was instead.
pub fn status_of<T: std::fmt::Debug>(result: Result<T, ClientError>) -> ErrorCode {
    match result {
        Err(ClientError::Request(RequestError::Server { code })) => code,
        other => panic!("expected a server error, got {other:?}"),
    }
}

/// Whether a failed connect was the server refusing the credentials.
pub fn refused_sign_in(result: Result<(), &ClientError>) -> bool {
    matches!(
        result,
        Err(ClientError::Request(RequestError::SignIn { .. }))
    )
}

/// A user allowed to read streams and topics everywhere and to send to (and poll) the one
/// stream `stream`, and nothing else.
pub fn reader_and_sender_of(stream: u32) -> Permissions {
    Permissions {
        global: GlobalPermissions {
            read_streams: true,
            read_topics: true,
            ..GlobalPermissions::default()
        },
        streams: vec![StreamPermissions {
            stream_id: stream,
            read_stream: true,
            read_topics: true,
            send_messages: true,
            poll_messages: true,
            ..StreamPermissions::default()
        }],
    }
}

/// A config whose sign-in gives up fast: a refused user is refused at once, and nothing
/// here should wait for the default bounds.
pub fn quick(mut config: Config) -> Config {
    config.connect_timeout = Duration::from_secs(2);
    config.request_timeout = Duration::from_secs(10);
    config
}

/// How long a user or token a client just wrote takes at most to reach every node: a real
/// follower applies metadata up to half a second after its leader, and signs in against
/// what it has applied.
pub const VISIBLE_WITHIN: Duration = Duration::from_secs(5);

/// How long a purge, once acknowledged, takes at most to wipe a partition. The server
/// acknowledges `PURGE_TOPIC`/`PURGE_STREAM` when it commits, and only then does each
/// replica's partition reconciler reset the partition to an empty log at offset 0 and clear
/// its consumer offsets: a pass away, woken by the commit (milliseconds), or by its 1 s
/// periodic pass should that wake be lost, or after a 1 s back-off should the reset fail.
/// Until then a poll still returns what was stored before the purge.
pub const PURGED_WITHIN: Duration = Duration::from_secs(5);

/// Connects with `$config` through `$connect`, again while the sign-in is refused and
/// [`VISIBLE_WITHIN`] has not passed: a user or token just created may not have reached the
/// node the client signs in on.
macro_rules! signed_in {
    ($connect:ident, $config:expr) => {{
        let config = $config;
        let by = std::time::Instant::now() + sdk_day::VISIBLE_WITHIN;
        loop {
            let result = $connect!(config.clone());
            let refused = matches!(
                &result,
                Err(iggy_route_core::client::ClientError::Request(
                    iggy_route_core::RequestError::SignIn { .. }
                ))
            );
            if refused && std::time::Instant::now() < by {
                std::thread::sleep(std::time::Duration::from_millis(100));
                continue;
            }
            break result.unwrap();
        }
    }};
}

/// Whether `$config` is refused at sign-in, once a change that refuses it (a token
/// deleted, a password changed) has had [`VISIBLE_WITHIN`] to reach every node.
macro_rules! refused_sign_in {
    ($connect:ident, $config:expr) => {{
        let config = $config;
        let by = std::time::Instant::now() + sdk_day::VISIBLE_WITHIN;
        loop {
            let result = $connect!(config.clone());
            if sdk_day::refused_sign_in(result.as_ref().map(|_| ())) {
                break true;
            }
            drop(result);
            if std::time::Instant::now() >= by {
                break false;
            }
            std::thread::sleep(std::time::Duration::from_millis(100));
        }
    }};
}

/// Messaging: a stream, a topic of 3 partitions, 10 messages sent and read back with
/// offsets 0-9 and their payloads, a consumer offset stored, read and deleted.
/// `$wait` is `block_on` for the async client and nothing for the blocking one.
macro_rules! messaging_day {
    ($client:expr, $place:expr, $wait:ident) => {{
        use iggy_route_core::partitioning::Partitioning;
        use iggy_route_core::wire::PollingStrategy;
        let client = &$client;
        let place: &sdk_day::Place = &$place;
        let stream = $wait!(client.create_stream(&place.name("orders"))).unwrap();
        let topic = $wait!(client.create_topic(stream.id, "events", 3)).unwrap();
        assert_eq!(topic.summary.partitions_count, 3);
        let (s, t) = (stream.id, topic.summary.id);
        place.spread(s, t, 3);
        $wait!(client.send(s, t, Partitioning::PartitionId(1), sdk_day::ten_messages())).unwrap();
        let polled = $wait!(client.poll(
            s,
            t,
            Some(1),
            sdk_day::consumer(1),
            PollingStrategy::Offset(0),
            10
        ))
        .unwrap();
        let read: Vec<(u64, String)> = polled
            .messages
            .iter()
            .map(|m| (m.offset, String::from_utf8(m.payload.to_vec()).unwrap()))
            .collect();
        let expected: Vec<(u64, String)> = (0..10).map(|i| (i, format!("m{i}"))).collect();
        assert_eq!(read, expected);

        $wait!(client.store_offset(sdk_day::consumer(7), s, t, 1, 9)).unwrap();
        let stored = $wait!(client.get_consumer_offset(sdk_day::consumer(7), s, t, Some(1)))
            .unwrap()
            .expect("the offset just stored");
        assert_eq!(
            (
                stored.partition_id,
                stored.stored_offset,
                stored.current_offset
            ),
            (1, 9, 9)
        );
        $wait!(client.delete_consumer_offset(sdk_day::consumer(7), s, t, Some(1))).unwrap();
        let gone = $wait!(client.get_consumer_offset(sdk_day::consumer(7), s, t, Some(1))).unwrap();
        assert_eq!(gone, None);
        let none_stored =
            $wait!(client.get_consumer_offset(sdk_day::consumer(8), s, t, Some(2))).unwrap();
        assert_eq!(none_stored, None);
        $wait!(client.delete_stream(s)).unwrap();
    }};
}

/// Streams and topics: create, get by id and by name, list, update, purge and delete, and
/// the typed answers to what does not exist.
macro_rules! metadata_day {
    ($client:expr, $place:expr, $wait:ident) => {{
        use iggy_route_core::partitioning::Partitioning;
        use iggy_route_core::wire::{ErrorCode, PollingStrategy, TopicUpdateOptions};
        let client = &$client;
        let place: &sdk_day::Place = &$place;
        let name = place.name("books");
        let stream = $wait!(client.create_stream(&name)).unwrap();
        let s = stream.id;
        let by_id = $wait!(client.get_stream(s)).unwrap().expect("by id");
        let by_name = $wait!(client.get_stream(name.as_str()))
            .unwrap()
            .expect("by name");
        assert_eq!((by_id.id, by_id.name.as_str()), (s, name.as_str()));
        assert_eq!(by_name.id, s);
        let listed = $wait!(client.get_streams()).unwrap();
        assert!(
            listed.iter().any(|l| l.id == s && l.name.as_str() == name),
            "{listed:?}"
        );

        let topic = $wait!(client.create_topic(s, "chapters", 2)).unwrap();
        let t = topic.summary.id;
        place.spread(s, t, 2);
        let topic_by_name = $wait!(client.get_topic(s, "chapters"))
            .unwrap()
            .expect("topic");
        assert_eq!(topic_by_name.summary.id, t);
        let topics = $wait!(client.get_topics(s)).unwrap();
        assert_eq!(
            topics.iter().map(|t| t.name.as_str()).collect::<Vec<_>>(),
            ["chapters"]
        );

        let renamed = place.name("volumes");
        $wait!(client.update_stream(s, &renamed)).unwrap();
        assert!(
            $wait!(client.get_stream(renamed.as_str()))
                .unwrap()
                .is_some()
        );
        assert!($wait!(client.get_stream(name.as_str())).unwrap().is_none());
        $wait!(client.update_topic(s, t, "pages", TopicUpdateOptions::default())).unwrap();
        let pages = $wait!(client.get_topic(s, "pages"))
            .unwrap()
            .expect("renamed topic");
        assert_eq!((pages.summary.id, pages.summary.partitions_count), (t, 2));

        $wait!(client.create_partitions(s, t, 2)).unwrap();
        $wait!(client.delete_partitions(s, t, 2)).unwrap();
        let after = $wait!(client.get_topic(s, t)).unwrap().expect("topic");
        assert_eq!(after.summary.partitions_count, 2);

        $wait!(client.send(s, t, Partitioning::PartitionId(0), sdk_day::ten_messages())).unwrap();
        $wait!(client.purge_topic(s, t)).unwrap();
        // The ack comes before the wipe (see `PURGED_WITHIN`): poll until the messages are
        // gone, and no longer.
        let acknowledged = std::time::Instant::now();
        loop {
            let polled = $wait!(client.poll(
                s,
                t,
                Some(0),
                sdk_day::consumer(1),
                PollingStrategy::Offset(0),
                10
            ))
            .unwrap();
            if polled.messages.is_empty() {
                break;
            }
            assert!(
                acknowledged.elapsed() < sdk_day::PURGED_WITHIN,
                "partition 0 still returned {} messages {:?} after its purge was acknowledged",
                polled.messages.len(),
                acknowledged.elapsed()
            );
            std::thread::sleep(std::time::Duration::from_millis(10));
        }
        $wait!(client.purge_stream(s)).unwrap();
        // The server commits a segment delete as the partition truncation it resolves it to,
        // and answers under that operation.
        $wait!(client.delete_segments(s, t, 0, 1)).unwrap();
        let missing = $wait!(client.delete_segments(s, t, 99, 1));
        assert_eq!(sdk_day::status_of(missing), ErrorCode::PartitionNotFound);

        // Consumer groups: created and deleted on the metadata leader, read back at once
        // (our own write), by id and by name; their not-founds typed as the server's.
        let group = $wait!(client.create_consumer_group(s, t, "readers")).unwrap();
        assert_eq!(
            (group.info.partitions_count, group.info.members_count),
            (2, 0)
        );
        let g = group.info.id;
        let by_id = $wait!(client.get_consumer_group(s, t, g))
            .unwrap()
            .expect("group");
        assert_eq!(by_id.info.name.as_str(), "readers");
        let by_name = $wait!(client.get_consumer_group(s, t, "readers"))
            .unwrap()
            .expect("group by name");
        assert_eq!((by_name.info.id, by_name.members.len()), (g, 0));
        let taken = $wait!(client.create_consumer_group(s, t, "readers"));
        assert_eq!(sdk_day::status_of(taken).as_u32(), 5004, "name taken");
        $wait!(client.create_consumer_group(s, t, "auditors")).unwrap();
        // The server lists a topic's groups in its hash map's order: compare them sorted.
        let groups = $wait!(client.get_consumer_groups(s, t)).unwrap();
        let mut names: Vec<&str> = groups.iter().map(|g| g.name.as_str()).collect();
        names.sort_unstable();
        assert_eq!(names, ["auditors", "readers"]);
        $wait!(client.delete_consumer_group(s, t, g)).unwrap();
        assert!(
            $wait!(client.get_consumer_group(s, t, g))
                .unwrap()
                .is_none()
        );
        let gone = $wait!(client.delete_consumer_group(s, t, g));
        assert_eq!(sdk_day::status_of(gone).as_u32(), 5000, "group not found");

        $wait!(client.delete_topic(s, t)).unwrap();
        assert!($wait!(client.get_topic(s, t)).unwrap().is_none());
        assert!($wait!(client.get_topics(s)).unwrap().is_empty());
        $wait!(client.delete_stream(s)).unwrap();
        assert!($wait!(client.get_stream(s)).unwrap().is_none());
        let listed = $wait!(client.get_streams()).unwrap();
        assert!(!listed.iter().any(|l| l.id == s), "{listed:?}");

        // What does not exist is answered with the server's own status, typed.
        let missing = $wait!(client.delete_stream(s));
        assert_eq!(sdk_day::status_of(missing), ErrorCode::StreamIdNotFound);
        // By name too: the real server answers a name it does not know with the id code.
        let missing = $wait!(client.update_stream(renamed.as_str(), "anything"));
        assert_eq!(sdk_day::status_of(missing), ErrorCode::StreamIdNotFound);
    }};
}

/// The system reads: ping, me, the clients, one client, stats.
macro_rules! system_day {
    ($client:expr, $place:expr, $wait:ident) => {{
        let client = &$client;
        let place: &sdk_day::Place = &$place;
        $wait!(client.ping()).unwrap();
        let me = $wait!(client.get_me()).unwrap();
        let clients = $wait!(client.get_clients()).unwrap();
        assert!(
            clients.iter().any(|c| c.client_id == me.client.client_id),
            "me among the clients: {clients:?}"
        );
        let again = $wait!(client.get_client(me.client.client_id))
            .unwrap()
            .expect("my own client");
        assert_eq!(again.client.user_id, me.client.user_id);
        assert_eq!($wait!(client.get_client(u32::MAX - 1)).unwrap(), None);
        let stats = $wait!(client.get_stats()).unwrap();
        assert!(stats.clients_count >= 1, "{stats:?}");
        let cluster = $wait!(client.get_cluster_metadata()).unwrap();
        assert_eq!(cluster.nodes.len(), place.nodes, "{cluster:?}");
    }};
}

/// Users: a second user with limited permissions is refused what it may not do and allowed
/// what it may; a personal access token logs in as its user; passwords and tokens change.
/// `$connect` turns a `Config` into a connected client (or the error).
macro_rules! users_day {
    ($root:expr, $place:expr, $wait:ident, $connect:ident) => {{
        use iggy_route_core::Credentials;
        use iggy_route_core::partitioning::Partitioning;
        use iggy_route_core::wire::{ErrorCode, TokenExpiry, UserStatus};
        let root = &$root;
        let place: &sdk_day::Place = &$place;
        let stream = $wait!(root.create_stream(&place.name("shared"))).unwrap();
        let s = stream.id;
        let t = $wait!(root.create_topic(s, "events", 1))
            .unwrap()
            .summary
            .id;
        let other = $wait!(root.create_stream(&place.name("private")))
            .unwrap()
            .id;
        $wait!(root.create_topic(other, "events", 1)).unwrap();

        let username = place.name("ann");
        let created = $wait!(root.create_user(
            &username,
            "ann-password",
            UserStatus::Active,
            Some(sdk_day::reader_and_sender_of(s))
        ))
        .unwrap();
        assert_eq!(created.username.as_str(), username);
        let fetched = $wait!(root.get_user(username.as_str()))
            .unwrap()
            .expect("ann");
        assert_eq!(fetched.id, created.id);
        assert_eq!(fetched.permissions, Some(sdk_day::reader_and_sender_of(s)));
        let users = $wait!(root.get_users()).unwrap();
        assert!(users.iter().any(|u| u.id == created.id), "{users:?}");

        let ann_credentials = Credentials::user(&username, "ann-password").unwrap();
        let ann = signed_in!($connect, sdk_day::quick(place.config_as(ann_credentials)));
        // Allowed: reads, and sends to the stream she was given. Root's topic reaches the
        // node holding her session within the followers' lag (half a second).
        let visible_by = std::time::Instant::now() + std::time::Duration::from_secs(5);
        while $wait!(ann.get_topic(s, t)).unwrap().is_none() {
            assert!(
                std::time::Instant::now() < visible_by,
                "root's topic never showed"
            );
            std::thread::sleep(std::time::Duration::from_millis(50));
        }
        assert!($wait!(ann.get_stream(s)).unwrap().is_some());
        $wait!(ann.send(s, t, Partitioning::PartitionId(0), sdk_day::ten_messages())).unwrap();
        // Refused, with the server's status: what needs a permission she lacks.
        let refused = $wait!(ann.create_stream(&place.name("not-hers")));
        assert_eq!(sdk_day::status_of(refused), ErrorCode::Unauthorized);
        let refused = $wait!(ann.send(
            other,
            0u32,
            Partitioning::PartitionId(0),
            sdk_day::ten_messages()
        ));
        assert_eq!(sdk_day::status_of(refused), ErrorCode::Unauthorized);
        let refused = $wait!(ann.get_users());
        assert_eq!(sdk_day::status_of(refused), ErrorCode::Unauthorized);
        let refused = $wait!(ann.delete_stream(s));
        assert_eq!(sdk_day::status_of(refused), ErrorCode::Unauthorized);

        // A user who may send to the stream and nothing else: the router cannot read the
        // topic for her, yet a send naming its partition goes, as with the SDK; one that
        // needs the partition count fails with the server's word, at once.
        let sender = place.name("bob");
        let only_send = iggy_route_core::wire::Permissions {
            streams: vec![iggy_route_core::wire::StreamPermissions {
                stream_id: s,
                send_messages: true,
                ..Default::default()
            }],
            ..Default::default()
        };
        let bob_id =
            $wait!(root.create_user(&sender, "bob-password", UserStatus::Active, Some(only_send)))
                .unwrap()
                .id;
        let bob = signed_in!(
            $connect,
            sdk_day::quick(place.config_as(Credentials::user(&sender, "bob-password").unwrap()))
        );
        let refused = $wait!(bob.get_topic(s, t));
        assert_eq!(sdk_day::status_of(refused), ErrorCode::Unauthorized);
        $wait!(bob.send(s, t, Partitioning::PartitionId(0), sdk_day::ten_messages())).unwrap();
        let refused = $wait!(bob.send(s, t, Partitioning::Balanced, sdk_day::ten_messages()));
        assert_eq!(sdk_day::status_of(refused), ErrorCode::Unauthorized);
        $wait!(root.delete_user(bob_id)).unwrap();

        // A token of hers signs in as her.
        let token = $wait!(ann.create_personal_access_token("laptop", TokenExpiry::Never)).unwrap();
        assert!(
            !format!("{token:?}").contains(token.expose()),
            "the token stays out of Debug"
        );
        let listed = $wait!(ann.get_personal_access_tokens()).unwrap();
        assert_eq!(
            listed.iter().map(|t| t.name.as_str()).collect::<Vec<_>>(),
            ["laptop"]
        );
        let by_token = signed_in!(
            $connect,
            sdk_day::quick(place.config_as(Credentials::PersonalAccessToken(token.clone())))
        );
        let me = $wait!(by_token.get_me()).unwrap();
        assert_eq!(me.client.user_id, created.id);
        let refused = $wait!(by_token.create_stream(&place.name("by-token")));
        assert_eq!(sdk_day::status_of(refused), ErrorCode::Unauthorized);
        $wait!(ann.delete_personal_access_token("laptop")).unwrap();
        assert!($wait!(ann.get_personal_access_tokens()).unwrap().is_empty());
        let stale = sdk_day::quick(place.config_as(Credentials::PersonalAccessToken(token)));
        assert!(
            refused_sign_in!($connect, stale),
            "a deleted token no longer signs in"
        );

        // Granted more, she may do more; renamed and with a new password, she signs in so.
        let mut more = sdk_day::reader_and_sender_of(s);
        more.global.manage_streams = true;
        $wait!(root.update_permissions(created.id, Some(more))).unwrap();
        let hers = $wait!(ann.create_stream(&place.name("hers"))).unwrap();
        $wait!(ann.delete_stream(hers.id)).unwrap();
        let renamed = place.name("anne");
        $wait!(root.update_user(created.id, Some(renamed.as_str()), None)).unwrap();
        $wait!(ann.change_password(created.id, "ann-password", "anne-password")).unwrap();
        let old =
            sdk_day::quick(place.config_as(Credentials::user(&renamed, "ann-password").unwrap()));
        assert!(
            refused_sign_in!($connect, old),
            "the old password no longer signs in"
        );
        let anne = signed_in!(
            $connect,
            sdk_day::quick(place.config_as(Credentials::user(&renamed, "anne-password").unwrap()))
        );
        assert_eq!($wait!(anne.get_me()).unwrap().client.user_id, created.id);

        $wait!(root.delete_user(created.id)).unwrap();
        assert!($wait!(root.get_user(created.id)).unwrap().is_none());
        let deleted =
            sdk_day::quick(place.config_as(Credentials::user(&renamed, "anne-password").unwrap()));
        assert!(
            refused_sign_in!($connect, deleted),
            "a deleted user no longer signs in"
        );
        $wait!(root.delete_stream(s)).unwrap();
        $wait!(root.delete_stream(other)).unwrap();
    }};
}

/// Logging out ends the session; the client signs in again for its next request.
macro_rules! logout_day {
    ($client:expr, $wait:ident) => {{
        let client = &$client;
        let before = $wait!(client.get_me()).unwrap();
        $wait!(client.logout_user()).unwrap();
        let after = $wait!(client.get_me()).unwrap();
        assert_ne!(
            after.client.client_id, before.client.client_id,
            "a new session"
        );
        assert_eq!(after.client.user_id, before.client.user_id);
    }};
}
