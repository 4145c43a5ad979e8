//! The one list of the operations both adapters' clients expose: see
//! [`for_each_operation!`](crate::for_each_operation).

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
    } };
}
