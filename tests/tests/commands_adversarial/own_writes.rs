//! Reads right after the client's own metadata writes see them; writes go to the metadata leader
//! and never move the session.

#[allow(clippy::wildcard_imports)]
use super::*;

pub(super) fn own_metadata_writes_are_read_back_at_once(adapter: Adapter) {
    let _dog = watchdog("own_metadata_writes", Duration::from_secs(240));
    let world = world();
    // The session on node 2, the metadata leader on node 0.
    let client = world.connect(adapter, 2);
    let me = call!(client, get_me()).unwrap();
    let iterations: u32 = 12;
    for i in 0..iterations {
        let name = format!("s{i}");
        let stream = call!(client, create_stream(&name)).unwrap();
        let s = stream.id;
        let listed = call!(client, get_streams()).unwrap();
        assert!(
            listed.iter().any(|l| l.id == s && l.name.as_str() == name),
            "{i}: create_stream then get_streams: {listed:?}"
        );
        let by_name = call!(client, get_stream(name.as_str())).unwrap();
        assert_eq!(by_name.map(|d| d.id), Some(s), "{i}: get_stream by name");

        let t = call!(client, create_topic(s, "t", 2)).unwrap().summary.id;
        world.cluster.set_primary(s, t, 0, 1);
        world.cluster.set_primary(s, t, 1, 2);
        let topics = call!(client, get_topics(s)).unwrap();
        let shown: Vec<(String, u32)> = topics
            .iter()
            .map(|t| (t.name.to_string(), t.partitions_count))
            .collect();
        assert_eq!(
            shown,
            [("t".to_owned(), 2)],
            "{i}: create_topic then get_topics"
        );
        let topic = call!(client, get_topic(name.as_str(), "t")).unwrap();
        assert_eq!(
            topic.map(|t| (t.summary.id, t.partitions.len())),
            Some((t, 2)),
            "{i}: create_topic then get_topic by names"
        );
        let stream_now = call!(client, get_stream(s)).unwrap().unwrap();
        assert_eq!(
            stream_now.topics_count, 1,
            "{i}: get_stream after create_topic"
        );

        call!(client, create_partitions(s, t, 3)).unwrap();
        let topic = call!(client, get_topic(s, t)).unwrap().unwrap();
        assert_eq!(
            (topic.summary.partitions_count, topic.partitions.len()),
            (5, 5),
            "{i}: create_partitions then get_topic"
        );
        let listed = call!(client, get_topics(s)).unwrap();
        assert_eq!(
            listed.first().map(|t| t.partitions_count),
            Some(5),
            "{i}: create_partitions then get_topics"
        );
        // The new partitions are sent to at once.
        call!(
            client,
            send(s, t, Partitioning::partition_id(4), messages("new", 1))
        )
        .unwrap();

        let renamed = format!("r{i}");
        call!(client, update_stream(s, &renamed)).unwrap();
        let got = call!(client, get_stream(renamed.as_str())).unwrap();
        assert_eq!(
            got.map(|d| d.id),
            Some(s),
            "{i}: update_stream then get_stream"
        );
        assert!(
            call!(client, get_stream(name.as_str())).unwrap().is_none(),
            "{i}: the old stream name after update_stream"
        );
        let names: Vec<String> = call!(client, get_streams())
            .unwrap()
            .iter()
            .map(|l| l.name.to_string())
            .collect();
        assert!(
            names.contains(&renamed) && !names.contains(&name),
            "{i}: update_stream then get_streams: {names:?}"
        );

        let expiry = 1_000_000 + u64::from(i);
        let options = TopicUpdateOptions {
            message_expiry: Some(expiry),
            ..TopicUpdateOptions::default()
        };
        call!(client, update_topic(s, t, "u", options)).unwrap();
        let got = call!(client, get_topic(s, "u")).unwrap();
        assert_eq!(
            got.map(|d| (d.summary.id, d.summary.message_expiry)),
            Some((t, expiry)),
            "{i}: update_topic then get_topic"
        );
        assert!(
            call!(client, get_topic(s, "t")).unwrap().is_none(),
            "{i}: the old topic name after update_topic"
        );
        let names: Vec<String> = call!(client, get_topics(s))
            .unwrap()
            .iter()
            .map(|t| t.name.to_string())
            .collect();
        assert_eq!(names, ["u"], "{i}: update_topic then get_topics");

        call!(client, delete_partitions(s, t, 4)).unwrap();
        let topic = call!(client, get_topic(s, t)).unwrap().unwrap();
        assert_eq!(
            topic.summary.partitions_count, 1,
            "{i}: delete_partitions then get_topic"
        );
        call!(client, purge_topic(s, t)).unwrap();
        call!(client, delete_topic(s, t)).unwrap();
        assert!(
            call!(client, get_topics(s)).unwrap().is_empty(),
            "{i}: delete_topic then get_topics"
        );
        assert!(
            call!(client, get_topic(s, t)).unwrap().is_none(),
            "{i}: delete_topic then get_topic"
        );
        assert_eq!(
            call!(client, get_stream(s)).unwrap().unwrap().topics_count,
            0,
            "{i}: delete_topic then get_stream"
        );
        call!(client, delete_stream(s)).unwrap();
        let listed = call!(client, get_streams()).unwrap();
        assert!(
            !listed.iter().any(|l| l.id == s),
            "{i}: delete_stream then get_streams: {listed:?}"
        );
        assert!(call!(client, get_stream(s)).unwrap().is_none());
    }

    // Every write reached the leader exactly once, and no follower.
    let writes = [
        ("create_stream", code::CREATE_STREAM),
        ("create_topic", code::CREATE_TOPIC),
        ("create_partitions", code::CREATE_PARTITIONS),
        ("update_stream", code::UPDATE_STREAM),
        ("update_topic", code::UPDATE_TOPIC),
        ("delete_partitions", code::DELETE_PARTITIONS),
        ("purge_topic", code::PURGE_TOPIC),
        ("delete_topic", code::DELETE_TOPIC),
        ("delete_stream", code::DELETE_STREAM),
    ];
    for (what, command) in writes {
        let counts: Vec<u64> = (0..3).map(|node| world.requests(node, command)).collect();
        assert_eq!(
            counts,
            [iterations.into(), 0, 0],
            "{what}: requests per node (the leader is node 0)"
        );
    }
    // The list reads (each made right after a write of ours) were served by the leader.
    for (what, command) in [
        ("get_streams", code::GET_STREAMS),
        ("get_topics", code::GET_TOPICS),
    ] {
        let followers = world.requests(1, command) + world.requests(2, command);
        assert_eq!(
            followers, 0,
            "{what} right after our writes reached a follower"
        );
    }
    assert_eq!(client.stats().session_moves, 0);
    let after = call!(client, get_me()).unwrap();
    assert_eq!(
        after.client.client_id, me.client.client_id,
        "the session moved"
    );
    // The session's node answered `get_me`, both times.
    assert_eq!(world.requests(2, code::GET_ME), 2);
}
both_adapters!(own_metadata_writes_are_read_back_at_once);

pub(super) fn user_and_token_writes_are_read_back_at_once(adapter: Adapter) {
    let _dog = watchdog("own_user_writes", Duration::from_secs(240));
    let world = world();
    let client = world.connect(adapter, 1);
    let iterations: u32 = 8;
    for i in 0..iterations {
        let name = format!("user-{i}");
        let granted = Permissions {
            global: GlobalPermissions {
                read_streams: i % 2 == 0,
                read_users: true,
                ..GlobalPermissions::default()
            },
            streams: vec![StreamPermissions {
                stream_id: i,
                poll_messages: true,
                ..StreamPermissions::default()
            }],
        };
        let created = call!(
            client,
            create_user(&name, "first-pw", UserStatus::Active, Some(granted.clone()))
        )
        .unwrap();
        let users = call!(client, get_users()).unwrap();
        assert!(
            users
                .iter()
                .any(|u| u.id == created.id && u.username.as_str() == name),
            "{i}: create_user then get_users: {users:?}"
        );
        let got = call!(client, get_user(name.as_str())).unwrap().unwrap();
        assert_eq!(
            (got.id, got.permissions),
            (created.id, Some(granted)),
            "{i}: create_user then get_user"
        );

        let renamed = format!("renamed-{i}");
        call!(
            client,
            update_user(
                created.id,
                Some(renamed.as_str()),
                Some(UserStatus::Inactive)
            )
        )
        .unwrap();
        let got = call!(client, get_user(renamed.as_str())).unwrap();
        assert_eq!(
            got.map(|u| (u.id, u.status)),
            Some((created.id, UserStatus::Inactive)),
            "{i}: update_user then get_user"
        );
        assert!(call!(client, get_user(name.as_str())).unwrap().is_none());
        let users = call!(client, get_users()).unwrap();
        assert!(
            users.iter().any(|u| u.username.as_str() == renamed)
                && !users.iter().any(|u| u.username.as_str() == name),
            "{i}: update_user then get_users: {users:?}"
        );

        let replaced = Permissions {
            global: GlobalPermissions {
                manage_topics: true,
                ..GlobalPermissions::default()
            },
            streams: Vec::new(),
        };
        call!(
            client,
            update_permissions(created.id, Some(replaced.clone()))
        )
        .unwrap();
        let got = call!(client, get_user(created.id)).unwrap().unwrap();
        assert_eq!(
            got.permissions,
            Some(replaced),
            "{i}: update_permissions then get_user"
        );
        call!(client, update_permissions(created.id, None)).unwrap();
        let got = call!(client, get_user(created.id)).unwrap().unwrap();
        assert!(
            got.permissions.is_none() || got.permissions == Some(Permissions::default()),
            "{i}: permissions removed, read back as {:?}",
            got.permissions
        );

        call!(client, change_password(created.id, "first-pw", "second-pw")).unwrap();
        // The old password is no longer the current one, at once.
        assert_eq!(
            server_code(call!(
                client,
                change_password(created.id, "first-pw", "third-pw")
            )),
            ErrorCode::InvalidCredentials,
            "{i}: change_password twice with the same current password"
        );

        let token_name = format!("tok-{i}");
        let token = call!(
            client,
            create_personal_access_token(&token_name, TokenExpiry::Never)
        )
        .unwrap();
        assert!(!token.expose().is_empty());
        let tokens = call!(client, get_personal_access_tokens()).unwrap();
        assert!(
            tokens.iter().any(|t| t.name.as_str() == token_name),
            "{i}: create_personal_access_token then get_personal_access_tokens: {tokens:?}"
        );
        call!(client, delete_personal_access_token(&token_name)).unwrap();
        let tokens = call!(client, get_personal_access_tokens()).unwrap();
        assert!(
            !tokens.iter().any(|t| t.name.as_str() == token_name),
            "{i}: delete_personal_access_token then get_personal_access_tokens: {tokens:?}"
        );

        call!(client, delete_user(created.id)).unwrap();
        assert!(
            call!(client, get_user(created.id)).unwrap().is_none(),
            "{i}: delete_user then get_user"
        );
        let users = call!(client, get_users()).unwrap();
        assert!(
            !users.iter().any(|u| u.id == created.id),
            "{i}: delete_user then get_users: {users:?}"
        );
    }
    let iterations = u64::from(iterations);
    let writes = [
        ("create_user", code::CREATE_USER, iterations),
        ("update_user", code::UPDATE_USER, iterations),
        (
            "update_permissions",
            code::UPDATE_PERMISSIONS,
            2 * iterations,
        ),
        ("change_password", code::CHANGE_PASSWORD, 2 * iterations),
        ("create_pat", code::CREATE_PERSONAL_ACCESS_TOKEN, iterations),
        ("delete_pat", code::DELETE_PERSONAL_ACCESS_TOKEN, iterations),
        ("delete_user", code::DELETE_USER, iterations),
    ];
    for (what, command, expected) in writes {
        let counts: Vec<u64> = (0..3).map(|node| world.requests(node, command)).collect();
        assert_eq!(counts, [expected, 0, 0], "{what}: requests per node");
    }
    for (what, command) in [
        ("get_users", code::GET_USERS),
        (
            "get_personal_access_tokens",
            code::GET_PERSONAL_ACCESS_TOKENS,
        ),
    ] {
        let followers = world.requests(1, command) + world.requests(2, command);
        assert_eq!(
            followers, 0,
            "{what} right after our writes reached a follower"
        );
    }
    assert_eq!(client.stats().session_moves, 0);
}
both_adapters!(user_and_token_writes_are_read_back_at_once);

/// The metadata leader moves (a metadata-only election) between our writes: each write
/// follows it, is admitted once (by the new leader), the session stays, and the list read
/// right after still sees the write, though the old leader is now a lagging follower.
pub(super) fn metadata_writes_follow_a_moved_leader(adapter: Adapter) {
    let _dog = watchdog("moved_leader", Duration::from_secs(120));
    let world = world();
    let client = world.connect(adapter, 2);
    let me = call!(client, get_me()).unwrap();
    call!(client, create_stream("before")).unwrap();
    for (round, leader) in [1usize, 2, 0, 1].into_iter().enumerate() {
        world.cluster.set_metadata_leader(leader);
        let counts = |command| -> Vec<u64> { (0..3).map(|n| world.requests(n, command)).collect() };
        let streams_before = counts(code::CREATE_STREAM);
        let topics_before = counts(code::CREATE_TOPIC);
        let name = format!("moved-{round}");
        let s = call!(client, create_stream(&name)).unwrap().id;
        let listed = call!(client, get_streams()).unwrap();
        assert!(
            listed.iter().any(|l| l.id == s && l.name.as_str() == name),
            "round {round} (leader {leader}): create_stream then get_streams: {listed:?}"
        );
        let t = call!(client, create_topic(s, "t", 2)).unwrap().summary.id;
        let topics = call!(client, get_topics(s)).unwrap();
        assert_eq!(
            topics.iter().map(|t| t.id).collect::<Vec<_>>(),
            [t],
            "round {round} (leader {leader}): create_topic then get_topics"
        );
        call!(
            client,
            send(s, t, Partitioning::partition_id(1), messages("m", 1))
        )
        .unwrap();
        // Admitted once, by the new leader (another node may have refused it first).
        let admitted = |before: &[u64], command| world.requests(leader, command) - before[leader];
        assert_eq!(
            admitted(&streams_before, code::CREATE_STREAM),
            1,
            "round {round}"
        );
        assert_eq!(
            admitted(&topics_before, code::CREATE_TOPIC),
            1,
            "round {round}"
        );
        let same_name = world.with_streams_named(&name);
        assert_eq!(same_name, 1, "round {round}: streams named {name}");
    }
    assert_eq!(client.stats().session_moves, 0);
    assert_eq!(
        call!(client, get_me()).unwrap().client.client_id,
        me.client.client_id
    );
}
both_adapters!(metadata_writes_follow_a_moved_leader);

/// Partition counts the server refuses (0 partitions added or removed, more than 1,000 in
/// one request, more than the topic has): a typed refusal, and the topic unchanged.
pub(super) fn partition_counts_out_of_range(place: &Place, adapter: Adapter) -> Vec<String> {
    let client = Cl::connect(adapter, place.root.clone()).unwrap();
    let s = call!(client, create_stream(&place.name("counts")))
        .unwrap()
        .id;
    let t = call!(client, create_topic(s, "t", 2)).unwrap().summary.id;
    let typed = |result: &Result<(), ClientError>| {
        refused_locally(result)
            || matches!(
                result,
                Err(ClientError::Request(RequestError::Server { .. }))
            )
    };
    let mut seen = Vec::new();
    for (what, result) in [
        (
            "create_partitions 0",
            call!(client, create_partitions(s, t, 0)),
        ),
        (
            "create_partitions 1001",
            call!(client, create_partitions(s, t, 1_001)),
        ),
        (
            "delete_partitions 0",
            call!(client, delete_partitions(s, t, 0)),
        ),
        (
            "delete_partitions 1001",
            call!(client, delete_partitions(s, t, 1_001)),
        ),
        (
            "delete_partitions 3 of 2",
            call!(client, delete_partitions(s, t, 3)),
        ),
    ] {
        assert!(typed(&result), "{what}: {result:?}");
        seen.push(format!("{what}: {}", outcome(&result)));
    }
    let created = call!(client, create_topic(s, "too-many", 1_001));
    assert!(
        refused_locally(&created)
            || matches!(
                created,
                Err(ClientError::Request(RequestError::Server { .. }))
            ),
        "create_topic with 1,001 partitions: {created:?}"
    );
    seen.push(format!("create_topic 1001: {}", outcome(&created)));
    assert!(call!(client, get_topic(s, "too-many")).unwrap().is_none());
    let topic = call!(client, get_topic(s, t)).unwrap().unwrap();
    assert_eq!(topic.summary.partitions_count, 2);
    call!(client, delete_stream(s)).unwrap();
    seen
}

pub(super) fn partition_counts_out_of_range_are_refused_typed(adapter: Adapter) {
    let _dog = watchdog("partition_counts", Duration::from_secs(60));
    let world = world();
    let seen = partition_counts_out_of_range(&world.place(1, "pc"), adapter);
    println!("loopback, {adapter:?}: {seen:?}");
}
both_adapters!(partition_counts_out_of_range_are_refused_typed);
