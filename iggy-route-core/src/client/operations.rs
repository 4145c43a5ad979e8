//! The one list of the operations both adapters' clients expose: see
//! [`for_each_operation!`](crate::for_each_operation); and their `producer` and `consumer`
//! (`builder_methods!`).

/// Hands the list of client operations to `$callback`, a macro each adapter writes to turn
/// every entry into a method of its `Client` (an `async fn` on tokio, a blocking one on mio).
/// Each entry is the method's doc comment, its name, its arguments (without `&self`), the
/// typed value it answers with, and the expression that builds its [`Call`]:
///
/// ```text
/// /// Doc comment, as the adapters show it.
/// fn name(argument: Type, ...) -> Answer = Call::name(argument, ...)?;
/// ```
///
/// The expression is evaluated in a method returning `Result<Answer, ClientError>` (a
/// fallible constructor ends in `?`) and yields a `Call<Answer>`. The adapter's one generic
/// method submits it: it stamps the call with its clock ([`Call::stamp_origin_timestamps`]),
/// submits `call.request` and reads the reply with `call.reply`. Types are written as
/// `$crate` paths, as the entries expand in the adapters' modules.
///
/// To add an operation, add its entry here (and its `Call` constructor): both adapters'
/// clients gain the method. Operations whose signatures differ between the adapters
/// (`connect`, `from_connection_string`, `stats`, `shutdown`) are not listed; each adapter
/// writes them by hand.
///
/// ```
/// use iggy_route_core::client::{Call, ClientError};
/// use iggy_route_core::{Reply, Request};
///
/// /// A client whose transport answers every request "no such topic".
/// struct Client;
///
/// impl Client {
///     fn request(&self, _request: Request) -> Result<Reply, ClientError> {
///         Ok(Reply::Topic(None))
///     }
///
///     fn run<T>(&self, mut call: Call<T>) -> Result<T, ClientError> {
///         call.stamp_origin_timestamps(1_700_000_000_000_000);
///         let Call { request, reply } = call;
///         reply.extract(self.request(request)?)
///     }
/// }
///
/// macro_rules! blocking_methods {
///     ($(
///         $(#[$meta:meta])*
///         fn $name:ident($($arg:ident: $ty:ty),* $(,)?) -> $answer:ty = $call:expr;
///     )*) => {$(
///         $(#[$meta])*
///         pub fn $name(&self, $($arg: $ty),*) -> Result<$answer, ClientError> {
///             self.run($call)
///         }
///     )*};
/// }
///
/// impl Client {
///     iggy_route_core::for_each_operation!(blocking_methods);
/// }
///
/// assert!(matches!(Client.get_topic("orders", 1u32), Ok(None)));
/// assert!(matches!(
///     Client.create_stream("orders"),
///     Err(ClientError::UnexpectedReply { .. })
/// ));
/// ```
///
/// [`Call`]: crate::client::Call
/// [`Call::stamp_origin_timestamps`]: crate::client::Call::stamp_origin_timestamps
#[macro_export]
#[doc(hidden)]
macro_rules! for_each_operation {
    ($callback:ident) => { $callback! {
    /// Appends `messages` to the partition `partitioning` picks, on that partition's
    /// primary. A message with id 0 gets a fresh id, and one with `origin_timestamp` 0 gets
    /// the current time, as with the SDK.
    fn send(
        stream: impl TryInto<$crate::wire::Identifier, Error: Into<$crate::client::ClientError>>,
        topic: impl TryInto<$crate::wire::Identifier, Error: Into<$crate::client::ClientError>>,
        partitioning: $crate::partitioning::Partitioning,
        messages: Vec<$crate::wire::Message>,
    ) -> $crate::SendReceipt
        = $crate::client::Call::send(stream, topic, partitioning, messages)?;

    /// Reads up to `count` messages of one partition (or of the partition the server picks,
    /// for `None`) without committing the consumer offset.
    fn poll(
        stream: impl TryInto<$crate::wire::Identifier, Error: Into<$crate::client::ClientError>>,
        topic: impl TryInto<$crate::wire::Identifier, Error: Into<$crate::client::ClientError>>,
        partition_id: Option<u32>,
        consumer: $crate::wire::Consumer,
        strategy: $crate::wire::PollingStrategy,
        count: u32,
    ) -> $crate::wire::PollMessagesReply
        = $crate::client::Call::poll(stream, topic, partition_id, consumer, strategy, count)?;

    /// A poll with every field given, including `auto_commit`.
    fn poll_request(request: $crate::PollRequest) -> $crate::wire::PollMessagesReply
        = $crate::client::Call::poll_request(request);

    /// Stores `consumer`'s offset on the partition's primary.
    fn store_offset(
        consumer: $crate::wire::Consumer,
        stream: impl TryInto<$crate::wire::Identifier, Error: Into<$crate::client::ClientError>>,
        topic: impl TryInto<$crate::wire::Identifier, Error: Into<$crate::client::ClientError>>,
        partition_id: u32,
        offset: u64,
    ) -> ()
        = $crate::client::Call::store_offset(consumer, stream, topic, partition_id, offset)?;

    /// Creates a stream.
    fn create_stream(name: &str) -> $crate::wire::StreamDetails
        = $crate::client::Call::create_stream(name)?;

    /// Creates a topic with `partitions_count` partitions.
    fn create_topic(
        stream: impl TryInto<$crate::wire::Identifier, Error: Into<$crate::client::ClientError>>,
        name: &str,
        partitions_count: u32,
    ) -> $crate::wire::TopicDetails
        = $crate::client::Call::create_topic(stream, name, partitions_count)?;

    /// Adds `partitions_count` partitions to a topic.
    fn create_partitions(
        stream: impl TryInto<$crate::wire::Identifier, Error: Into<$crate::client::ClientError>>,
        topic: impl TryInto<$crate::wire::Identifier, Error: Into<$crate::client::ClientError>>,
        partitions_count: u32,
    ) -> ()
        = $crate::client::Call::create_partitions(stream, topic, partitions_count)?;

    /// A stream's details, or `None` when there is no such stream.
    fn get_stream(
        stream: impl TryInto<$crate::wire::Identifier, Error: Into<$crate::client::ClientError>>,
    ) -> Option<$crate::wire::StreamDetails>
        = $crate::client::Call::get_stream(stream)?;

    /// A topic's details, or `None` when there is no such topic.
    fn get_topic(
        stream: impl TryInto<$crate::wire::Identifier, Error: Into<$crate::client::ClientError>>,
        topic: impl TryInto<$crate::wire::Identifier, Error: Into<$crate::client::ClientError>>,
    ) -> Option<$crate::wire::TopicDetails>
        = $crate::client::Call::get_topic(stream, topic)?;

    /// A user with its permissions, or `None` when there is no such user.
    fn get_user(
        user: impl TryInto<$crate::wire::Identifier, Error: Into<$crate::client::ClientError>>,
    ) -> Option<$crate::wire::UserDetails>
        = $crate::client::Call::get_user(user)?;

    /// Every user, by id.
    fn get_users() -> Vec<$crate::wire::UserInfo>
        = $crate::client::Call::get_users();

    /// Creates a user (username 3..=50 bytes, password 3..=100); `permissions: None`
    /// grants nothing.
    fn create_user(
        username: &str,
        password: &str,
        status: $crate::wire::UserStatus,
        permissions: Option<$crate::wire::Permissions>,
    ) -> $crate::wire::UserDetails
        = $crate::client::Call::create_user(username, password, status, permissions)?;

    /// Deletes a user.
    fn delete_user(
        user: impl TryInto<$crate::wire::Identifier, Error: Into<$crate::client::ClientError>>,
    ) -> ()
        = $crate::client::Call::delete_user(user)?;

    /// Renames a user and/or changes its status (`None` leaves a field as it is).
    fn update_user(
        user: impl TryInto<$crate::wire::Identifier, Error: Into<$crate::client::ClientError>>,
        username: Option<&str>,
        status: Option<$crate::wire::UserStatus>,
    ) -> ()
        = $crate::client::Call::update_user(user, username, status)?;

    /// Replaces a user's permissions whole (`None` removes them all).
    fn update_permissions(
        user: impl TryInto<$crate::wire::Identifier, Error: Into<$crate::client::ClientError>>,
        permissions: Option<$crate::wire::Permissions>,
    ) -> ()
        = $crate::client::Call::update_permissions(user, permissions)?;

    /// Changes a user's password; the server checks `current_password`.
    fn change_password(
        user: impl TryInto<$crate::wire::Identifier, Error: Into<$crate::client::ClientError>>,
        current_password: &str,
        new_password: &str,
    ) -> ()
        = $crate::client::Call::change_password(user, current_password, new_password)?;

    /// The session user's personal access tokens (names and expiries), by name.
    fn get_personal_access_tokens() -> Vec<$crate::wire::PersonalAccessTokenInfo>
        = $crate::client::Call::get_personal_access_tokens();

    /// Creates a personal access token for the session user; the token, shown this once,
    /// comes back as a `Password` whose `Debug` prints `***`.
    fn create_personal_access_token(
        name: &str,
        expiry: $crate::wire::TokenExpiry,
    ) -> $crate::wire::Password
        = $crate::client::Call::create_personal_access_token(name, expiry)?;

    /// Deletes one of the session user's personal access tokens, by name.
    fn delete_personal_access_token(name: &str) -> ()
        = $crate::client::Call::delete_personal_access_token(name)?;
    /// Checks that the session's node answers (`PING`).
    fn ping() -> () = $crate::client::Call::ping();

    /// The server's statistics (its clients count is the answering node's).
    fn get_stats() -> $crate::wire::ServerStats = $crate::client::Call::get_stats();

    /// This client's own connection, as the node holding its session sees it.
    fn get_me() -> $crate::wire::ClientDetails = $crate::client::Call::get_me();

    /// A client connected to the node holding the session, or `None` when it has none
    /// with this id (each node knows only its own connections).
    fn get_client(client_id: u32) -> Option<$crate::wire::ClientDetails>
        = $crate::client::Call::get_client(client_id);

    /// The clients connected to the node holding the session.
    fn get_clients() -> Vec<$crate::wire::ClientInfo> = $crate::client::Call::get_clients();

    /// Every stream.
    fn get_streams() -> Vec<$crate::wire::StreamSummary> = $crate::client::Call::get_streams();

    /// Renames a stream.
    fn update_stream(
        stream: impl TryInto<$crate::wire::Identifier, Error: Into<$crate::client::ClientError>>,
        name: &str,
    ) -> ()
        = $crate::client::Call::update_stream(stream, name)?;

    /// Deletes a stream with its topics and messages.
    fn delete_stream(
        stream: impl TryInto<$crate::wire::Identifier, Error: Into<$crate::client::ClientError>>,
    ) -> ()
        = $crate::client::Call::delete_stream(stream)?;

    /// Deletes every message and consumer offset of a stream's topics, keeping them.
    fn purge_stream(
        stream: impl TryInto<$crate::wire::Identifier, Error: Into<$crate::client::ClientError>>,
    ) -> ()
        = $crate::client::Call::purge_stream(stream)?;

    /// Every topic of a stream (none when there is no such stream).
    fn get_topics(
        stream: impl TryInto<$crate::wire::Identifier, Error: Into<$crate::client::ClientError>>,
    ) -> Vec<$crate::wire::TopicSummary>
        = $crate::client::Call::get_topics(stream)?;

    /// Renames a topic and changes the settings `options` holds; the others stay.
    fn update_topic(
        stream: impl TryInto<$crate::wire::Identifier, Error: Into<$crate::client::ClientError>>,
        topic: impl TryInto<$crate::wire::Identifier, Error: Into<$crate::client::ClientError>>,
        name: &str,
        options: $crate::wire::TopicUpdateOptions,
    ) -> ()
        = $crate::client::Call::update_topic(stream, topic, name, options)?;

    /// Deletes a topic with its partitions and messages.
    fn delete_topic(
        stream: impl TryInto<$crate::wire::Identifier, Error: Into<$crate::client::ClientError>>,
        topic: impl TryInto<$crate::wire::Identifier, Error: Into<$crate::client::ClientError>>,
    ) -> ()
        = $crate::client::Call::delete_topic(stream, topic)?;

    /// Deletes every message and consumer offset of a topic, keeping its partitions.
    fn purge_topic(
        stream: impl TryInto<$crate::wire::Identifier, Error: Into<$crate::client::ClientError>>,
        topic: impl TryInto<$crate::wire::Identifier, Error: Into<$crate::client::ClientError>>,
    ) -> ()
        = $crate::client::Call::purge_topic(stream, topic)?;

    /// Removes a topic's last `partitions_count` partitions.
    fn delete_partitions(
        stream: impl TryInto<$crate::wire::Identifier, Error: Into<$crate::client::ClientError>>,
        topic: impl TryInto<$crate::wire::Identifier, Error: Into<$crate::client::ClientError>>,
        partitions_count: u32,
    ) -> ()
        = $crate::client::Call::delete_partitions(stream, topic, partitions_count)?;

    /// Removes a partition's oldest `segments_count` sealed segments.
    fn delete_segments(
        stream: impl TryInto<$crate::wire::Identifier, Error: Into<$crate::client::ClientError>>,
        topic: impl TryInto<$crate::wire::Identifier, Error: Into<$crate::client::ClientError>>,
        partition_id: u32,
        segments_count: u32,
    ) -> ()
        = $crate::client::Call::delete_segments(stream, topic, partition_id, segments_count)?;

    /// `consumer`'s stored offset on a partition (partition 0 for `None`), or `None` when
    /// it has none.
    fn get_consumer_offset(
        consumer: $crate::wire::Consumer,
        stream: impl TryInto<$crate::wire::Identifier, Error: Into<$crate::client::ClientError>>,
        topic: impl TryInto<$crate::wire::Identifier, Error: Into<$crate::client::ClientError>>,
        partition_id: Option<u32>,
    ) -> Option<$crate::wire::ConsumerOffsetInfo>
        = $crate::client::Call::get_consumer_offset(consumer, stream, topic, partition_id)?;

    /// Deletes `consumer`'s stored offset on a partition.
    fn delete_consumer_offset(
        consumer: $crate::wire::Consumer,
        stream: impl TryInto<$crate::wire::Identifier, Error: Into<$crate::client::ClientError>>,
        topic: impl TryInto<$crate::wire::Identifier, Error: Into<$crate::client::ClientError>>,
        partition_id: Option<u32>,
    ) -> ()
        = $crate::client::Call::delete_consumer_offset(consumer, stream, topic, partition_id)?;

    /// A consumer group with its members and their partitions, or `None` when there is
    /// no such group.
    fn get_consumer_group(
        stream: impl TryInto<$crate::wire::Identifier, Error: Into<$crate::client::ClientError>>,
        topic: impl TryInto<$crate::wire::Identifier, Error: Into<$crate::client::ClientError>>,
        group: impl TryInto<$crate::wire::Identifier, Error: Into<$crate::client::ClientError>>,
    ) -> Option<$crate::wire::ConsumerGroupDetails>
        = $crate::client::Call::get_consumer_group(stream, topic, group)?;

    /// Every consumer group of a topic.
    fn get_consumer_groups(
        stream: impl TryInto<$crate::wire::Identifier, Error: Into<$crate::client::ClientError>>,
        topic: impl TryInto<$crate::wire::Identifier, Error: Into<$crate::client::ClientError>>,
    ) -> Vec<$crate::wire::ConsumerGroupInfo>
        = $crate::client::Call::get_consumer_groups(stream, topic)?;

    /// Creates a consumer group on a topic (the server picks its id) and answers it.
    fn create_consumer_group(
        stream: impl TryInto<$crate::wire::Identifier, Error: Into<$crate::client::ClientError>>,
        topic: impl TryInto<$crate::wire::Identifier, Error: Into<$crate::client::ClientError>>,
        name: &str,
    ) -> $crate::wire::ConsumerGroupDetails
        = $crate::client::Call::create_consumer_group(stream, topic, name)?;

    /// Deletes a consumer group, its membership and its stored offsets.
    fn delete_consumer_group(
        stream: impl TryInto<$crate::wire::Identifier, Error: Into<$crate::client::ClientError>>,
        topic: impl TryInto<$crate::wire::Identifier, Error: Into<$crate::client::ClientError>>,
        group: impl TryInto<$crate::wire::Identifier, Error: Into<$crate::client::ClientError>>,
    ) -> ()
        = $crate::client::Call::delete_consumer_group(stream, topic, group)?;

    /// Joins a consumer group. The membership belongs to its own link to the metadata
    /// leader, which is kept alive while the membership lasts; joining a group already
    /// joined answers at once.
    fn join_consumer_group(
        stream: impl TryInto<$crate::wire::Identifier, Error: Into<$crate::client::ClientError>>,
        topic: impl TryInto<$crate::wire::Identifier, Error: Into<$crate::client::ClientError>>,
        group: impl TryInto<$crate::wire::Identifier, Error: Into<$crate::client::ClientError>>,
    ) -> ()
        = $crate::client::Call::join_consumer_group(stream, topic, group)?;

    /// Leaves a consumer group: the group rebalances its partitions among the others.
    fn leave_consumer_group(
        stream: impl TryInto<$crate::wire::Identifier, Error: Into<$crate::client::ClientError>>,
        topic: impl TryInto<$crate::wire::Identifier, Error: Into<$crate::client::ClientError>>,
        group: impl TryInto<$crate::wire::Identifier, Error: Into<$crate::client::ClientError>>,
    ) -> ()
        = $crate::client::Call::leave_consumer_group(stream, topic, group)?;

    /// This member's partitions of a group and the group's generation, or `None` when it
    /// is not (or no longer) a member.
    fn sync_consumer_group(
        stream: impl TryInto<$crate::wire::Identifier, Error: Into<$crate::client::ClientError>>,
        topic: impl TryInto<$crate::wire::Identifier, Error: Into<$crate::client::ClientError>>,
        group: impl TryInto<$crate::wire::Identifier, Error: Into<$crate::client::ClientError>>,
    ) -> Option<$crate::wire::ConsumerGroupAssignment>
        = $crate::client::Call::sync_consumer_group(stream, topic, group)?;

    /// Asks the partition's primary to write its unsaved messages to disk (the 0.11.0
    /// server answers `FeatureUnavailable`: it has no such operation).
    fn flush_unsaved_buffer(
        stream: impl TryInto<$crate::wire::Identifier, Error: Into<$crate::client::ClientError>>,
        topic: impl TryInto<$crate::wire::Identifier, Error: Into<$crate::client::ClientError>>,
        partition_id: u32,
        fsync: bool,
    ) -> ()
        = $crate::client::Call::flush_unsaved_buffer(stream, topic, partition_id, fsync)?;

    /// Ends the session on the node holding it (`LOGOUT_USER`). The client keeps its
    /// credentials: its next request signs in again, as a new client on the same node.
    fn logout_user() -> () = $crate::client::Call::logout_user();

    /// The cluster's name and nodes (roles, states, addresses), as the node holding the
    /// session sees them.
    fn get_cluster_metadata() -> $crate::wire::ClusterMetadata
        = $crate::client::Call::get_cluster_metadata();
    } };
}

/// Writes an adapter's `Client::producer` and `Client::consumer` (inside its `impl
/// Client`): the core's builders over the adapter's client, declared once so that both
/// adapters hand them out alike. The arguments are the adapter's names for the builders
/// (`ProducerBuilder<Direct>` and `ConsumerBuilder` over its `Client`), which its
/// documentation shows. The client implements
/// [`StartProducer`](crate::client::producer::StartProducer) and
/// [`StartConsumer`](crate::client::consumer::StartConsumer), and is `Clone`.
#[macro_export]
#[doc(hidden)]
macro_rules! builder_methods {
    ($producer_builder:ty, $consumer_builder:ty) => {
        /// Starts building a producer of `stream`'s `topic` (each named by its name or its
        /// number, as for [`send`](Self::send)): a direct producer unless `background` is
        /// chosen. Fails only on a name that is no identifier.
        pub fn producer(
            &self,
            stream: impl TryInto<$crate::wire::Identifier, Error: Into<$crate::client::ClientError>>,
            topic: impl TryInto<$crate::wire::Identifier, Error: Into<$crate::client::ClientError>>,
        ) -> Result<$producer_builder, $crate::client::ClientError> {
            <$producer_builder>::new(self.clone(), stream, topic)
        }

        /// Starts building a consumer of `stream`'s `topic` (each named as for
        /// [`send`](Self::send)): a single consumer with id 0 of every partition unless
        /// told otherwise. Fails only on a name that is no identifier.
        pub fn consumer(
            &self,
            stream: impl TryInto<$crate::wire::Identifier, Error: Into<$crate::client::ClientError>>,
            topic: impl TryInto<$crate::wire::Identifier, Error: Into<$crate::client::ClientError>>,
        ) -> Result<$consumer_builder, $crate::client::ClientError> {
            <$consumer_builder>::new(self.clone(), stream, topic)
        }
    };
}
