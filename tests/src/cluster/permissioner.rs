//! The permission rules of a 0.11.0 server (`core/metadata/src/permissioner/` of the
//! server source), over one user's [`Permissions`].
//!
//! Every denial is `Unauthorized (41)`. A user without permissions (`None`), or one that
//! no longer exists, is denied everything. Streams and topics are named by their numeric
//! ids, as permissions name them; when a permission set lists a stream or topic twice,
//! the last entry counts, as in the server's maps.

use iggy_route_core::wire::{
    ErrorCode, GlobalPermissions, Permissions, StreamPermissions, TopicPermissions,
};

/// What one user may do.
#[derive(Debug, Clone, Copy)]
pub struct Permissioner<'a> {
    permissions: Option<&'a Permissions>,
}

type Rule = Result<(), ErrorCode>;

fn allow(allowed: bool) -> Rule {
    if allowed {
        Ok(())
    } else {
        Err(ErrorCode::Unauthorized)
    }
}

impl<'a> Permissioner<'a> {
    /// The rules for a user with these permissions (`None`: none at all).
    pub fn new(permissions: Option<&'a Permissions>) -> Self {
        Self { permissions }
    }

    fn global(&self) -> Option<&'a GlobalPermissions> {
        self.permissions.map(|permissions| &permissions.global)
    }

    fn stream(&self, stream: u32) -> Option<&'a StreamPermissions> {
        self.permissions?
            .streams
            .iter()
            .rev()
            .find(|entry| entry.stream_id == stream)
    }

    fn topic(&self, stream: u32, topic: u32) -> Option<&'a TopicPermissions> {
        self.stream(stream)?
            .topics
            .iter()
            .rev()
            .find(|entry| entry.topic_id == topic)
    }

    fn any_global(&self, flag: impl Fn(&GlobalPermissions) -> bool) -> bool {
        self.global().is_some_and(flag)
    }

    fn any_stream(&self, stream: u32, flag: impl Fn(&StreamPermissions) -> bool) -> bool {
        self.stream(stream).is_some_and(flag)
    }

    fn any_topic(&self, stream: u32, topic: u32, flag: impl Fn(&TopicPermissions) -> bool) -> bool {
        self.topic(stream, topic).is_some_and(flag)
    }

    // ---- users and the server ---------------------------------------------------------

    /// Create, update or delete users, change their permissions or another user's
    /// password.
    pub fn manage_users(&self) -> Rule {
        allow(self.any_global(|g| g.manage_users))
    }

    /// `GET_USER` of another user, `GET_USERS`.
    pub fn read_users(&self) -> Rule {
        allow(self.any_global(|g| g.manage_users || g.read_users))
    }

    /// Stats, clients, snapshots.
    pub fn read_servers(&self) -> Rule {
        allow(self.any_global(|g| g.manage_servers || g.read_servers))
    }

    // ---- streams -----------------------------------------------------------------------

    /// `CREATE_STREAM`: only the global `manage_streams`.
    pub fn create_stream(&self) -> Rule {
        allow(self.any_global(|g| g.manage_streams))
    }

    /// Update, delete or purge a stream.
    pub fn manage_stream(&self, stream: u32) -> Rule {
        allow(self.any_global(|g| g.manage_streams) || self.any_stream(stream, |s| s.manage_stream))
    }

    /// `GET_STREAM`.
    pub fn get_stream(&self, stream: u32) -> Rule {
        allow(
            self.any_global(|g| g.manage_streams || g.read_streams)
                || self.any_stream(stream, |s| s.manage_stream || s.read_stream),
        )
    }

    /// `GET_STREAMS`.
    pub fn get_streams(&self) -> Rule {
        allow(self.any_global(|g| g.manage_streams || g.read_streams))
    }

    // ---- topics ------------------------------------------------------------------------

    /// `CREATE_TOPIC` in `stream`.
    pub fn create_topic(&self, stream: u32) -> Rule {
        allow(
            self.any_global(|g| g.manage_streams || g.manage_topics)
                || self.any_stream(stream, |s| s.manage_stream || s.manage_topics),
        )
    }

    /// Update, delete or purge a topic, add or delete its partitions, delete segments.
    pub fn manage_topic(&self, stream: u32, topic: u32) -> Rule {
        allow(
            self.any_global(|g| g.manage_streams || g.manage_topics)
                || self.any_stream(stream, |s| s.manage_stream || s.manage_topics)
                || self.any_topic(stream, topic, |t| t.manage_topic),
        )
    }

    /// `GET_TOPIC`, and every consumer-group command.
    pub fn get_topic(&self, stream: u32, topic: u32) -> Rule {
        allow(
            self.any_global(|g| {
                g.read_streams || g.manage_streams || g.manage_topics || g.read_topics
            }) || self.any_stream(stream, |s| {
                s.manage_stream || s.read_stream || s.manage_topics || s.read_topics
            }) || self.any_topic(stream, topic, |t| t.manage_topic || t.read_topic),
        )
    }

    /// `GET_TOPICS` of `stream`.
    pub fn get_topics(&self, stream: u32) -> Rule {
        allow(
            self.any_global(|g| {
                g.read_streams || g.manage_streams || g.manage_topics || g.read_topics
            }) || self.any_stream(stream, |s| {
                s.manage_stream || s.read_stream || s.manage_topics || s.read_topics
            }),
        )
    }

    // ---- messages and offsets ----------------------------------------------------------

    /// Poll messages; also every consumer-offset read and write, and the routing reads.
    pub fn poll_messages(&self, stream: u32, topic: u32) -> Rule {
        allow(
            self.any_global(|g| {
                g.poll_messages
                    || g.read_topics
                    || g.manage_topics
                    || g.read_streams
                    || g.manage_streams
            }) || self.any_stream(stream, |s| {
                s.poll_messages
                    || s.manage_stream
                    || s.read_stream
                    || s.manage_topics
                    || s.read_topics
            }) || self.any_topic(stream, topic, |t| {
                t.manage_topic || t.read_topic || t.poll_messages
            }),
        )
    }

    /// Send messages.
    pub fn send_messages(&self, stream: u32, topic: u32) -> Rule {
        allow(
            self.any_global(|g| g.send_messages || g.manage_streams || g.manage_topics)
                || self.any_stream(stream, |s| {
                    s.send_messages || s.manage_stream || s.manage_topics
                })
                || self.any_topic(stream, topic, |t| t.manage_topic || t.send_messages),
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn stream_only(stream: StreamPermissions) -> Permissions {
        Permissions {
            global: GlobalPermissions::default(),
            streams: vec![stream],
        }
    }

    #[test]
    fn nothing_is_allowed_without_permissions() {
        let none = Permissioner::new(None);
        let empty_set = Permissions::default();
        let empty = Permissioner::new(Some(&empty_set));
        for rules in [none, empty] {
            assert_eq!(rules.create_stream(), Err(ErrorCode::Unauthorized));
            assert!(rules.manage_users().is_err());
            assert!(rules.read_users().is_err());
            assert!(rules.send_messages(1, 1).is_err());
            assert!(rules.poll_messages(1, 1).is_err());
            assert!(rules.get_topic(1, 1).is_err());
        }
    }

    #[test]
    fn rules_inherit_as_the_server_documents() {
        // Global manage_streams: every stream and topic rule but the user ones.
        let all = Permissions::all();
        let root = Permissioner::new(Some(&all));
        assert!(root.create_stream().is_ok() && root.manage_users().is_ok());

        let global = Permissions {
            global: GlobalPermissions {
                read_topics: true,
                ..GlobalPermissions::default()
            },
            streams: Vec::new(),
        };
        let reader = Permissioner::new(Some(&global));
        assert!(reader.poll_messages(3, 4).is_ok());
        assert!(reader.get_topic(3, 4).is_ok());
        assert!(reader.send_messages(3, 4).is_err());
        assert!(reader.get_stream(3).is_err());

        let sender = stream_only(StreamPermissions {
            stream_id: 1,
            send_messages: true,
            ..StreamPermissions::default()
        });
        let sender = Permissioner::new(Some(&sender));
        assert!(sender.send_messages(1, 9).is_ok());
        assert!(sender.send_messages(2, 9).is_err());
        assert!(sender.poll_messages(1, 9).is_err());
        assert!(sender.manage_stream(1).is_err());

        let topic_only = stream_only(StreamPermissions {
            stream_id: 1,
            topics: vec![TopicPermissions {
                topic_id: 2,
                poll_messages: true,
                ..TopicPermissions::default()
            }],
            ..StreamPermissions::default()
        });
        let topic_only = Permissioner::new(Some(&topic_only));
        assert!(topic_only.poll_messages(1, 2).is_ok());
        assert!(topic_only.poll_messages(1, 3).is_err());
        assert!(topic_only.get_topic(1, 2).is_err());

        let owner = stream_only(StreamPermissions {
            stream_id: 5,
            manage_stream: true,
            ..StreamPermissions::default()
        });
        let owner = Permissioner::new(Some(&owner));
        assert!(owner.manage_stream(5).is_ok());
        assert!(
            owner.create_stream().is_err(),
            "create needs the global flag"
        );
        assert!(owner.create_topic(5).is_ok() && owner.send_messages(5, 1).is_ok());
    }
}
