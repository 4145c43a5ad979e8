//! What the router is told at construction: where the cluster is, who signs in, and every
//! bound (timeouts, pool sizes, queue lengths) that keeps its waits and its memory finite.

use std::fmt;
use std::time::Duration;

use crate::wire::Password;

mod connection_string;
mod duration;
mod tls;
#[cfg(feature = "rustls")]
mod tls_classify;
#[cfg(feature = "rustls")]
mod tls_client;
#[cfg(feature = "rustls")]
mod tls_roots;
mod validate;

pub use connection_string::{AddressProblem, ConnectionStringError, CredentialsProblem};
pub use tls::{TlsConfig, TlsError};
#[cfg(feature = "rustls")]
pub use tls_client::TlsClient;
pub use validate::{ConfigBuilder, ConfigError};

/// How to sign in. The secret never appears in `Debug` output or logs.
#[derive(Clone, PartialEq, Eq)]
pub enum Credentials {
    /// Username and password (`LOGIN_REGISTER`, code 40).
    UserPassword {
        /// The user name.
        username: String,
        /// The password.
        password: Password,
    },
    /// A personal access token (`LOGIN_REGISTER_WITH_PAT`, code 45).
    PersonalAccessToken(Password),
}

impl Credentials {
    /// Username and password credentials, checked against the wire's limits (a name of
    /// 1 to 255 bytes, a password of at most 255) before anything is sent.
    pub fn user(
        username: impl Into<String>,
        password: impl Into<String>,
    ) -> Result<Self, crate::wire::WireError> {
        let username = username.into();
        crate::wire::Name::new(username.clone())?;
        Ok(Self::UserPassword {
            username,
            password: Password::new(password.into())?,
        })
    }
}

impl fmt::Debug for Credentials {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::UserPassword { username, .. } => f
                .debug_struct("UserPassword")
                .field("username", username)
                .field("password", &"***")
                .finish(),
            Self::PersonalAccessToken(_) => f.write_str("PersonalAccessToken(***)"),
        }
    }
}

/// Whether a send whose link closed while it was in flight may be sent again.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum DeliveryGuarantee {
    /// Never write a message twice: such a send completes with `RequestError::OutcomeUnknown`.
    AtMostOnce,
    /// Send it again on a new link (a new session cannot be deduplicated by the server, so the
    /// message may be stored twice). Opt in only where duplicates are acceptable.
    AtLeastOnce,
}

/// Which node serves a poll of one partition (a poll that names its partition). Auto-commit
/// polls always go where the primary is known, the only node whose offset commit lasts. On a
/// cluster without routing commands the primary is known only once a write of ours was
/// admitted, and a backup that serves an auto-commit poll keeps the commit to itself (the
/// real server does: the durable offset never moves). So there a plain consumer's
/// auto-commit poll is written without its commit, and the offset it read up to is stored
/// on the primary (found as any write's is) before the caller gets the messages (which it
/// gets even if that write fails: they are then read again, never lost).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum PollFrom {
    /// The partition's primary: a poll sees every send acknowledged before it (read your
    /// writes). On a cluster without routing commands the primary is the node that admitted
    /// this client's last write to the partition; before any write it is not known, and the
    /// poll is served by a roster node, which may lag the primary (by up to ~500 ms on a
    /// real cluster).
    Primary,
    /// Any replica: the coordinator's node serves the poll from its own copy, which may lag
    /// the primary. Spreads read load off the primaries; gives up read-your-writes.
    AnyReplica,
}

/// Router configuration. `Config::new`, [`ConfigBuilder`] or a connection string give
/// production defaults; a field may then be set by name. New fields may come in a minor
/// release, so a `Config` is never written out as a struct literal outside this crate.
#[derive(Debug, Clone)]
#[non_exhaustive]
pub struct Config {
    /// Seed addresses, `host:port`. The first reachable one carries the session.
    pub seeds: Vec<String>,
    /// Sign-in credentials, used by the coordinator and by every data link.
    pub credentials: Credentials,
    /// Reported to the server in the login body.
    pub client_name: String,
    /// Reported to the server in the login body.
    pub client_version: String,
    /// Whole life of one request, from `submit` to `Completed`.
    pub request_timeout: Duration,
    /// One exchange on one link: past it the node counts as silent and the link is closed.
    pub attempt_timeout: Duration,
    /// A connection attempt that has not succeeded by then is abandoned.
    pub connect_timeout: Duration,
    /// First wait before reconnecting to a node that failed; doubles up to the max.
    pub reconnect_backoff_initial: Duration,
    /// Longest wait between reconnection attempts.
    pub reconnect_backoff_max: Duration,
    /// First wait when a lookup names the node that just refused (an election in progress).
    pub route_backoff_initial: Duration,
    /// Longest such wait.
    pub route_backoff_max: Duration,
    /// Wait before the first replay of a `TransientNotCommitted` (57) on the same link;
    /// doubles (with jitter) for each further replay, up to `replay_interval_max`.
    pub replay_interval: Duration,
    /// Longest wait between two replays of a 57.
    pub replay_interval_max: Duration,
    /// Replays of one frame answered 57 before the link is closed and the request's
    /// outcome is unknown. The request's deadline ends the replays sooner.
    pub max_replays: u32,
    /// While a lookup keeps naming the node that has just refused or could not be reached
    /// (an election in progress, a silent node), the lane's writes back off but its route
    /// is looked up again this often; while the node cannot be reached at all, every
    /// quarter of the time it has not been, up to `route_backoff_max`. A new primary is
    /// acted on within that wait of being named.
    pub route_recheck_interval: Duration,
    /// A link with nothing sent for this long sends a `PING`.
    pub heartbeat_interval: Duration,
    /// A data link unused for this long is closed.
    pub data_link_idle_timeout: Duration,
    /// Data links per node, so sends to different partitions on one node do not wait for
    /// each other (the protocol allows one request in flight per connection).
    pub data_links_per_node: usize,
    /// Requests waiting or in flight, in all.
    pub max_pending_requests: usize,
    /// Requests waiting for one partition (or for the metadata leader, or the coordinator).
    pub max_pending_per_lane: usize,
    /// Largest frame accepted from a node, and largest request frame accepted from the caller.
    pub max_frame_size: u32,
    /// Most nodes the router will track (seeds plus roster entries).
    pub max_nodes: usize,
    /// What to do with a send whose link closed while it was in flight.
    pub delivery: DeliveryGuarantee,
    /// Which node serves a poll of one partition.
    pub poll_from: PollFrom,
    /// For this long after one of our own metadata writes, an answer that a stream or topic
    /// does not exist is not believed but read again (with backoff, within the request's
    /// deadline): a real cluster's followers apply a write up to half a second after their
    /// leader. A follower's "absent" topic (the router reads partition counts on the
    /// session's node) is also read again until the request is this old: another client
    /// may have just created it. Zero believes every answer. (Metadata reads always go to
    /// the metadata leader.)
    pub own_write_settle: Duration,
    /// Most messages one `SEND_MESSAGES` frame carries when sends queued for one partition
    /// are merged into it (coalescing: while a partition's write is in flight, the sends
    /// behind it wait, and the next frame takes as many of them as the bounds allow). One
    /// turns coalescing off. A single send above the bound still goes, alone. The byte
    /// bound below usually comes first (10,000 messages of 100 B are 1.6 MiB).
    pub coalesce_max_messages: u32,
    /// Most message bytes (headers, payloads and user headers) one merged frame carries;
    /// never more than `max_frame_size` allows.
    pub coalesce_max_bytes: u32,
    /// How long a partition's first send waits for more sends to merge with, when nothing
    /// of the partition is in flight (Kafka's `linger.ms`, the SDK producer's
    /// `linger_time`). Zero (the default) writes at once; the wait ends early when the
    /// bounds above are reached.
    pub linger: Duration,
    /// Act on the view a refusal carries: a backup that refuses a send (58) names its
    /// view of the partition's group, whose primary is `view % replica count` (the
    /// roster's order), and the send goes to that node at once, the route lookup (where
    /// the cluster has one) confirming it in parallel: a controlled move then costs two
    /// round trips instead of three. A wrong name costs one more refusal, after which the
    /// usual lookup or discovery decides. On by default.
    #[doc(hidden)]
    pub follow_refusal_view: bool,
    /// A balanced send (`Partitioning::Balanced`) passes over a partition whose requests
    /// wait for a primary (a crashed node, a move in progress), and one whose queue is
    /// long (a few requests) while another's is shorter or full, as Kafka's partitioner
    /// picks among the partitions that have a leader and favours the shorter queues: a
    /// producer's sends keep going where they are admitted now instead of queueing behind
    /// a failover (each holding an in-flight slot of its producer). A partition passed
    /// over is balanced to again once its queue drains or it admits. Keyed and explicit
    /// sends are never moved. Off: strict round-robin. On by default.
    #[doc(hidden)]
    pub balanced_skips_stalled: bool,
    /// TLS on every link (`None`, the default: plaintext). The adapters do the TLS; the
    /// core sees the same bytes either way.
    pub tls: Option<TlsConfig>,
}

impl Config {
    /// Defaults for a production client: 30 s per request, 5 s per attempt, 8 data links
    /// per node (a partition has one write in flight, so a node leading many partitions
    /// needs links for them to be written to at once: at 4, a slow commit kept two of the
    /// demo's six partitions waiting for a link), 10,000 pending requests, merged frames of
    /// up to 10,000 messages or 1 MiB.
    pub fn new(seeds: Vec<String>, credentials: Credentials) -> Self {
        Self {
            seeds,
            credentials,
            client_name: "iggy-route".to_owned(),
            client_version: env!("CARGO_PKG_VERSION").to_owned(),
            request_timeout: Duration::from_secs(30),
            attempt_timeout: Duration::from_secs(5),
            connect_timeout: Duration::from_secs(3),
            reconnect_backoff_initial: Duration::from_millis(50),
            reconnect_backoff_max: Duration::from_secs(2),
            route_backoff_initial: Duration::from_millis(5),
            route_backoff_max: Duration::from_millis(500),
            replay_interval: Duration::from_millis(20),
            replay_interval_max: Duration::from_secs(1),
            max_replays: 16,
            route_recheck_interval: Duration::from_millis(5),
            heartbeat_interval: Duration::from_secs(5),
            data_link_idle_timeout: Duration::from_secs(60),
            data_links_per_node: 8,
            max_pending_requests: 10_000,
            max_pending_per_lane: 2_000,
            max_frame_size: crate::wire::DEFAULT_MAX_FRAME_SIZE,
            max_nodes: 64,
            delivery: DeliveryGuarantee::AtMostOnce,
            poll_from: PollFrom::Primary,
            own_write_settle: Duration::from_secs(1),
            coalesce_max_messages: 10_000,
            coalesce_max_bytes: 1024 * 1024,
            linger: Duration::ZERO,
            follow_refusal_view: true,
            balanced_skips_stalled: true,
            tls: None,
        }
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;

    #[test]
    fn debug_output_never_shows_secrets() {
        let config = Config::new(
            vec!["127.0.0.1:8090".into()],
            Credentials::user("iggy", "s3cret-pw").unwrap(),
        );
        let shown = format!("{config:?}");
        assert!(!shown.contains("s3cret-pw"), "{shown}");
        assert!(shown.contains("iggy"));
        let pat = Credentials::PersonalAccessToken(Password::new("tok-123").unwrap());
        assert!(!format!("{pat:?}").contains("tok-123"));
    }

    /// No error may show the credentials: nothing from before the last `@`, nor text a
    /// mis-split put after it.
    #[test]
    fn no_error_shows_the_credentials() {
        let secret = "Pw9Kz";
        let long = secret.repeat(60);
        let hostile = [
            format!("http://Uq3vX:{secret}@h:1"),
            format!("iggy:/Uq3vX:{secret}@h:1"),
            format!("iggy://Uq3vX:{secret}@127.0.0.1:1?x@host:8090"),
            format!("iggy://Uq3vX:{secret}@@h:1"),
            format!("iggy://Uq3vX:{secret}:more@h:1"),
            format!("iggy://Uq3vX:{secret}://x@h:1"),
            format!("iggy://Uq3vX:{secret}@"),
            format!("iggy://Uq3vX:{secret}@host-without-port"),
            format!("iggy://Uq3vX:{secret}@h:99999"),
            format!("iggy://Uq3vX:{secret}@h:1:{secret}"),
            format!("iggy://Uq3vX:{secret}@h:1?tls=true&tls=true"),
            format!("iggy://Uq3vX:{secret}@h:1?bogus=1"),
            format!("iggy://Uq3vX:{secret}@h:1?heartbeat_interval=x"),
            format!("iggy://Uq3vX:{secret}@h:1?"),
            format!("iggy://Uq3vX:{secret}@h:1??"),
            format!("iggy://Uq3vX:{long}@h:1"),
            format!("iggy://{long}@h:1"),
            format!("iggy://{long}:{secret}@h:1"),
            format!("iggy://:{secret}@h:1"),
            format!("iggy://Uq3vX:{secret}?tls=true@h"),
            format!("iggy://Uq3vX:{secret},h2:1@h"),
            format!("iggy://Uq3vX:{secret}\n@@h:1"),
            format!("Uq3vX:{secret}@h:1"),
            format!("iggy://Uq3vX:{secret}%40h:1"),
            format!("iggy://Uq3vX:{secret} é€ \t@h:1?nodelay=maybe"),
            format!("iggy+tcp://Uq3vX:{secret}@h:1?tls_domain=x&tls=maybe"),
            format!("iggy://Uq3vX:{secret}@h:1?heartbeat_interval=1s&heartbeat_interval=2s"),
            "iggy://iggy:pw@127.0.0.1:1?x@host:8090".to_owned(),
            "iggy://a@b:c?d".to_owned(),
        ];
        for text in &hostile {
            let Err(error) = Config::from_connection_string(text) else {
                panic!("accepted {text}");
            };
            let before_last_at = text
                .rsplit_once('@')
                .map_or(text.as_str(), |(head, _)| head);
            // The scheme is no secret (and `iggy` is in the scheme error's own text).
            let credentials = ["://", ":/"]
                .into_iter()
                .find_map(|separator| before_last_at.split_once(separator))
                .map_or(before_last_at, |(_, credentials)| credentials);
            let region: Vec<char> = credentials.chars().collect();
            for shown in [error.to_string(), format!("{error:?}")] {
                for window in region.windows(4) {
                    let window: String = window.iter().collect();
                    assert!(!shown.contains(&window), "{text}: {shown} shows {window:?}");
                }
                // A mis-split can put secret text after the `@`; addresses are never shown.
                for after in [secret, "c?d", "b:c", "host-without-port"] {
                    assert!(!shown.contains(after), "{text}: {shown}");
                }
            }
        }
    }
}
