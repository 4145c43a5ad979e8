//! The SDK 0.11.0's `iggy_common::Client` trait and its supertraits, implemented by
//! [`Client`](crate::Client) (cargo feature `sdk`), so that a program written against
//! them runs on iggy-route by changing only the line that builds its client. Each method
//! does what the SDK's does, through the native method of the same name: the same
//! routing (a send on its partition's primary, a metadata write on the metadata leader),
//! the same checks, the SDK's types in and out, the SDK's errors.
//!
//! Call the methods through the trait (`&dyn iggy_common::Client`, `Arc<dyn Client>`, or
//! `StreamClient::create_stream(&client, ..)`): on the concrete type, the native methods
//! of the same names come first.
//!
//! # Methods
//!
//! "Native" is the native method of the same name. Where the SDK sends something no native
//! method sends (an options block), the same command goes out as a core `Call::command`,
//! routed as the native one is, its body laid out as the SDK lays it out and its options
//! block written by the SDK's own encoder (`bodies`).
//!
//! | SDK method | what iggy-route does |
//! |---|---|
//! | `connect` | `Ok` when connected (a client connects when it is built). After `disconnect`, takes the SDK session up again (`Connected`, `SignedIn`), signed in with the client's credentials as the SDK's auto-login would. After a shutdown: `ClientShutdown`. |
//! | `disconnect` | Puts the SDK session in the disconnected state (`Disconnected` event). The next trait method takes it up again (`Connected`, `SignedIn`, signed in with the client's credentials) and runs, as the SDK's next call reconnects. iggy-route's links stay open: they are the router's, shared with the native methods and every clone, and a consumer-group membership stays too; `shutdown` closes them. |
//! | `shutdown` | Native `shutdown`: pending requests fail, links close, subscribers hear `Shutdown`; twice is fine. |
//! | `subscribe_events` | A receiver of the events published from its subscription on (see [Events](#events)). |
//! | `get_cluster_metadata` | Native, answered by the node holding the session. |
//! | `get_stats`, `get_me`, `get_client`, `get_clients`, `ping` | Native (a node knows only its own connections and counts only its own clients). |
//! | `describe_options` | **Refused: `FeatureUnavailable` (5)**, nothing sent: iggy-route cannot decode the option catalog. |
//! | `heartbeat_interval` | `Config::heartbeat_interval`, after which an idle link pings. |
//! | `refresh_consumer_group_assignments` | Reads again the assignment of every group polled without a partition (see [Differences](#differences)). |
//! | `snapshot` | `GET_SNAPSHOT_FILE` to the node holding the session; its reply is the snapshot. |
//! | `get_user`, `get_users`, `create_user`, `delete_user`, `update_permissions`, `change_password` | Native, after the SDK's own checks (`InvalidUsername`, `InvalidPassword`). A committed change of the signed-in user's own password (by name or by the id its sign-in reported) is followed: every later sign-in (a reconnect, a data link to another node) uses the new one, as the SDK's remembered sign-in does. |
//! | `update_user` | Native; with `options.raw` set, `UPDATE_USER` carrying the SDK's options block (the 0.11.0 server refuses every user option: `UnsupportedOptionKey`). A committed rename of the signed-in user is followed by every later sign-in, as a password change is. |
//! | `login_user` | With the client's own username and password (as built, or as changed since): its `IdentityInfo` (the user id `get_me` reports), signing the session in again after `logout_user`. **With another user's:** the router signs in as that user from then on, as the SDK's login moves its connection: links signed in as the old user close (a busy one once its exchange is answered, so nothing in flight is cut off), and the session (on the metadata leader, as the SDK's login lands it there) and every data link sign in again as the new user, also after any later reconnect. A consumer-group membership held by the old user's link ends with it. Credentials the server refuses: its code (`InvalidCredentials`, 42), the client back on the credentials it had, and the SDK session signed out (`Unauthenticated` until a login succeeds), as the SDK's. |
//! | `logout_user` | Native `LOGOUT_USER` on the node holding the session (`SignedOut` event); until a login, the trait's methods but `ping`, `get_stats`, `get_cluster_metadata` and the logins fail with `Unauthenticated`, as the SDK checks its session first. `get_stats` and `get_cluster_metadata`, which the SDK sends signed out, sign the session in again (the SDK does so when the server refuses them) and run; every method works from then on. The native methods and the router's own reads sign the session in again by themselves. |
//! | `get_personal_access_tokens`, `create_personal_access_token`, `delete_personal_access_token` | Native. |
//! | `login_with_personal_access_token` | As `login_user`: the client's own token signs the session in again; any other signs every link in with it from then on (refused: `InvalidPersonalAccessToken`, 53, and signed out). |
//! | `get_stream`, `get_streams`, `create_stream`, `delete_stream`, `purge_stream` | Native. |
//! | `update_stream` | Native; with `options.raw` set, `UPDATE_STREAM` carrying the SDK's options block (refused by the 0.11.0 server: `UnsupportedOptionKey`). |
//! | `get_topic`, `get_topics`, `delete_topic`, `purge_topic` | Native. |
//! | `create_topic` | `CREATE_TOPIC` on the metadata leader, as the native `create_topic`, carrying the SDK's options block: every option set (`message_expiry`, `compression_algorithm`, `max_topic_size`, `segment_size`, the durabilities the SDK always sends, `raw`, ...) goes out as the SDK sends it; none is dropped. `partitions_count` unset is the SDK's default, 1. |
//! | `update_topic` | Native for the typed settings (encoded as the SDK encodes them); with `raw` keys, `UPDATE_TOPIC` carrying the SDK's options block. |
//! | `create_partitions`, `delete_partitions`, `delete_segments` | Native. |
//! | `poll_messages`, `poll_messages_with_strategy_for` | Native `poll_request`, `auto_commit` included (an auto-commit poll goes to the partition's primary). A consumer-group poll without a partition reads the member's assignment (`SYNC_CONSUMER_GROUP`) and polls its partitions in turn, as the SDK does: not a member is `ConsumerGroupMemberNotFound`, a member without partitions an empty poll for `NO_ASSIGNED_PARTITION`, a re-sync answer reads the assignment again once. With an encryptor, every payload and user-header block polled is opened (see [Encryption](#encryption)). |
//! | `send_messages` | Native `send`, on the partition's primary, the partition chosen by the SDK's rules. A message with id 0 gets a fresh UUID, written back into the caller's message as the SDK does. Origin timestamps go out as the messages carry them (the SDK's message builder stamps them; a 0 is stored as 0), where the native `send` stamps a 0 with the time of the call. A user-header block goes out as given (the server never reads it), of any size the frame carries, as the SDK's `send_messages` sends it. With an encryptor, payloads and header blocks are sealed first (see [Encryption](#encryption)). The answer holds the batch's confirmation (see [Differences](#differences)). |
//! | `flush_unsaved_buffer` | Native, on the partition's primary (the 0.11.0 server answers `FeatureUnavailable`); a partition the topic does not have is `PartitionNotFound` (3007), nothing sent (see [Differences](#differences)). |
//! | `store_consumer_offset` | Native `store_offset` on the partition's primary. **Without a partition: `ResourceNotFound` (20)**, nothing sent, as the 0.11.0 server answers it. |
//! | `get_consumer_offset`, `delete_consumer_offset` | Native. |
//! | `get_consumer_group`, `get_consumer_groups`, `create_consumer_group`, `delete_consumer_group`, `join_consumer_group`, `leave_consumer_group` | Native (a membership lives on its own link to the metadata leader). |
//!
//! Before sending, every method checks the SDK session as the SDK does: `ClientShutdown`
//! (63) after a shutdown, `Unauthenticated` (40) after `logout_user` (see the table); after
//! `disconnect` it connects again first.
//!
//! # Encryption
//!
//! [`Client::with_encryptor`](crate::Client::with_encryptor) takes the SDK's
//! `EncryptorKind`, as `IggyClientBuilder::with_encryptor` does, and then does what the SDK's
//! `IggyClient` does with it: `send_messages` seals each message's payload and user-header
//! block, each with a fresh nonce, and writes them back into the caller's messages;
//! `poll_messages` opens them, and fails with `CannotDecryptData` (a message sealed with
//! another key, or not sealed) as the SDK's does, never a panic on a payload too short to
//! hold a nonce. A topic written by either client with a key reads the same through the
//! other with that key. The native `send` and `poll` move bytes as given.
//!
//! # Errors
//!
//! iggy-route's errors become the SDK's by [`IntoIggyError`] (a trait: `ClientError` and
//! `IggyError` are both foreign to this crate, so no `From` between them can be written
//! here). A server's error keeps its code exactly as the SDK reads it.
//!
//! | iggy-route (`ClientError` / `RequestError` / `SubmitError`) | `IggyError` (code) | meaning |
//! |---|---|---|
//! | `Request(Server { code })`, `Request(SignIn { code })`, `Request(Evicted { code, .. })` | `IggyError::from_code(code)` (the server's code) | what the SDK reads from the same reply |
//! | `Request(OutcomeUnknown)`, `Request(TimedOut { in_doubt: true })` | **`TransientNotCommitted` (57)** | **the request may or may not have been stored** (a link lost, or a deadline passed with a write in flight or after one was lost in flight). Not a plain failure, whatever the error's text says: 57 is the protocol's code for a write whose commit is not confirmed, and what the SDK returns when its own replays of one run out. Send again only where a duplicate is acceptable. |
//! | `Request(ConnectionLost)` | `Disconnected` (8) | a read lost with its link twice; nothing was stored |
//! | `Request(TopicNotFound)` | `TopicIdNotFound` (2010); from `send_messages` to a named partition, `ResourceNotFound` (20), the server's answer to such a send (a balanced or keyed send keeps 2010, as the SDK reads the topic first for those) | no such stream or topic |
//! | `Request(PartitionOutOfRange)` | `PartitionNotFound` (3007); from `send_messages`, `ResourceNotFound` (20), as above, except a balanced or keyed send to a topic with no partition: `TopicIdNotFound` (2010), as the SDK reports it | |
//! | `Request(NoRoute)`, `Request(TimedOut { in_doubt: false })` | `TransientNotAccepted` (58) | no node admitted it (none could be found, or its deadline passed before one did, or it only read); nothing stored, may be sent again |
//! | `Request(Malformed)`, `UnexpectedReply` | `InvalidFormat` (4) | a reply that does not decode, or of another kind than the request: the node read the request, so a write may be stored (natively, `in_doubt()` is true) |
//! | `QueueFull`, `Request(QueueFull)`, `Submit(QueueFull)` | `BackgroundSendBufferFull` (4053) | too many requests waiting; nothing sent |
//! | `Closed`, `Request(Shutdown)`, `Request(Closed)`, `Submit(Closed)` | `ClientShutdown` (63) | after the program's `shutdown`, nothing was sent (a write in flight at the shutdown ends 57); `Closed` also ends a call whose client stopped under it (its task panicked, its runtime went away), whose write may be stored |
//! | `Submit(FrameTooLarge)` | `CommandLengthError` (4029) | nothing sent |
//! | `Submit(EmptyBatch)`, `Submit(EmptyPoll)` | `InvalidMessagesCount` (4009) | nothing sent |
//! | `Submit(Invalid)`, `Invalid` | `InvalidFormat` (4) | nothing sent |
//! | `Submit(SessionCommand)` | `InvalidCommand` (3) | as the SDK refuses a login sent raw |
//! | `Config` | `InvalidConfiguration` (2) | |
//! | `ConnectionString` | `InvalidConnectionString` (8000) | |
//! | `Io` | `IoError` (13000) | |
//! | `Tls(CaFile)` | `InvalidTlsCertificatePath` (65) | |
//! | `Tls(InvalidServerName)` | `InvalidTlsDomain` (64) | |
//! | `Tls(NameMismatch)`, `Tls(CertificateRejected)` | `InvalidTlsCertificate` (66) | |
//! | `Tls(NotTls)`, `Tls(HandshakeTimedOut)`, `Tls(Other)`, `ConnectTimedOut` | `CannotEstablishConnection` (9) | |
//! | anything else (`Withdrawn`, `GroupConsumerExists`, variants added later) | `Error` (1) | no SDK trait method meets them |
//!
//! # Events
//!
//! iggy-route's router reports its links' ups and downs; the receiver `subscribe_events`
//! answers hears those of the session's link, and what the trait's own calls do:
//!
//! | `DiagnosticEvent` | when |
//! |---|---|
//! | `Connected`, then `SignedIn` | the session's link signed in: when the client connects, after the link was lost, after the session moved to another node or signed in again after a logout; and after `disconnect`, at the next method or `connect` |
//! | `SignedIn` | also after each successful `login_user` / `login_with_personal_access_token` (after a logout it may come twice: the link's and the login's) |
//! | `Disconnected` | the session's link went down (the router brings it back at once), or `disconnect` |
//! | `SignedOut` | `logout_user` |
//! | `Shutdown` | the client shut down, by the trait's `shutdown` or the native one |
//!
//! A receiver hears what happens after it subscribed (the SDK's also replays what its own
//! channel still holds). It holds up to 1,000 events unread; past that the oldest go and
//! its next `recv` reports how many it missed. The router never waits for it.
//!
//! # Differences
//!
//! - Streams, topics and users come with an empty `options` map: iggy-route checks the
//!   options blocks of those replies but does not keep them.
//! - A polled message's `header.checksum` is 0: iggy-route checks a polled batch's layout,
//!   not its checksums (as the SDK), and does not keep them.
//! - `send_messages` confirms with the stream's and topic's numeric ids. For a stream or
//!   topic named by name they are read once (`GET_STREAM`, after the first send) and kept
//!   until this client renames or deletes a stream or topic; a topic another client deletes
//!   and creates again under the same name is confirmed with its old id meanwhile. When the
//!   server reports no offset (a duplicate batch) or the ids cannot be read (a user who may
//!   send to the stream but not read it is asked once), the list is empty, as the SDK's may
//!   be; a send is never failed for it.
//! - Balanced sends (`Partitioning::balanced()`): both keep one cursor per stream and
//!   topic identifier as written (a topic named by name and by number rotates twice). The
//!   SDK keeps the partition count it first read for an identifier for the client's life,
//!   so partitions added later are never balanced to; iggy-route reads it again once it is
//!   a second old (from the session's node, which may be up to half a second behind the
//!   leader), so partitions another client added get sends within about a second, and
//!   those this client added get them at once (a count from a node that has not applied
//!   the client's own write is read again). A balanced send also
//!   passes over a partition whose primary is not admitting or whose queue is long while
//!   another's is short, where the SDK takes the partitions strictly in turn and waits
//!   behind a slow one. Keyed and explicit sends pick exactly the SDK's partition.
//! - Group polls without a partition: both read the member's assignment again a heartbeat
//!   interval after they last read it, so a member whose assignment grew polls its new
//!   partitions within that interval (the SDK on its heartbeat, iggy-route at the first
//!   poll after it). An explicit `refresh_consumer_group_assignments` reads them at once
//!   here, as the trait documents; the SDK's `IggyClient` does not pass that call on to its
//!   connection, so there it changes nothing, and the rotation after another member's join
//!   may start on another partition than the SDK's.
//! - A group joined through one set of identifiers (by name, say) and then polled, read,
//!   committed or left through another (by number) is one membership on both, as the
//!   server resolves the group first. The router keeps a membership under the identifiers
//!   its join used, so before a first join iggy-route reads the stream, the topic and the
//!   group (two metadata reads), joins by their ids, and writes later requests that name
//!   the group by any of those names or ids with the ids. A rename through this client
//!   reads the names again; after a rename by another client, the group is found by its
//!   ids and its old names (the SDK: by its ids and its new names), and polls by the new
//!   names are `ConsumerGroupMemberNotFound`. A group another client deletes and creates
//!   again under its name is a new group on both: a leave naming it by that name is
//!   answered by the server for the new group, as the SDK's is, and its old number names
//!   nothing. The SDK keeps one poll rotation per group
//!   identifier as written; iggy-route keeps the joined group's one, so after a switch of
//!   names the two may poll the member's partitions in another order.
//! - A member's reads it has not committed yet, when another member joins: the server
//!   keeps a partition with a member that is still reading it (polled past its stored
//!   offset) only when the node that takes the join saw those polls. iggy-route polls a
//!   partition on its primary, so with primaries spread over the nodes the metadata leader
//!   usually saw none of them, and hands such a partition to the newcomer at once, which
//!   reads the uncommitted messages again (at least once, as the server's own comment on
//!   this handover has it). A member that commits as it reads (auto-commit) reads nothing
//!   twice; on a cluster whose primaries are all on the leader, the two agree.
//! - Offsets on a cluster: iggy-route stores a consumer's or group's offset (an offset
//!   write, an auto-commit poll) on the partition's primary, on any server. The SDK 0.11.0
//!   sends both through the routing commands once it sees more than one node, and a
//!   server without them (the one built from the public source) answers `InvalidCommand`.
//! - A `login_user` or `login_with_personal_access_token` as another user that the server
//!   refuses still signs the session in again, with the credentials it had, on the
//!   metadata leader, so the session may move to another node; the SDK's stays where it
//!   was. A login that succeeds moves the session to the leader on both (the SDK redirects
//!   to the leader after a login).
//! - `flush_unsaved_buffer` of a partition that does not exist answers `PartitionNotFound`
//!   (3007) without asking the server; of one that exists, `FeatureUnavailable` (5), as
//!   the server does.
//! - A send that names a topic by the name another client has just renamed it from fails
//!   with `TopicIdNotFound` (2010), where the SDK gets the server's `ResourceNotFound`
//!   (20).

mod bodies;
mod convert_admin;
mod convert_messages;
mod convert_users;
mod encryption;
mod errors;
mod group_names;
mod groups;
mod impl_groups;
mod impl_messages;
mod impl_streams;
mod impl_system;
mod impl_users;
mod session;

pub use errors::IntoIggyError;
pub(crate) use session::{Diagnostics, SdkState};

/// The SDK trait object: what a program written against the SDK holds.
const _: () = {
    const fn sdk_client<T: iggy_common::Client + 'static>() {}
    sdk_client::<crate::Client>();
};
