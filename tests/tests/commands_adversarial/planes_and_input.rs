//! Partition commands go to the partition's primary, session commands to the session's node;
//! bad input gets a typed error and sends nothing.

#[allow(clippy::wildcard_imports)]
use super::*;

pub(super) fn offsets_and_flush_go_to_each_partition_s_primary(adapter: Adapter) {
    let _dog = watchdog("offsets_on_primaries", Duration::from_secs(180));
    let world = world();
    // The session on node 0 (the leader); partition p led by node (p + 1) % 3.
    let client = world.connect(adapter, 0);
    let s = call!(client, create_stream("offsets")).unwrap().id;
    let t = call!(client, create_topic(s, "t", 3)).unwrap().summary.id;
    let primary = |p: u32| usize::try_from(p + 1).unwrap() % 3;
    for p in 0..3 {
        assert!(world.cluster.set_primary(s, t, p, primary(p)));
        call!(
            client,
            send(s, t, Partitioning::partition_id(p), messages("m", 50))
        )
        .unwrap();
    }
    let before = |command| -> Vec<u64> { (0..3).map(|n| world.requests(n, command)).collect() };
    let gets_before = before(code::GET_CONSUMER_OFFSET);
    let stores_before = before(code::STORE_CONSUMER_OFFSET);
    let deletes_before = before(code::DELETE_CONSUMER_OFFSET);
    let flushes_before = before(code::FLUSH_UNSAVED_BUFFER);
    let rounds = 6u32;
    for round in 0..rounds {
        for p in 0..3 {
            let value = u64::from(round * 3 + p);
            call!(client, store_offset(consumer(5), s, t, p, value)).unwrap();
            let got = call!(client, get_consumer_offset(consumer(5), s, t, Some(p))).unwrap();
            assert_eq!(
                got.map(|o| (o.partition_id, o.stored_offset, o.current_offset)),
                Some((p, value, 49)),
                "round {round}: store_offset then get_consumer_offset on partition {p}"
            );
            call!(client, delete_consumer_offset(consumer(5), s, t, Some(p))).unwrap();
            let got = call!(client, get_consumer_offset(consumer(5), s, t, Some(p))).unwrap();
            assert_eq!(got, None, "round {round}: delete then get on partition {p}");
            let flushed = call!(client, flush_unsaved_buffer(s, t, p, true));
            assert_eq!(server_code(flushed), ErrorCode::FeatureUnavailable);
        }
    }
    // `None` is partition 0.
    call!(client, store_offset(consumer(6), s, t, 0, 7)).unwrap();
    let got = call!(client, get_consumer_offset(consumer(6), s, t, None)).unwrap();
    assert_eq!(got.map(|o| (o.partition_id, o.stored_offset)), Some((0, 7)));

    // Per node: partition p's commands on node (p + 1) % 3 and nowhere else. The model's
    // backups answer offset reads and flushes like the primary, so only these counts show
    // a read or flush that went to the wrong node.
    let per_partition = u64::from(rounds);
    let delta = |command, before: &[u64]| -> Vec<u64> {
        (0..3)
            .map(|n| world.requests(n, command) - before[n])
            .collect()
    };
    // Node 1 leads partition 0, node 2 partition 1, node 0 partition 2.
    let mut expected_gets = vec![2 * per_partition; 3];
    expected_gets[primary(0)] += 1;
    assert_eq!(
        delta(code::GET_CONSUMER_OFFSET, &gets_before),
        expected_gets,
        "get_consumer_offset per node (node 1 leads partition 0, node 2 partition 1, node 0 partition 2)"
    );
    assert_eq!(
        delta(code::FLUSH_UNSAVED_BUFFER, &flushes_before),
        vec![per_partition; 3],
        "flush_unsaved_buffer per node"
    );
    let mut expected_stores = vec![per_partition; 3];
    expected_stores[primary(0)] += 1;
    assert_eq!(
        delta(code::STORE_CONSUMER_OFFSET, &stores_before),
        expected_stores,
        "store_offset per node"
    );
    assert_eq!(
        delta(code::DELETE_CONSUMER_OFFSET, &deletes_before),
        vec![per_partition; 3],
        "delete_consumer_offset per node"
    );

    // Without a partition, a delete is the server's to answer (the loopback cluster, as the
    // server, answers it `InvalidIdentifier`): typed either way, and a success deletes.
    let deleted = call!(client, delete_consumer_offset(consumer(6), s, t, None));
    if deleted.is_ok() {
        assert_eq!(world.cluster.consumer_offset(s, t, 0, 6), None);
    } else {
        server_code(deleted);
        assert_eq!(world.cluster.consumer_offset(s, t, 0, 6), Some(7));
    }

    // The primaries move; offsets still go where they must, and read back.
    for p in 0..3 {
        assert!(world.cluster.set_primary(s, t, p, p as usize));
    }
    for p in 0..3 {
        call!(client, store_offset(consumer(9), s, t, p, 3)).unwrap();
        let got = call!(client, get_consumer_offset(consumer(9), s, t, Some(p))).unwrap();
        assert_eq!(got.map(|o| o.stored_offset), Some(3), "after the move, {p}");
        assert_eq!(world.cluster.consumer_offset(s, t, p, 9), Some(3));
    }
    assert_eq!(client.stats().session_moves, 0);
}
both_adapters!(offsets_and_flush_go_to_each_partition_s_primary);

pub(super) fn session_commands_are_answered_by_the_session_s_node(adapter: Adapter) {
    let _dog = watchdog("session_commands", Duration::from_secs(120));
    let world = world();
    let mut config = world.config(1);
    config.heartbeat_interval = Duration::from_secs(120);
    let client = Cl::connect(adapter, config).unwrap();
    // Links to every node: a stream (leader), a topic whose partitions are led elsewhere.
    let s = call!(client, create_stream("session")).unwrap().id;
    let t = call!(client, create_topic(s, "t", 3)).unwrap().summary.id;
    for p in 0..3 {
        assert!(world.cluster.set_primary(s, t, p, p as usize));
        call!(
            client,
            send(s, t, Partitioning::partition_id(p), messages("x", 1))
        )
        .unwrap();
    }
    let mut other_config = world.config(0);
    other_config.heartbeat_interval = Duration::from_secs(120);
    let other = Cl::connect(adapter, other_config).unwrap();
    let other_me = call!(other, get_me()).unwrap();
    // Past the settle window of our writes, `get_stats` (a metadata read) is the session's
    // node's too.
    std::thread::sleep(Duration::from_millis(1_200));

    let session_reads = [
        code::PING,
        code::GET_ME,
        code::GET_CLIENT,
        code::GET_CLIENTS,
        code::GET_STATS,
        code::LOGOUT_USER,
    ];
    let snapshot = |node: usize| -> Vec<u64> {
        session_reads
            .iter()
            .map(|&command| world.requests(node, command))
            .collect()
    };
    let before: Vec<Vec<u64>> = (0..3).map(snapshot).collect();
    for _ in 0..5 {
        call!(client, ping()).unwrap();
    }
    let me = call!(client, get_me()).unwrap();
    let clients = call!(client, get_clients()).unwrap();
    assert!(
        clients.contains(&me.client),
        "get_clients lists get_me: {clients:?}"
    );
    assert!(
        !clients
            .iter()
            .any(|c| c.client_id == other_me.client.client_id),
        "a client of node 0 listed by node 1: {clients:?}"
    );
    let found = call!(client, get_client(me.client.client_id)).unwrap();
    assert_eq!(found, Some(me.clone()));
    // Another node's client: each node knows only its own connections.
    let found = call!(client, get_client(other_me.client.client_id)).unwrap();
    assert_eq!(found, None, "get_client of a client connected to node 0");
    let stats = call!(client, get_stats()).unwrap();
    assert!(stats.clients_count >= 1);
    call!(client, logout_user()).unwrap();
    let after: Vec<Vec<u64>> = (0..3).map(snapshot).collect();
    let delta: Vec<Vec<u64>> = (0..3)
        .map(|n| {
            (0..session_reads.len())
                .map(|i| after[n][i] - before[n][i])
                .collect()
        })
        .collect();
    assert_eq!(
        delta,
        vec![vec![0; 6], vec![5, 1, 2, 1, 1, 1], vec![0; 6]],
        "ping, get_me, get_client, get_clients, get_stats, logout per node (the session is on node 1)"
    );
    // Signed in again on the same node, as a new client.
    let again = call!(client, get_me()).unwrap();
    assert_ne!(again.client.client_id, me.client.client_id);
    // (The first `get_me` after a logout is written on the logged-out link, refused
    // `Unauthenticated`, and written again once signed in: node 1 sees it twice.)
    assert!(world.requests(1, code::GET_ME) > after[1][1]);
    assert_eq!(
        (
            world.requests(0, code::GET_ME),
            world.requests(2, code::GET_ME)
        ),
        (after[0][1], after[2][1])
    );
    assert_eq!(client.stats().session_moves, 0);
}
both_adapters!(session_commands_are_answered_by_the_session_s_node);

// =======================================================================================
// Promise 3: bad input gets a typed error and sends nothing.
// =======================================================================================

pub(super) fn bad_input_is_refused_before_anything_is_sent(adapter: Adapter) {
    let _dog = watchdog("bad_input", Duration::from_secs(120));
    let world = world();
    let client = world.connect(adapter, 1);
    let s = call!(client, create_stream("valid")).unwrap().id;
    let t = call!(client, create_topic(s, "t", 1)).unwrap().summary.id;
    let u = call!(
        client,
        create_user("valid-user", "valid-pw", UserStatus::Active, None)
    )
    .unwrap()
    .id;
    // Let the settle window of those writes pass, so nothing is read again behind them.
    std::thread::sleep(Duration::from_millis(1_200));
    let before = world.traffic();

    let long = "n".repeat(256);
    let long_multibyte = "é".repeat(128); // 256 bytes, 128 characters
    let long_user = "u".repeat(51);
    let long_user_multibyte = "é".repeat(26); // 52 bytes, 26 characters
    let long_password = "p".repeat(101);
    let huge_password = "p".repeat(256);
    let options = TopicUpdateOptions::default;
    let mut failures = Vec::new();
    let mut check = |what: &str, result: String, refused: bool| {
        if !refused {
            failures.push(format!("{what}: {result}"));
        }
    };
    macro_rules! refused {
        ($what:expr, $result:expr) => {{
            let result = $result;
            check($what, outcome(&result), refused_locally(&result));
        }};
    }
    refused!("create_stream empty", call!(client, create_stream("")));
    refused!("create_stream 256 B", call!(client, create_stream(&long)));
    refused!(
        "create_stream 256 B multibyte",
        call!(client, create_stream(&long_multibyte))
    );
    refused!("create_topic empty", call!(client, create_topic(s, "", 1)));
    refused!(
        "create_topic 256 B",
        call!(client, create_topic(s, &long, 1))
    );
    refused!("update_stream empty", call!(client, update_stream(s, "")));
    refused!(
        "update_stream 256 B",
        call!(client, update_stream(s, &long))
    );
    refused!(
        "update_topic empty",
        call!(client, update_topic(s, t, "", options()))
    );
    refused!(
        "update_topic 256 B",
        call!(client, update_topic(s, t, &long, options()))
    );
    refused!("get_stream empty id", call!(client, get_stream("")));
    refused!(
        "get_stream 256 B id",
        call!(client, get_stream(long.as_str()))
    );
    refused!("get_topic empty stream", call!(client, get_topic("", t)));
    refused!("get_topic empty topic", call!(client, get_topic(s, "")));
    refused!("get_topics empty", call!(client, get_topics("")));
    refused!("delete_stream empty", call!(client, delete_stream("")));
    refused!("purge_stream empty", call!(client, purge_stream("")));
    refused!("delete_topic empty", call!(client, delete_topic(s, "")));
    refused!("purge_topic empty", call!(client, purge_topic("", t)));
    refused!(
        "create_partitions empty",
        call!(client, create_partitions(s, "", 1))
    );
    refused!(
        "delete_partitions empty",
        call!(client, delete_partitions("", t, 1))
    );
    refused!(
        "delete_segments empty",
        call!(client, delete_segments(s, "", 0, 1))
    );
    refused!(
        "get_consumer_offset empty",
        call!(client, get_consumer_offset(consumer(1), "", t, Some(0)))
    );
    refused!(
        "delete_consumer_offset empty",
        call!(client, delete_consumer_offset(consumer(1), s, "", Some(0)))
    );
    refused!(
        "store_offset empty",
        call!(client, store_offset(consumer(1), "", t, 0, 0))
    );
    refused!(
        "flush empty",
        call!(client, flush_unsaved_buffer("", t, 0, false))
    );
    refused!(
        "send empty topic id",
        call!(
            client,
            send(s, "", Partitioning::partition_id(0), messages("x", 1))
        )
    );
    refused!(
        "send no messages",
        call!(
            client,
            send(s, t, Partitioning::partition_id(0), Vec::new())
        )
    );
    refused!(
        "poll empty stream id",
        call!(
            client,
            poll("", t, Some(0), consumer(1), PollingStrategy::Offset(0), 1)
        )
    );
    refused!("get_user empty", call!(client, get_user("")));
    refused!("delete_user empty", call!(client, delete_user("")));
    refused!(
        "update_permissions empty",
        call!(client, update_permissions("", None))
    );
    refused!(
        "create_user username 2 B",
        call!(
            client,
            create_user("ab", "good-pw", UserStatus::Active, None)
        )
    );
    refused!(
        "create_user username 51 B",
        call!(
            client,
            create_user(&long_user, "good-pw", UserStatus::Active, None)
        )
    );
    refused!(
        "create_user username 52 B multibyte",
        call!(
            client,
            create_user(&long_user_multibyte, "good-pw", UserStatus::Active, None)
        )
    );
    refused!(
        "create_user empty username",
        call!(client, create_user("", "good-pw", UserStatus::Active, None))
    );
    refused!(
        "create_user password 2 B",
        call!(
            client,
            create_user("good-user", "pw", UserStatus::Active, None)
        )
    );
    refused!(
        "create_user password 101 B",
        call!(
            client,
            create_user("good-user", &long_password, UserStatus::Active, None)
        )
    );
    refused!(
        "create_user password 256 B",
        call!(
            client,
            create_user("good-user", &huge_password, UserStatus::Active, None)
        )
    );
    refused!(
        "change_password current 2 B",
        call!(client, change_password(u, "pw", "good-pw"))
    );
    refused!(
        "change_password new 2 B",
        call!(client, change_password(u, "valid-pw", "pw"))
    );
    refused!(
        "change_password new 101 B",
        call!(client, change_password(u, "valid-pw", &long_password))
    );
    refused!(
        "change_password new 256 B",
        call!(client, change_password(u, "valid-pw", &huge_password))
    );
    refused!(
        "change_password empty user",
        call!(client, change_password("", "valid-pw", "good-pw"))
    );
    refused!(
        "create_personal_access_token empty",
        call!(client, create_personal_access_token("", TokenExpiry::Never))
    );
    refused!(
        "create_personal_access_token 256 B",
        call!(
            client,
            create_personal_access_token(&long, TokenExpiry::Never)
        )
    );
    refused!(
        "delete_personal_access_token empty",
        call!(client, delete_personal_access_token(""))
    );
    refused!(
        "delete_personal_access_token 256 B",
        call!(client, delete_personal_access_token(&long))
    );
    refused!(
        "update_user empty id",
        call!(client, update_user("", Some("good-name"), None))
    );
    refused!(
        "update_user empty username",
        call!(client, update_user(u, Some(""), None))
    );
    refused!(
        "update_user 256 B username",
        call!(client, update_user(u, Some(long.as_str()), None))
    );
    assert!(failures.is_empty(), "sent or not refused: {failures:#?}");
    assert_eq!(
        world.traffic(),
        before,
        "requests reached the cluster while every call was refused locally"
    );

    // The limits themselves are accepted.
    let at_limit = "s".repeat(255);
    call!(client, create_stream(&at_limit)).unwrap();
    call!(client, update_topic(s, t, &at_limit, options())).unwrap();
    call!(client, create_user("abc", "pwd", UserStatus::Active, None)).unwrap();
    let fifty = "e".repeat(50);
    let hundred = "p".repeat(100);
    let created = call!(
        client,
        create_user(&fifty, &hundred, UserStatus::Active, None)
    )
    .unwrap();
    let multibyte = "é".repeat(25); // 50 bytes
    call!(
        client,
        update_user(created.id, Some(multibyte.as_str()), None)
    )
    .unwrap();
    call!(client, change_password(created.id, &hundred, "pwd")).unwrap();
}
both_adapters!(bad_input_is_refused_before_anything_is_sent);

/// `update_user` with a username outside 3..=50 bytes: promise 3 says a typed error and
/// nothing sent, as `create_user` does.
pub(super) fn update_user_with_a_bad_username_sends_nothing(adapter: Adapter) {
    let _dog = watchdog("update_user_bad_username", Duration::from_secs(60));
    let world = world();
    let client = world.connect(adapter, 1);
    let u = call!(
        client,
        create_user("valid-user", "valid-pw", UserStatus::Active, None)
    )
    .unwrap()
    .id;
    std::thread::sleep(Duration::from_millis(1_200));
    let before = world.traffic();
    let long = "u".repeat(51);
    let short = call!(client, update_user(u, Some("ab"), None));
    let too_long = call!(client, update_user(u, Some(long.as_str()), None));
    let sent = world.traffic() != before;
    assert!(
        refused_locally(&short) && refused_locally(&too_long) && !sent,
        "update_user: 2 B username -> {}, 51 B -> {}, sent to the cluster: {sent}",
        outcome(&short),
        outcome(&too_long)
    );
}
both_adapters!(update_user_with_a_bad_username_sends_nothing);
