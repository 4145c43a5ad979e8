//! The real cluster: the shared scenarios against the cluster named by
//! `IGGY_ROUTE_REAL_CLUSTER` (skipped, saying so, without it).

#[allow(clippy::wildcard_imports)]
use super::*;

pub(super) static REAL_SERIAL: Mutex<()> = Mutex::new(());

pub(super) fn real(test: &str) -> Option<(RealCluster, MutexGuard<'static, ()>)> {
    let cluster = RealCluster::from_env(test)?;
    install();
    Some((cluster, lock(&REAL_SERIAL)))
}

pub(super) fn real_place(cluster: &RealCluster, session_node: usize, prefix: &str) -> Place {
    let mut root = cluster.config(session_node);
    root.request_timeout = Duration::from_secs(30);
    root.connect_timeout = Duration::from_secs(5);
    Place {
        root,
        prefix: unique_name(prefix),
        spread: None,
        settle: Duration::from_secs(3),
    }
}

/// Read-after-own-write for every list and get command on the real cluster, with the
/// session on each node (so on followers too).
pub(super) fn real_own_writes(place: &Place, adapter: Adapter) -> Vec<String> {
    let client = Cl::connect(adapter, place.root.clone()).unwrap();
    let mut failures = Vec::new();
    let mut check = |what: &str, ok: bool, shown: String| {
        if !ok {
            failures.push(format!("{what}: {shown}"));
        }
    };
    let name = place.name("own");
    let s = call!(client, create_stream(&name)).unwrap().id;
    let listed = call!(client, get_streams()).unwrap();
    check(
        "create_stream then get_streams",
        listed.iter().any(|l| l.id == s),
        format!("{} streams, not {s}", listed.len()),
    );
    let got = call!(client, get_stream(name.as_str())).unwrap();
    check(
        "create_stream then get_stream by name",
        got.as_ref().map(|d| d.id) == Some(s),
        format!("{got:?}"),
    );
    let t = call!(client, create_topic(s, "t", 2)).unwrap().summary.id;
    let topics = call!(client, get_topics(s)).unwrap();
    check(
        "create_topic then get_topics",
        topics.iter().map(|t| t.name.as_str()).collect::<Vec<_>>() == ["t"],
        format!("{topics:?}"),
    );
    let got = call!(client, get_topic(name.as_str(), "t")).unwrap();
    check(
        "create_topic then get_topic",
        got.as_ref().map(|d| d.summary.id) == Some(t),
        format!("{got:?}"),
    );
    let got = call!(client, get_stream(s)).unwrap();
    check(
        "create_topic then get_stream's topics_count",
        got.as_ref().map(|d| d.topics_count) == Some(1),
        format!("{:?}", got.map(|d| d.topics_count)),
    );
    call!(client, create_partitions(s, t, 2)).unwrap();
    let got = call!(client, get_topic(s, t)).unwrap();
    check(
        "create_partitions then get_topic",
        got.as_ref().map(|d| d.summary.partitions_count) == Some(4),
        format!("{:?}", got.map(|d| d.summary.partitions_count)),
    );
    let sent = call!(
        client,
        send(s, t, Partitioning::partition_id(3), messages("new", 1))
    );
    check(
        "create_partitions then send to the new one",
        sent.is_ok(),
        outcome(&sent),
    );
    let renamed = place.name("own-renamed");
    call!(client, update_stream(s, &renamed)).unwrap();
    let got = call!(client, get_stream(renamed.as_str())).unwrap();
    check(
        "update_stream then get_stream by the new name",
        got.as_ref().map(|d| d.id) == Some(s),
        format!("{got:?}"),
    );
    let old = call!(client, get_stream(name.as_str())).unwrap();
    check(
        "update_stream then get_stream by the old name",
        old.is_none(),
        format!("{old:?}"),
    );
    let listed = call!(client, get_streams()).unwrap();
    let shown: Vec<&str> = listed
        .iter()
        .filter(|l| l.id == s)
        .map(|l| l.name.as_str())
        .collect();
    check(
        "update_stream then get_streams",
        shown == [renamed.as_str()],
        format!("{shown:?}"),
    );
    let options = TopicUpdateOptions {
        message_expiry: Some(5_000_000),
        ..TopicUpdateOptions::default()
    };
    call!(client, update_topic(s, t, "u", options)).unwrap();
    let got = call!(client, get_topic(s, "u")).unwrap();
    check(
        "update_topic then get_topic by the new name",
        got.as_ref()
            .map(|d| (d.summary.id, d.summary.message_expiry))
            == Some((t, 5_000_000)),
        format!(
            "{:?}",
            got.map(|d| (d.summary.id, d.summary.message_expiry))
        ),
    );
    let old = call!(client, get_topic(s, "t")).unwrap();
    check(
        "update_topic then get_topic by the old name",
        old.is_none(),
        format!("{:?}", old.map(|d| d.summary.name)),
    );
    let topics = call!(client, get_topics(s)).unwrap();
    check(
        "update_topic then get_topics",
        topics.iter().map(|t| t.name.as_str()).collect::<Vec<_>>() == ["u"],
        format!(
            "{:?}",
            topics.iter().map(|t| t.name.as_str()).collect::<Vec<_>>()
        ),
    );
    call!(client, delete_partitions(s, t, 3)).unwrap();
    let got = call!(client, get_topic(s, t)).unwrap();
    check(
        "delete_partitions then get_topic",
        got.as_ref().map(|d| d.summary.partitions_count) == Some(1),
        format!("{:?}", got.map(|d| d.summary.partitions_count)),
    );
    let t2 = call!(client, create_topic(s, "second", 1))
        .unwrap()
        .summary
        .id;
    call!(client, delete_topic(s, t)).unwrap();
    let topics = call!(client, get_topics(s)).unwrap();
    check(
        "delete_topic then get_topics",
        topics.iter().map(|t| t.id).collect::<Vec<_>>() == [t2],
        format!(
            "{:?}",
            topics.iter().map(|t| t.name.as_str()).collect::<Vec<_>>()
        ),
    );
    let gone = call!(client, get_topic(s, t)).unwrap();
    check(
        "delete_topic then get_topic",
        gone.is_none(),
        format!("{:?}", gone.map(|d| d.summary.name)),
    );
    let got = call!(client, get_stream(s)).unwrap();
    check(
        "delete_topic then get_stream's topics_count",
        got.as_ref().map(|d| d.topics_count) == Some(1),
        format!("{:?}", got.map(|d| d.topics_count)),
    );
    call!(client, delete_stream(s)).unwrap();
    let listed = call!(client, get_streams()).unwrap();
    check(
        "delete_stream then get_streams",
        !listed.iter().any(|l| l.id == s),
        "still listed".to_owned(),
    );
    let gone = call!(client, get_stream(s)).unwrap();
    check(
        "delete_stream then get_stream",
        gone.is_none(),
        format!("{:?}", gone.map(|d| d.name)),
    );

    // Users and tokens.
    let username = place.name("ru");
    let created = call!(
        client,
        create_user(&username, "ru-password", UserStatus::Active, None)
    )
    .unwrap();
    let users = call!(client, get_users()).unwrap();
    check(
        "create_user then get_users",
        users.iter().any(|u| u.id == created.id),
        format!("{} users", users.len()),
    );
    let got = call!(client, get_user(username.as_str())).unwrap();
    check(
        "create_user then get_user",
        got.as_ref().map(|u| u.id) == Some(created.id),
        format!("{got:?}"),
    );
    let renamed_user = place.name("ru2");
    call!(
        client,
        update_user(
            created.id,
            Some(renamed_user.as_str()),
            Some(UserStatus::Inactive)
        )
    )
    .unwrap();
    let got = call!(client, get_user(created.id)).unwrap();
    check(
        "update_user then get_user",
        got.as_ref().map(|u| (u.username.as_str(), u.status))
            == Some((renamed_user.as_str(), UserStatus::Inactive)),
        format!("{got:?}"),
    );
    let granted = Permissions {
        global: GlobalPermissions {
            read_streams: true,
            ..GlobalPermissions::default()
        },
        streams: Vec::new(),
    };
    call!(
        client,
        update_permissions(created.id, Some(granted.clone()))
    )
    .unwrap();
    let got = call!(client, get_user(created.id)).unwrap();
    check(
        "update_permissions then get_user",
        got.as_ref().and_then(|u| u.permissions.clone()) == Some(granted),
        format!("{:?}", got.map(|u| u.permissions)),
    );
    call!(
        client,
        change_password(created.id, "ru-password", "ru-password-2")
    )
    .unwrap();
    let again = call!(
        client,
        change_password(created.id, "ru-password", "ru-password-3")
    );
    check(
        "change_password then the old password",
        matches!(
            again,
            Err(ClientError::Request(RequestError::Server {
                code: ErrorCode::InvalidCredentials
            }))
        ),
        outcome(&again),
    );
    let token_name = place.name("pat");
    call!(
        client,
        create_personal_access_token(&token_name, TokenExpiry::Never)
    )
    .unwrap();
    let tokens = call!(client, get_personal_access_tokens()).unwrap();
    check(
        "create_personal_access_token then get_personal_access_tokens",
        tokens.iter().any(|t| t.name.as_str() == token_name),
        format!("{tokens:?}"),
    );
    call!(client, delete_personal_access_token(&token_name)).unwrap();
    let tokens = call!(client, get_personal_access_tokens()).unwrap();
    check(
        "delete_personal_access_token then get_personal_access_tokens",
        !tokens.iter().any(|t| t.name.as_str() == token_name),
        format!("{tokens:?}"),
    );
    call!(client, delete_user(created.id)).unwrap();
    let got = call!(client, get_user(created.id)).unwrap();
    check(
        "delete_user then get_user",
        got.is_none(),
        format!("{got:?}"),
    );
    let users = call!(client, get_users()).unwrap();
    check(
        "delete_user then get_users",
        !users.iter().any(|u| u.id == created.id),
        "still listed".to_owned(),
    );
    assert_eq!(client.stats().session_moves, 0);
    failures
}

#[test]
pub(super) fn real_own_writes_are_read_back_at_once() {
    let Some((cluster, _serial)) = real("real_own_writes_are_read_back_at_once") else {
        return;
    };
    let _dog = watchdog("real_own_writes", Duration::from_secs(600));
    let mut failures = Vec::new();
    for adapter in [Adapter::Tokio, Adapter::Mio] {
        for session in 0..cluster.nodes.len() {
            for round in 0..2 {
                let place = real_place(&cluster, session, &format!("ro{round}"));
                for failure in real_own_writes(&place, adapter) {
                    failures.push(format!("{adapter:?}, session on node {session}: {failure}"));
                }
            }
        }
    }
    assert!(failures.is_empty(), "{failures:#?}");
}

#[test]
pub(super) fn real_commands_on_a_stream_deleted_a_moment_ago() {
    let Some((cluster, _serial)) = real("real_commands_on_a_stream_deleted_a_moment_ago") else {
        return;
    };
    let _dog = watchdog("real_deleted", Duration::from_secs(600));
    for adapter in [Adapter::Tokio, Adapter::Mio] {
        for session in 0..cluster.nodes.len() {
            deleted_a_moment_ago(&real_place(&cluster, session, "rd"), adapter);
        }
    }
}

#[test]
pub(super) fn real_sends_to_partitions_deleted_a_moment_ago() {
    let Some((cluster, _serial)) = real("real_sends_to_partitions_deleted_a_moment_ago") else {
        return;
    };
    let _dog = watchdog("real_deleted_partitions", Duration::from_secs(600));
    for adapter in [Adapter::Tokio, Adapter::Mio] {
        deleted_partitions(&real_place(&cluster, 1, "rp"), adapter);
    }
}

#[test]
pub(super) fn real_purge_then_send_then_poll() {
    let Some((cluster, _serial)) = real("real_purge_then_send_then_poll") else {
        return;
    };
    let _dog = watchdog("real_purge", Duration::from_secs(600));
    for adapter in [Adapter::Tokio, Adapter::Mio] {
        purge_send_poll(&real_place(&cluster, 2, "rpu"), adapter);
    }
}

#[test]
pub(super) fn real_renames_to_taken_names_change_nothing() {
    let Some((cluster, _serial)) = real("real_renames_to_taken_names_change_nothing") else {
        return;
    };
    let _dog = watchdog("real_renames", Duration::from_secs(600));
    for adapter in [Adapter::Tokio, Adapter::Mio] {
        let own = renames(&real_place(&cluster, 1, "rr"), adapter);
        println!("real cluster, {adapter:?}: a stream renamed to its own name: {own}");
    }
}

#[test]
pub(super) fn real_consumer_offsets_of_a_deleted_topic() {
    let Some((cluster, _serial)) = real("real_consumer_offsets_of_a_deleted_topic") else {
        return;
    };
    let _dog = watchdog("real_deleted_topic_offsets", Duration::from_secs(600));
    for adapter in [Adapter::Tokio, Adapter::Mio] {
        offsets_of_deleted_topic(&real_place(&cluster, 2, "rof"), adapter);
    }
}

#[test]
pub(super) fn real_logout_then_every_kind_of_command() {
    let Some((cluster, _serial)) = real("real_logout_then_every_kind_of_command") else {
        return;
    };
    let _dog = watchdog("real_logout", Duration::from_secs(600));
    for adapter in [Adapter::Tokio, Adapter::Mio] {
        logout_then_everything(&real_place(&cluster, 1, "rl"), adapter);
    }
}

#[test]
pub(super) fn real_a_token_of_a_deleted_user() {
    let Some((cluster, _serial)) = real("real_a_token_of_a_deleted_user") else {
        return;
    };
    let _dog = watchdog("real_token_of_deleted_user", Duration::from_secs(600));
    for adapter in [Adapter::Tokio, Adapter::Mio] {
        token_of_deleted_user(&real_place(&cluster, 2, "rk"), adapter);
    }
}

#[test]
pub(super) fn real_a_user_without_permissions_gets_the_server_s_status() {
    let Some((cluster, _serial)) = real("real_a_user_without_permissions") else {
        return;
    };
    let _dog = watchdog("real_unprivileged", Duration::from_secs(600));
    let mut differences = Vec::new();
    for adapter in [Adapter::Tokio, Adapter::Mio] {
        let table = unprivileged_matrix(&real_place(&cluster, 1, "rz"), adapter);
        for (what, got) in &table {
            if *what == "flush" {
                println!("real cluster, {adapter:?}: flush without permissions: {got}");
            }
        }
        for difference in compare(&table, &expected_unprivileged()) {
            differences.push(format!("{adapter:?}: {difference}"));
        }
    }
    assert!(differences.is_empty(), "{differences:#?}");
}

#[test]
pub(super) fn real_a_user_who_may_only_poll_polls_and_commits() {
    let Some((cluster, _serial)) = real("real_a_user_who_may_only_poll") else {
        return;
    };
    let _dog = watchdog("real_poll_only", Duration::from_secs(600));
    let mut differences = Vec::new();
    for adapter in [Adapter::Tokio, Adapter::Mio] {
        let table = poll_only(&real_place(&cluster, 2, "rq"), adapter);
        for difference in compare(&table, &expected_poll_only()) {
            differences.push(format!("{adapter:?}: {difference}"));
        }
    }
    assert!(differences.is_empty(), "{differences:#?}");
}

#[test]
pub(super) fn real_concurrent_calls_of_many_kinds_on_one_client() {
    let Some((cluster, _serial)) = real("real_concurrent_calls") else {
        return;
    };
    let _dog = watchdog("real_concurrent", Duration::from_secs(600));
    for adapter in [Adapter::Tokio, Adapter::Mio] {
        concurrent_calls(&real_place(&cluster, 1, "rc"), adapter, 4, 4);
    }
}

#[test]
pub(super) fn real_non_ascii_names_and_secrets_round_trip() {
    let Some((cluster, _serial)) = real("real_non_ascii_names_and_secrets_round_trip") else {
        return;
    };
    let _dog = watchdog("real_non_ascii", Duration::from_secs(300));
    for adapter in [Adapter::Tokio, Adapter::Mio] {
        non_ascii(&real_place(&cluster, 2, "rü"), adapter);
    }
}

/// `delete_consumer_offset` without a partition on the real server: what it answers, and
/// that a success deleted partition 0's offset.
#[test]
pub(super) fn real_delete_consumer_offset_without_a_partition() {
    let Some((cluster, _serial)) = real("real_delete_consumer_offset_without_a_partition") else {
        return;
    };
    let _dog = watchdog("real_delete_offset_none", Duration::from_secs(300));
    for adapter in [Adapter::Tokio, Adapter::Mio] {
        let place = real_place(&cluster, 1, "rdo");
        let client = Cl::connect(adapter, place.root.clone()).unwrap();
        let s = call!(client, create_stream(&place.name("s"))).unwrap().id;
        let t = call!(client, create_topic(s, "t", 2)).unwrap().summary.id;
        call!(
            client,
            send(s, t, Partitioning::partition_id(0), messages("m", 3))
        )
        .unwrap();
        call!(client, store_offset(consumer(6), s, t, 0, 2)).unwrap();
        let deleted = call!(client, delete_consumer_offset(consumer(6), s, t, None));
        let left = call!(client, get_consumer_offset(consumer(6), s, t, Some(0))).unwrap();
        println!(
            "real cluster, {adapter:?}: delete_consumer_offset(None) -> {}, partition 0's \
             offset after it: {:?}",
            outcome(&deleted),
            left.map(|o| o.stored_offset)
        );
        if deleted.is_ok() {
            assert_eq!(left, None);
        } else {
            server_code(deleted);
        }
        call!(client, delete_stream(s)).unwrap();
    }
}

#[test]
pub(super) fn real_partition_counts_out_of_range_are_refused_typed() {
    let Some((cluster, _serial)) = real("real_partition_counts_out_of_range") else {
        return;
    };
    let _dog = watchdog("real_partition_counts", Duration::from_secs(300));
    for adapter in [Adapter::Tokio, Adapter::Mio] {
        let seen = partition_counts_out_of_range(&real_place(&cluster, 0, "rpc"), adapter);
        println!("real cluster, {adapter:?}: {seen:?}");
    }
}

/// Each node knows only its own connections: `get_client` of a client signed in on another
/// node, and `get_clients`.
#[test]
pub(super) fn real_get_client_of_another_node_s_client() {
    let Some((cluster, _serial)) = real("real_get_client_of_another_node_s_client") else {
        return;
    };
    let _dog = watchdog("real_get_client", Duration::from_secs(300));
    for adapter in [Adapter::Tokio, Adapter::Mio] {
        let here = Cl::connect(adapter, real_place(&cluster, 0, "g").root).unwrap();
        let there = Cl::connect(adapter, real_place(&cluster, 1, "g").root).unwrap();
        let mine = call!(here, get_me()).unwrap();
        let theirs = call!(there, get_me()).unwrap();
        let found = call!(here, get_client(theirs.client.client_id)).unwrap();
        let listed = call!(here, get_clients()).unwrap();
        let own = call!(here, get_client(mine.client.client_id)).unwrap();
        assert_eq!(own.map(|d| d.client.client_id), Some(mine.client.client_id));
        println!(
            "real cluster, {adapter:?}: node 0 asked for node 1's client {}: {:?}; \
             node 0 lists it: {}",
            theirs.client.client_id,
            found.as_ref().map(|d| &d.client),
            listed
                .iter()
                .any(|c| c.client_id == theirs.client.client_id
                    && c.address == theirs.client.address)
        );
        // Whatever it answers is a typed, decoded value; a client it returns is not
        // claimed to be the other node's unless its address is the other client's.
        if let Some(found) = found {
            assert!(
                found.client.address != theirs.client.address
                    || found.client.client_id == theirs.client.client_id
            );
        }
    }
}

/// Token names outside the SDK's HTTP-side 3..=30 bytes on the real server: what it
/// answers (its binary path checks no length), typed, and a token it made is listed.
#[test]
pub(super) fn real_token_names_outside_3_to_30_bytes() {
    let Some((cluster, _serial)) = real("real_token_names_outside_3_to_30_bytes") else {
        return;
    };
    let _dog = watchdog("real_token_names", Duration::from_secs(300));
    for adapter in [Adapter::Tokio, Adapter::Mio] {
        let place = real_place(&cluster, 0, "rt");
        let root = Cl::connect(adapter, place.root.clone()).unwrap();
        let long = "t".repeat(31);
        let short = call!(root, create_personal_access_token("ab", TokenExpiry::Never));
        let too_long = call!(
            root,
            create_personal_access_token(&long, TokenExpiry::Never)
        );
        println!(
            "real cluster, {adapter:?}: token name 2 B -> {}, 31 B -> {}",
            outcome(&short),
            outcome(&too_long)
        );
        let listed = call!(root, get_personal_access_tokens()).unwrap();
        for (name, result) in [("ab", &short), (long.as_str(), &too_long)] {
            if result.is_ok() {
                assert!(listed.iter().any(|t| t.name.as_str() == name), "{listed:?}");
                call!(root, delete_personal_access_token(name)).unwrap();
            }
        }
        for result in [&short, &too_long] {
            assert!(
                result.is_ok()
                    || matches!(
                        result,
                        Err(ClientError::Request(RequestError::Server { .. }))
                    )
            );
        }
    }
}
