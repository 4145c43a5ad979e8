//! Tests of the tokio driver over plaintext TCP: start, stop, restart, dropped
//! connections, reply delays and slow commits.

#![allow(clippy::unwrap_used)]

use std::time::{Duration, Instant};

use iggy_route_core::wire::{
    Frame, LoginRegisterReply, Operation, RequestHeader, code, split_result,
};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;

use super::driver::TestCluster;
use super::raw_client::{exchange, login, ping};
use super::state::{ClusterConfig, Lag};

async fn eventually(mut check: impl FnMut() -> bool) {
    for _ in 0..200 {
        if check() {
            return;
        }
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
    panic!("condition not reached within a second");
}

#[tokio::test]
async fn five_nodes_start_answer_and_stop_in_milliseconds() {
    let started = Instant::now();
    let cluster = TestCluster::start(5).await;
    for addr in cluster.addrs() {
        let mut stream = TcpStream::connect(addr).await.unwrap();
        assert!(
            matches!(ping(&mut stream).await.unwrap(), Frame::Reply { header, .. } if header.status == 0)
        );
    }
    cluster.shutdown().await;
    assert!(
        started.elapsed() < Duration::from_millis(500),
        "took {:?}",
        started.elapsed()
    );
}

#[tokio::test]
async fn a_stopped_node_refuses_connections_and_restarts_on_its_port() {
    let cluster = TestCluster::start(2).await;
    let addr = cluster.addr(1);
    let mut open = TcpStream::connect(addr).await.unwrap();
    assert!(matches!(login(&mut open, 9).await, Frame::Reply { .. }));
    assert_eq!(cluster.live_sessions(), 1);

    cluster.stop_node(1).await;
    assert!(
        TcpStream::connect(addr).await.is_err(),
        "a stopped node refuses connections"
    );
    assert!(
        ping(&mut open).await.is_err(),
        "its open connections are dropped"
    );
    assert_eq!(cluster.stats(1).open_connections, 0);
    assert_eq!(
        cluster.live_sessions(),
        0,
        "dropped connections end their sessions"
    );

    cluster.restart_node(1).await;
    assert_eq!(cluster.addr(1), addr);
    let mut again = TcpStream::connect(addr).await.unwrap();
    assert!(ping(&mut again).await.is_ok());
    assert_eq!(cluster.stats(1).connections_total, 2);
}

#[tokio::test]
async fn dropping_connections_keeps_the_node_accepting() {
    let cluster = TestCluster::start(1).await;
    let mut first = TcpStream::connect(cluster.addr(0)).await.unwrap();
    login(&mut first, 3).await;
    cluster.drop_connections(0);
    assert!(ping(&mut first).await.is_err());
    eventually(|| cluster.live_sessions() == 0 && cluster.stats(0).open_connections == 0).await;
    let mut second = TcpStream::connect(cluster.addr(0)).await.unwrap();
    assert!(ping(&mut second).await.is_ok());
    assert_eq!(cluster.stats(0).requests(code::PING), 1);
}

#[tokio::test]
async fn a_reply_delay_holds_every_reply_of_that_node() {
    let cluster = TestCluster::start(2).await;
    cluster.set_reply_delay(0, Duration::from_millis(150));
    let mut slow = TcpStream::connect(cluster.addr(0)).await.unwrap();
    let mut fast = TcpStream::connect(cluster.addr(1)).await.unwrap();
    let started = Instant::now();
    ping(&mut fast).await.unwrap();
    assert!(started.elapsed() < Duration::from_millis(100));
    ping(&mut slow).await.unwrap();
    assert!(started.elapsed() >= Duration::from_millis(150));
    cluster.set_reply_delay(0, Duration::ZERO);
}

#[tokio::test]
async fn a_slow_commit_holds_the_reply_of_the_send_only() {
    // Large enough that a ping on an idle loopback connection answers well within it.
    let slow = Duration::from_millis(800);
    let cluster = TestCluster::start_with(ClusterConfig {
        lag: Lag {
            partition_commit: slow,
            ..Lag::REAL_CLUSTER
        },
        ..ClusterConfig::new(2)
    })
    .await;
    let (stream, topic) = cluster.create_stream_and_topic("s", "t", 1);
    assert_eq!(cluster.primary(stream, topic, 0), Some(0));
    let mut writer = TcpStream::connect(cluster.addr(0)).await.unwrap();
    let Frame::Reply { body, .. } = login(&mut writer, 7).await else {
        panic!("login answered with something other than a reply");
    };
    let session = LoginRegisterReply::decode(split_result(&body).unwrap().unwrap())
        .unwrap()
        .session;
    let mut other = TcpStream::connect(cluster.addr(0)).await.unwrap();

    let body = crate::cluster::testkit::send_body(stream, topic, 0, &["m"]);
    let header = RequestHeader::new(Operation::SendMessages, 0, 7, session, 1, body.len());
    let started = Instant::now();
    let mut sending = tokio::spawn(async move {
        let reply = exchange(&mut writer, header, &body).await.unwrap();
        (reply, started.elapsed())
    });
    eventually(|| cluster.partition_len(stream, topic, 0) == 1).await;
    // The send is applied and its reply is waiting for the commit: the same node still
    // answers another connection at once.
    tokio::select! {
        biased;
        _ = &mut sending => panic!("the send's reply came before a ping on another connection"),
        pinged = ping(&mut other) => assert!(pinged.is_ok()),
    }
    let (reply, took) = sending.await.unwrap();
    assert!(matches!(reply, Frame::Reply { header, .. } if header.status == 0));
    assert!(took >= slow, "the send's reply came after {took:?}");
}

#[tokio::test]
async fn an_undecodable_frame_closes_the_connection() {
    let cluster = TestCluster::start(1).await;
    let mut stream = TcpStream::connect(cluster.addr(0)).await.unwrap();
    let mut garbage = vec![0u8; 256];
    garbage[48] = 10; // size 10 < 256
    stream.write_all(&garbage).await.unwrap();
    let mut byte = [0u8; 1];
    assert_eq!(stream.read(&mut byte).await.unwrap_or(0), 0);
}

#[tokio::test]
async fn a_paused_node_accepts_and_answers_only_once_resumed() {
    let cluster = TestCluster::start(2).await;
    let mut open = TcpStream::connect(cluster.addr(0)).await.unwrap();
    ping(&mut open).await.unwrap();
    cluster.pause_node(0);
    // The kernel still completes a connect to a paused process.
    let mut new = TcpStream::connect(cluster.addr(0)).await.unwrap();
    let held = tokio::spawn(async move { ping(&mut new).await.map(|_| new) });
    let silent = tokio::time::timeout(Duration::from_millis(200), ping(&mut open)).await;
    assert!(silent.is_err(), "a paused node answered");
    let mut other = TcpStream::connect(cluster.addr(1)).await.unwrap();
    assert!(
        ping(&mut other).await.is_ok(),
        "the other node is not paused"
    );
    assert!(!held.is_finished());
    cluster.resume_node(0);
    let new = held.await.unwrap();
    assert!(
        new.is_ok(),
        "the connect made while paused is answered after the resume"
    );
}
